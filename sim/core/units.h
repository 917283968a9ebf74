#pragma once
// The one parser for values with units. Every size, bandwidth, compute rate and time in a
// configuration goes through here; a number without a unit, or with the wrong kind of unit,
// is an error, never a guess.
//
//   sizes       B, KB, MB, GB, TB, PB (powers of 1000) and KiB, MiB, GiB, TiB, PiB (of 1024)
//   bandwidths  B/s, KB/s, MB/s, GB/s, TB/s, PB/s, KiB/s, MiB/s, GiB/s, TiB/s, PiB/s
//   rates       FLOPS, KFLOPS, MFLOPS, GFLOPS, TFLOPS, PFLOPS, EFLOPS
//   times       ns, us, ms, s
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memsim {

enum class UnitKind { size, bandwidth, rate, time };

/// What a value of this kind looks like, for error messages: "a size like '80GiB'".
std::string unit_example(UnitKind kind);

/// The physical range of a kind of value, in base units: bounds no real machine reaches, so
/// that every time computed from them stays finite (docs/platforms.md lists them).
/// ConfigNode::as_unit refuses values above `max`; values that must be positive are refused
/// below `min` too.
struct PhysicalRange {
  double min;
  double max;
  std::string_view min_text, max_text;  // as a user writes them: "1KB/s", "1PB/s"
};
PhysicalRange physical_range(UnitKind kind);

/// "a bandwidth from 1KB/s to 1PB/s" (positive) or "a bandwidth from 0 to 1PB/s".
std::string range_text(UnitKind kind, bool positive);

/// Parses "40GiB", "1.5 TB/s", "19.5TFLOPS", "5us". Returns the value in base units
/// (bytes, bytes/s, FLOP/s, seconds) or nullopt when the text is not a value of that kind.
/// Negative values are rejected here; zero is accepted (callers decide if it is allowed).
std::optional<double> parse_unit(std::string_view text, UnitKind kind);

/// A size in whole bytes; rejects fractions of a byte ("1.5B") and values beyond 2^63.
std::optional<std::uint64_t> parse_bytes(std::string_view text);

/// Human-readable forms for the terminal: "38.2 GiB", "1.23 ms", "31.5 GB/s".
std::string format_bytes(double bytes);
std::string format_seconds(double seconds);
std::string format_bandwidth(double bytes_per_s);
std::string format_rate(double flops_per_s);

}  // namespace memsim
