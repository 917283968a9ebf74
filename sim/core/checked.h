#pragma once
// Size arithmetic that cannot wrap: element counts times item sizes, sums of bytes. A result
// that would not fit in 64 bits is nullopt, for the caller to report with what it was adding
// up (a silent wrap would make a 2^62-element tensor 0 bytes, and the step "fit").
#include <cstdint>
#include <optional>

namespace memsim {

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace memsim
