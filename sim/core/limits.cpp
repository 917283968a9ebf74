#include "sim/core/limits.h"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace memsim {
namespace {

constexpr const char* kOpsVariable = "MEMSIM_MAX_OPS";
constexpr const char* kPointsVariable = "MEMSIM_MAX_POINTS";

std::uint64_t limit_from(const char* variable, std::uint64_t fallback, const char* what) {
  const char* v = std::getenv(variable);
  if (!v || !*v) return fallback;
  std::uint64_t n = 0;
  if (!parse_count(v, n))
    throw InputError(fmt::format("{}={}: expected a number of {} from 1 to 2^53, like {}", variable, v, what,
                                 format_limit(fallback)));
  return n;
}

}  // namespace

bool parse_count(const std::string& text, std::uint64_t& out) {
  if (text.empty() || text.find_first_not_of("0123456789.eE+") != std::string::npos) return false;
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !(x >= 1) || x > 9007199254740992.0 || x != std::floor(x)) return false;
  out = static_cast<std::uint64_t>(x);
  return true;
}

std::string format_count(double n) {
  if (!std::isfinite(n)) return "over 1e308";
  if (n < 1e6) return fmt::format("{:.0f}", n);
  const int exponent = static_cast<int>(std::floor(std::log10(n)));
  // Two significant digits ("2.6e9"; "1e7" when the second is 0).
  const double mantissa = std::round(n / std::pow(10.0, exponent) * 10) / 10;
  if (mantissa >= 10) return fmt::format("1e{}", exponent + 1);
  return mantissa == std::floor(mantissa) ? fmt::format("{:.0f}e{}", mantissa, exponent)
                                          : fmt::format("{:.1f}e{}", mantissa, exponent);
}

std::string format_limit(std::uint64_t n) {
  const std::string shorter = format_count(static_cast<double>(n));
  std::uint64_t back = 0;
  return parse_count(shorter, back) && back == n ? shorter : std::to_string(n);
}

std::uint64_t op_limit() { return limit_from(kOpsVariable, kDefaultOpLimit, "ops"); }

void set_op_limit(std::uint64_t ops) { ::setenv(kOpsVariable, std::to_string(ops).c_str(), 1); }

std::uint64_t point_limit() { return limit_from(kPointsVariable, kDefaultPointLimit, "points"); }

void set_point_limit(std::uint64_t points) { ::setenv(kPointsVariable, std::to_string(points).c_str(), 1); }

bool over_op_limit(double ops) { return !(ops <= static_cast<double>(op_limit())); }

std::string ops_over_limit(double ops) {
  return fmt::format("about {} ops; the limit is {} (raise it with --max-ops N or {}=N)", format_count(ops),
                     format_limit(op_limit()), kOpsVariable);
}

}  // namespace memsim
