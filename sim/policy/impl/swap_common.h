#pragma once
// What the swapping policies (vdnn, swap-lru, capuchin) share: where each device swaps to,
// when each buffer is used in forward and backward, and a static estimate of a plan's peak.
#include <cstdint>
#include <optional>
#include <vector>

#include "sim/platform/routes.h"
#include "sim/policy/plan.h"
#include "sim/policy/policy.h"
#include "sim/workload/trace.h"

namespace memsim {

/// Per device that runs ops (by slot, as ops name them; hosts after the compute devices), up
/// to the last slot the trace's ops and buffers name: the tier its operands live in and where
/// it swaps to.
struct SwapTiers {
  std::uint32_t compute = 0;
  std::optional<std::uint32_t> offload;
  std::optional<Route> out, in;  // compute -> offload and back
};
std::vector<SwapTiers> swap_tiers(const PlatformSpec& platform, const Trace& trace);

/// When a buffer is touched: its last forward use and its first use after the forward
/// (backward or optimizer). kNoOp where there is none.
struct BufferUses {
  OpId last_forward = kNoOp;
  OpId first_later = kNoOp;
};
std::vector<BufferUses> buffer_uses(const Trace& trace);

/// The compute device (slot) whose memory holds each buffer: its first user's, else its own.
std::vector<std::uint32_t> buffer_devices(const Trace& trace);

/// Where the buffers resident at the start (made by no op) go when together they do not fit
/// in their device's compute tier (under `tier_caps`, indexed like platform.tiers): those
/// first used latest move to its offload tier until the rest fit, as a swapping runtime
/// leaves them after the previous iteration. Empty when everything fits; a device with
/// nowhere to swap to keeps all (the run then ends oom).
std::vector<InitialPlacement> overflow_placements(const Trace& trace, const PlatformSpec& platform,
                                                  const std::vector<SwapTiers>& tiers,
                                                  const std::vector<std::uint64_t>& tier_caps);

/// For an allocation that failed: swap-outs of `order`'s buffers (resident in the failing
/// tier) to `offload`, in that order, until the request fits; none when even all of them
/// would not make room (the run then ends oom). Appended to `actions`.
void swap_out_in_order(const MemoryState& memory, const AllocationFailure& failure, std::uint32_t offload,
                       const std::vector<BufferId>& order, std::vector<Action>& actions);

/// Every op that reads, writes or updates each buffer, in order.
std::vector<std::vector<OpId>> buffer_accesses(const Trace& trace);

/// A planned policy's fallback when its plan meets a failed allocation in a compute tier at
/// run time: swap-outs, to that device's offload tier, of the resident buffers the op does
/// not need, next used furthest ahead first (the trace is known: Belady's choice), until the
/// request fits. None when even all of them would not make room (the run then ends oom).
void evict_furthest_next_use(const RuntimeView& view, const AllocationFailure& failure,
                             const std::vector<SwapTiers>& tiers,
                             const std::vector<std::vector<OpId>>& accesses,
                             std::vector<Action>& actions);

/// The peak bytes a plan holds in each device's compute tier, walking its steps in order
/// with no timing: outputs and workspace taken at their op, frees and drops at their step,
/// a swap-out leaving at its step, a swap-in arriving at its step (and a reader of a buffer
/// that is elsewhere bringing it back). An estimate for choosing between plans.
std::vector<std::uint64_t> plan_peaks(const Trace& trace, const Plan& plan, std::size_t devices);

/// Per op: the bytes on its device while it runs under `plan` (its operands, outputs and
/// workspace with everything else live then), as plan_peaks counts them.
std::vector<std::uint64_t> bytes_at_ops(const Trace& trace, const Plan& plan, std::size_t devices);

/// Each op's start time on its stream if nothing ever waited: the cost model's durations
/// summed per (device, stream). For planning by expected access times.
std::vector<double> expected_start_times(const Trace& trace, const std::vector<double>& durations);

}  // namespace memsim
