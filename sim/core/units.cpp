#include "sim/core/units.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace memsim {
namespace {

struct Unit {
  std::string_view suffix;
  double scale;
};

constexpr std::array kSizeUnits{
    Unit{"B", 1.0},           Unit{"KB", 1e3},           Unit{"MB", 1e6},
    Unit{"GB", 1e9},          Unit{"TB", 1e12},          Unit{"PB", 1e15},
    Unit{"KiB", 1024.0},      Unit{"MiB", 1048576.0},    Unit{"GiB", 1073741824.0},
    Unit{"TiB", 1099511627776.0}, Unit{"PiB", 1125899906842624.0},
};
constexpr std::array kRateUnits{
    Unit{"FLOPS", 1.0},   Unit{"KFLOPS", 1e3},  Unit{"MFLOPS", 1e6},
    Unit{"GFLOPS", 1e9},  Unit{"TFLOPS", 1e12}, Unit{"PFLOPS", 1e15},
    Unit{"EFLOPS", 1e18},
};
constexpr std::array kTimeUnits{
    Unit{"ns", 1e-9}, Unit{"us", 1e-6}, Unit{"ms", 1e-3}, Unit{"s", 1.0},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "1.5 TB/s" into the number 1.5 and the suffix "TB/s".
std::optional<std::pair<double, std::string_view>> split_number(std::string_view text) {
  text = trim(text);
  std::size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                               text[end] == '.' || text[end] == 'e' || text[end] == 'E' ||
                               ((text[end] == '+' || text[end] == '-') && end > 0 &&
                                (text[end - 1] == 'e' || text[end - 1] == 'E')))) {
    // An 'e' followed by a letter is the start of a unit, not an exponent ("5e" is not a number).
    if ((text[end] == 'e' || text[end] == 'E') &&
        (end + 1 >= text.size() ||
         !(std::isdigit(static_cast<unsigned char>(text[end + 1])) || text[end + 1] == '+' ||
           text[end + 1] == '-')))
      break;
    ++end;
  }
  if (end == 0) return std::nullopt;
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, value);
  if (ec != std::errc{} || ptr != text.data() + end || !std::isfinite(value)) return std::nullopt;
  return std::pair{value, trim(text.substr(end))};
}

template <std::size_t N>
std::optional<double> scale_of(std::string_view suffix, const std::array<Unit, N>& units) {
  for (const auto& u : units)
    if (u.suffix == suffix) return u.scale;
  return std::nullopt;
}

// Three significant digits, and 1000 to 9999 whole rather than in exponent form: 1020 MiB
// (a power-of-two step leaves values up to 1023 before the next unit), 1500 s.
std::string three_digits(double v) {
  return std::fabs(v) >= 999.5 && std::fabs(v) < 1e4 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v);
}

std::string format_scaled(double value, const char* const* names, double step, int count) {
  int i = 0;
  while (i + 1 < count && std::fabs(value) >= step) {
    value /= step;
    ++i;
  }
  return fmt::format("{} {}", three_digits(value), names[i]);
}

}  // namespace

std::string unit_example(UnitKind kind) {
  switch (kind) {
    case UnitKind::size: return "a size like '80GiB' or '512MB'";
    case UnitKind::bandwidth: return "a bandwidth like '1555GB/s'";
    case UnitKind::rate: return "a compute rate like '19.5TFLOPS'";
    case UnitKind::time: return "a time like '5us'";
  }
  return "a value with a unit";
}

PhysicalRange physical_range(UnitKind kind) {
  switch (kind) {
    // The largest memories and files memsim models are TiBs; a PiB is far past any tier.
    case UnitKind::size: return {1, 1125899906842624.0, "1B", "1PiB"};
    // From a slow serial link to well past the fastest memory's TB/s.
    case UnitKind::bandwidth: return {1e3, 1e15, "1KB/s", "1PB/s"};
    // From a microcontroller to well past the PFLOPS of today's accelerators.
    case UnitKind::rate: return {1e3, 1e18, "1KFLOPS", "1EFLOPS"};
    // Latencies, launch overheads and synchronisations: ns to ms in practice.
    case UnitKind::time: return {1e-9, 1.0, "1ns", "1s"};
  }
  return {0, 0, "", ""};
}

std::string range_text(UnitKind kind, bool positive) {
  const PhysicalRange r = physical_range(kind);
  const char* noun = kind == UnitKind::size        ? "a size"
                     : kind == UnitKind::bandwidth ? "a bandwidth"
                     : kind == UnitKind::rate      ? "a compute rate"
                                                   : "a time";
  return fmt::format("{} from {} to {}", noun, positive ? r.min_text : std::string_view("0"), r.max_text);
}

std::optional<double> parse_unit(std::string_view text, UnitKind kind) {
  auto parts = split_number(text);
  if (!parts) return std::nullopt;
  auto [value, suffix] = *parts;
  if (value < 0) return std::nullopt;
  std::optional<double> scale;
  switch (kind) {
    case UnitKind::size: scale = scale_of(suffix, kSizeUnits); break;
    case UnitKind::rate: scale = scale_of(suffix, kRateUnits); break;
    case UnitKind::time: scale = scale_of(suffix, kTimeUnits); break;
    case UnitKind::bandwidth:
      if (suffix.size() > 2 && suffix.substr(suffix.size() - 2) == "/s")
        scale = scale_of(suffix.substr(0, suffix.size() - 2), kSizeUnits);
      break;
  }
  if (!scale) return std::nullopt;
  return value * *scale;
}

std::optional<std::uint64_t> parse_bytes(std::string_view text) {
  auto value = parse_unit(text, UnitKind::size);
  if (!value || *value >= 9.2e18 || std::floor(*value) != *value) return std::nullopt;
  return static_cast<std::uint64_t>(*value);
}

std::string format_bytes(double bytes) {
  static const char* const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  return format_scaled(bytes, names, 1024.0, 6);
}

std::string format_seconds(double s) {
  if (s == 0) return "0 s";
  if (s < 1e-6) return fmt::format("{} ns", three_digits(s * 1e9));
  if (s < 1e-3) return fmt::format("{} us", three_digits(s * 1e6));
  if (s < 1) return fmt::format("{} ms", three_digits(s * 1e3));
  return fmt::format("{} s", three_digits(s));
}

std::string format_bandwidth(double bps) {
  static const char* const names[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
  return format_scaled(bps, names, 1000.0, 6);
}

std::string format_rate(double flops) {
  static const char* const names[] = {"FLOPS", "KFLOPS", "MFLOPS", "GFLOPS", "TFLOPS", "PFLOPS"};
  return format_scaled(flops, names, 1000.0, 6);
}

}  // namespace memsim
