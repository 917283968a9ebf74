#include "sim/workload/durations.h"

#include <cmath>

#include <fmt/format.h>

namespace memsim {

bool is_op_duration(double value, DurationUnit unit) {
  return std::isfinite(value) && value >= 0 && value <= kMostOpSeconds * unit.per_second;
}

std::string op_duration_range(DurationUnit unit) {
  return fmt::format("a time in {} from 0 to {:g} (an hour)", unit.name, kMostOpSeconds * unit.per_second);
}

}  // namespace memsim
