#pragma once
// What the static recomputation policies share (checkpoint-sqrt, checkpoint-selective,
// revolve, bptt-optimal, checkmate): each decides which forward ops to run again, and where;
// lower() turns that into a Plan with every free and drop in place, and tells the planner
// what the engine will see — the peak of each device's compute tier under the ideal
// allocator and the recomputation time — so a policy can search for the schedule that fits
// a budget before anything runs.
//
// A schedule is the trace's ops in issue order, each once, with recomputations of forward
// ops inserted before some of them (Schedule::before). lower() runs the schedule on the
// residency machine in zero time (sim/exec/replay.h), so it sees what the engine will, and
// decides where buffers are released: after its last read before the next time it is
// remade (a `drop`, so a reader would remake it) or after its last read of all (a `free`);
// a recomputation whose outputs are all present or dead is skipped, as the engine skips it.
// A forward op whose output is later updated in place (BN then an in-place ReLU) is not
// re-run as a step: the engine remakes such a buffer when its reader needs it, replaying the
// in-place updates the reader saw, and lower() places that remaking at the reader.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/params.h"
#include "sim/platform/platform.h"
#include "sim/policy/plan.h"
#include "sim/policy/policy.h"
#include "sim/policy/schedule/chain.h"
#include "sim/workload/trace.h"

namespace memsim::ckpt {

/// Recomputations to insert: before[op] lists forward ops to run again, in order, just
/// before op runs. Sized to the trace's op count.
struct Schedule {
  std::vector<std::vector<OpId>> before;
  explicit Schedule(const Trace& trace) : before(trace.ops.size()) {}
};

struct Lowered {
  Plan plan;
  /// Peak of each compute device's tier (indexed like Op::device) with the ideal allocator.
  std::vector<std::uint64_t> peak_bytes;
  /// Per device: the op of the schedule (run for the first time) at or just before which the
  /// peak is reached (lower() only; kNoOp where nothing ran).
  std::vector<OpId> peak_op;
  double recompute_s = 0;         // time of the ops run again (needs durations)
  std::uint64_t recompute_ops = 0;
  std::uint64_t max_peak() const;
};

/// The plan of `schedule`. `durations` (per op, seconds; may be empty) prices recomputation.
Lowered lower(const Trace& trace, const Schedule& schedule, const std::vector<double>& durations);

/// What the engine will see running any plan (peaks under the ideal allocator, recomputed
/// ops and their time): exec::replay, as a Lowered. Throws PolicyError on a plan that reads a
/// freed buffer.
Lowered replay(const Trace& trace, const Plan& plan, const std::vector<double>& durations);

/// Compute devices the trace's ops run on (0 .. max Op::device).
std::uint32_t device_count(const Trace& trace);

/// A chain-shaped forward: stages S_1..S_T of consecutive forward ops where each stage reads,
/// of what the forward made, only its own and the previous stage's outputs; after the last
/// stage a short tail (loss, a stack of all steps' outputs) may read anything. Backward ops
/// come in groups G_T .. G_1 (G_s: the ops that read something stage s made, and nothing of
/// a later stage), each reading only what S_s made and the previous stage's state.
struct Stages {
  std::uint32_t device = 0;
  std::vector<OpId> forward;           // the device's forward ops in issue order
  std::vector<std::size_t> begin;      // stage s (1..T) is forward[begin[s-1] .. begin[s])
  std::vector<OpId> group_first;       // per stage s (index s): first op of G_s, or kNoOp
  std::vector<std::uint64_t> state_bytes;     // per stage: bytes of x_s (what crosses its end)
  std::vector<std::uint64_t> internal_bytes;  // per stage: bytes G_s reads of S_{s-1}, S_s, plus x_s
  /// Every G_s but the last reads, of what stages made, only x_s (a plain chain: a layer's
  /// backward reads the layer's input or output). Otherwise G_s needs S_s run again from
  /// x_{s-1}.
  bool reads_state_only = true;
  std::size_t count() const { return begin.size() - 1; }
  /// The ops of stage s (1-based).
  std::vector<OpId> ops(std::size_t s) const {
    return {forward.begin() + static_cast<std::ptrdiff_t>(begin[s - 1]),
            forward.begin() + static_cast<std::ptrdiff_t>(begin[s])};
  }
};

/// Finds the stages of the device's ops; throws InputError naming `policy` and the op that
/// breaks the chain when the trace is not chain-shaped.
Stages find_stages(const Trace& trace, std::uint32_t device, const std::string& policy);
/// The stages of every device (0 .. device_count - 1), each found over its own ops and
/// buffers: linear in the step, however many replicas it holds.
std::vector<Stages> find_stages(const Trace& trace, const std::string& policy);

/// Each compute device's ops in issue order (indexed like Op::device, device_count of them),
/// split into its forward and the rest: found once, so that planning each device of a step
/// of many replicas costs that device's ops, not the step's.
struct DeviceOps {
  std::vector<std::vector<OpId>> forward, later;
  explicit DeviceOps(const Trace& trace);
  /// What the device's ops read, write or update, in increasing order.
  std::vector<BufferId> buffers(const Trace& trace, std::uint32_t device) const;
};

/// Adds a chain schedule over the stages (advance k: run stage k's ops; reverse k: G_k runs)
/// to `out`: the first forward pass is the trace's own; each later advance becomes a
/// recomputation of the stage's ops before the next group that runs.
void add_chain_schedule(const Stages& stages, const std::vector<schedule::ChainStep>& actions,
                        Schedule& out);

/// The recomputations that fit: the largest `slots` in [lo, hi] whose plan's peak fits every
/// device's cap (more slots, less recomputation), searched from `start` by galloping, then
/// bisection, on a peak that grows with the slots. `make(slots)` builds the schedule. When
/// none fits, the one with the least peak (the fewest slots tried).
struct Fitted {
  std::uint32_t slots = 0;
  Lowered lowered;
  bool fits = false;
};
Fitted fit_slots(const Trace& trace, std::uint32_t lo, std::uint32_t hi, std::uint32_t start,
                 const std::function<Schedule(std::uint32_t)>& make,
                 const std::vector<std::uint64_t>& caps, const std::vector<double>& durations);
bool fits(const Lowered& l, const std::vector<std::uint64_t>& caps);

/// The PlanResult of a recomputation policy `P` that plans in two parts: plan_steps(ctx,
/// choices, result) lays out the plan and records what it chose (and notes), label(choices)
/// names the policy with those choices.
template <class P>
PlanResult plan_with(const P& policy, const PlanningContext& ctx) {
  PlanResult out;
  typename P::Choices choices;
  out.plan = policy.plan_steps(ctx, choices, out);
  out.label = policy.label(choices);
  return out;
}

}  // namespace memsim::ckpt
