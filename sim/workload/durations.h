#pragma once
// Measured op durations, as traces state them. Every reader of a trace (the native format,
// PyTorch Execution Traces, Chakra, Kineto) checks each duration it takes in here, so an
// op's measured time is a finite number of seconds from 0 to an hour wherever it came from,
// and a trace memsim writes from it can be read back.
#include <string>
#include <string_view>

namespace memsim {

/// The longest an op may be measured to take: no single op runs for an hour, and sums of
/// such times over a step stay finite.
inline constexpr double kMostOpSeconds = 3600;

/// The unit a trace states its durations in: its name and how many of it make a second.
struct DurationUnit {
  std::string_view name;
  double per_second;
};
inline constexpr DurationUnit kSeconds{"seconds", 1.0};
inline constexpr DurationUnit kMicroseconds{"microseconds", 1e6};

/// Whether `value`, in `unit`, is a time an op can take: finite, from 0 to kMostOpSeconds.
bool is_op_duration(double value, DurationUnit unit);

/// What an error expected: "a time in microseconds from 0 to 3.6e+09 (an hour)".
std::string op_duration_range(DurationUnit unit);

}  // namespace memsim
