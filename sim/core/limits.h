#pragma once
// Bounds on the work an input asks for, checked before the work is made. Input sizes
// multiply: layers x experts x micro-batches x simulated ranks x devices, or a sweep's axes
// x axes. A product past what a run can hold is refused at once, with the keys that made it
// and the figure, instead of filling the machine's memory for minutes and being killed.
//
// Each limit has a default that every shipped preset and test stays under (the largest, the
// 10^6-layer chain, is 4,000,001 ops), a command-line flag and an environment variable, which
// a sweep passes on to its points as it does MEMSIM_MAX_INPUT_SIZE:
//   ops of a run's step        --max-ops N      MEMSIM_MAX_OPS      default 10,000,000
//                                               (about 5 GB of memory at 500 bytes an op)
//   points of a sweep          --max-points N   MEMSIM_MAX_POINTS   default 10,000
#include <cstdint>
#include <string>

namespace memsim {

/// The most ops the step of one run may hold, all simulated devices together.
std::uint64_t op_limit();
/// Sets it for this process and the processes it starts.
void set_op_limit(std::uint64_t ops);

inline constexpr std::uint64_t kDefaultOpLimit = 10'000'000;
inline constexpr std::uint64_t kDefaultPointLimit = 10'000;

/// The most points a sweep may list or run.
std::uint64_t point_limit();
void set_point_limit(std::uint64_t points);

/// Parses a count given to --max-ops or --max-points: digits or a number like 5e7, a whole
/// number from 1 to 2^53 (false otherwise, `out` untouched).
bool parse_count(const std::string& text, std::uint64_t& out);

/// A count as a reader takes it in: exact below a million, else like "2.6e9".
std::string format_count(double n);
/// A limit as the user can type it back: "1e7" when that is exact, else every digit.
std::string format_limit(std::uint64_t n);

/// "about 2.6e9 ops; the limit is 1e7 (raise it with --max-ops N or MEMSIM_MAX_OPS=N)":
/// the end of a message whose start says what makes them.
std::string ops_over_limit(double ops);
/// Whether `ops` is past op_limit().
bool over_op_limit(double ops);

}  // namespace memsim
