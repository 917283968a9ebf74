#pragma once
// How long an op takes on a device. Pure arithmetic, no SimGrid, so it is unit-tested alone.
//
//   duration = max(FLOPs / (peak[dtype] x eff[kind]), bytes / (tier bandwidth x mem_eff[kind]))
//              + launch overhead
//
// eff is the device's `efficiency` table, mem_eff its `memory_efficiency` table (which falls
// back to eff where it says nothing, so a device without one uses eff for both terms).
//
// On a bulk-synchronous (IPU-like) device, with `exchange` in its YAML, each op is a
// compute step, a sync and an exchange step that brings its operands to the tiles that
// compute: + sync + input bytes / exchange bandwidth.
//
// unless the trace carries a duration measured on this very platform, which then wins.
#include <string>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/workload/trace.h"

namespace memsim {

/// `input_bytes`: the bytes of the op's inputs, for the exchange step of a BSP device.
double roofline_s(const Op& op, const DeviceSpec& device, const TierSpec& compute_tier,
                  double input_bytes = 0);

/// Durations of every op of the trace on the platform, checking that each op's device
/// exists and has a rate for its dtype (InputError otherwise, naming op and device).
std::vector<double> op_durations(const Trace& trace, const PlatformSpec& platform);

}  // namespace memsim
