#pragma once
// The bounds the platform loader holds a device's timing parameters to, in one place for
// the loader and for what writes such parameters (memsim calibrate): a device file memsim
// writes is one it reads back.
#include <string>

#include "sim/core/units.h"

namespace memsim {

/// Efficiencies scale the roofline: below a millionth an op would take a million times its
/// work, which no calibrated device does (and 1e-320 would make times infinite).
inline constexpr double kLeastEfficiency = 1e-6;
inline constexpr const char* kEfficiencyRange = "a number from 0.000001 to 1";

/// Whether an entry of an `efficiency` or `memory_efficiency` table may be `v`.
inline bool is_device_efficiency(double v) { return v >= kLeastEfficiency && v <= 1; }

/// Whether a device's `launch_overhead` may be `seconds`: a time within its physical range.
inline bool is_launch_overhead(double seconds) {
  return seconds >= 0 && seconds <= physical_range(UnitKind::time).max;
}
/// "a time from 0 to 1s"
inline std::string launch_overhead_range() { return range_text(UnitKind::time, false); }

}  // namespace memsim
