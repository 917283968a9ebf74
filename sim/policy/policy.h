#pragma once
// A memory policy decides what lives where. The field has two kinds, so there are two hooks:
//
//  - plan(ctx) const: a planning pass that reads the whole trace (and the caps it must stay
//    under) and returns a PlanResult — the Plan, the trace with frees, swaps, drops and
//    recomputes inserted, as TensorFlow LMS rewrites a graph or Checkmate emits a schedule —
//    with the label reports give it and notes for the user;
//  - runtime hooks, for a policy that acts while the step runs: a RuntimeHooks object that
//    plan() makes for that run (so the policy stays const), called by the engine with a view
//    of memory: before_op() and after_op() around every op (prefetch what is coming, offload
//    what is done), and on_alloc_failure() when the compute tier cannot take an allocation —
//    answered with actions, or with none, and then the run ends with status oom.
//
// The rules of memory the engine applies to both are in sim/exec/residency.h. Dropping: a
// dropped buffer's space is released at once; when an op reads it again, the engine re-runs
// its producer (and the in-place updates it had before that reader), recursively for inputs
// that were dropped too. That time is recompute time. exec::replay() shows a planner, in
// zero time, the peak the engine will see for a plan.
//
// Moving data: every action is a copy between tiers on the copy engines of the device it
// leaves (or enters, from the host). Space in the destination is held from the copy's start;
// space in the source is freed only when it completes. A reader of a buffer that is in flight
// waits for it (stall time); a reader of a buffer that is elsewhere has it swapped in on
// demand and waits for the whole copy.
//
// Policies are created by name with declared parameters (policy/builtin.cpp registers them).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/params.h"
#include "sim/memory/memory_state.h"
#include "sim/platform/platform.h"
#include "sim/policy/plan.h"
#include "sim/workload/trace.h"

namespace memsim {

/// What a policy can see while the step runs.
class RuntimeView {
 public:
  virtual ~RuntimeView() = default;
  virtual double now_s() const = 0;
  virtual const Trace& trace() const = 0;
  virtual const Liveness& liveness() const = 0;
  virtual const PlatformSpec& platform() const = 0;
  virtual const MemoryState& memory() const = 0;
  /// The op being prepared when the hook runs.
  virtual OpId current_op() const = 0;
  /// Whether a copy of the buffer is under way (its space in the source is not free yet).
  virtual bool in_flight(BufferId b) const = 0;
  /// Whether the buffer was dropped and not yet remade.
  virtual bool dropped(BufferId b) const = 0;
  /// Whether an op that some stream has begun and not finished reads or writes the buffer
  /// (while it waits for its inputs, too). Evicting or dropping it would make that op fetch
  /// or remake it at once: with several streams, two ops that evict each other's inputs go
  /// round for ever.
  virtual bool in_use(BufferId b) const = 0;
};

/// What a runtime hook asks for: a memory operation in the plan's own words, a Step of kind
/// swap_out (buffer `id` to tier `tier`, an offload tier: host DRAM, NVMe, a peer's HBM; it
/// frees the compute tier), swap_in (back to compute tier `tier` ahead of use, a prefetch;
/// also a peer copy) or drop (release now; the next reader recomputes it from its producer).
/// The engine answers any other kind with a PolicyError.
using Action = Step;

/// `policy.budget`: a cap on every compute tier, so policies can be compared at equal
/// memory — bytes ("12GiB") or a fraction of the baseline peak ("0.5": half of what the
/// step needs under `none` with the ideal allocator).
struct Budget {
  bool is_fraction = true;
  double value = 1.0;  // the fraction, or bytes
};
/// The declaration every budgeted policy adds to its parameters.
ParamSpec budget_param(const std::string& default_value = "1.0");
/// Reads it: a number in (0, 1] or a size; a located InputError otherwise.
Budget read_budget(const Params& params);
struct AllocationFailure {
  std::size_t tier = 0;
  std::uint64_t bytes = 0;  // what was asked for
  OpId op = 0;              // the op it was for
};

/// What a planning pass sees: the step, the hardware as it is, the cost model's durations,
/// and the caps it must plan under.
struct PlanningContext {
  const Trace& trace;
  const Liveness& liveness;
  const PlatformSpec& platform;
  /// Per op, seconds: the cost model's duration (or the measured one where it applies).
  const std::vector<double>& durations;
  /// Per tier (indexed like platform.tiers): the bytes the run may hold there — the tier's
  /// capacity, or less where `policy.budget` caps a compute tier.
  std::vector<std::uint64_t> tier_caps;
  /// Per device that runs ops (indexed like Op::device): the cap of its operand tier.
  std::vector<std::uint64_t> device_caps() const;
};

class RuntimeHooks;

/// A planning pass's answer: the plan, the label the reports give the policy ("vdnn(all)",
/// with the choices made while planning), notes for the user (what it chose, and why a
/// budget cannot be met), which the CLI prints, and for a policy that acts while the step
/// runs, the hooks the engine calls during this run, made with what planning chose.
struct PlanResult {
  Plan plan;
  std::string label;
  std::vector<std::string> notes;  // "revolve: 3 slots over 40 stages need ...", one a line
  /// Why the plan may not fit, for the OOM report ("" when it should).
  std::string oom_reason;
  /// The runtime hooks for this run (null: the policy has none). They may refer to the
  /// PlanningContext, which must outlive them.
  std::shared_ptr<RuntimeHooks> hooks;
  /// A budget the plan cannot meet: noted for the user and kept for the OOM report.
  void explain(const std::string& policy, const std::string& why) {
    oom_reason = policy + ": " + why;
    notes.push_back(oom_reason);
  }
};

/// What a rewriting pass made: the new trace, the label it gives the policy, and notes.
struct Rewritten {
  Trace trace;
  std::string label;
  std::vector<std::string> notes;
};

/// A policy's state for one run: the runtime hooks the engine calls, made by Policy::plan()
/// for that run (so the policy itself stays const).
class RuntimeHooks {
 public:
  virtual ~RuntimeHooks() = default;
  /// Called when an allocation fails. Append actions that make room; an empty answer ends
  /// the run with status oom. The engine waits for the actions to complete and retries.
  virtual void on_alloc_failure(const RuntimeView&, const AllocationFailure&,
                                std::vector<Action>&) {}
  /// Called before `op` runs (its inputs not yet checked) and after it completes. Actions
  /// start at once and run alongside compute; nothing waits for them.
  virtual void before_op(const RuntimeView&, OpId, std::vector<Action>&) {}
  virtual void after_op(const RuntimeView&, OpId, std::vector<Action>&) {}
  /// Whether before_op/after_op do anything: lets the engine skip the calls (per-op work
  /// stays O(1)).
  virtual bool has_op_hooks() const { return false; }
  /// With has_op_hooks(): called around each recomputation (an op re-run, inside the op
  /// being prepared, to remake dropped buffers), so a runtime policy sees the buffers it
  /// reads and remakes (DTR's locks and access times). Nothing can be answered from here.
  virtual void before_recompute(const RuntimeView&, OpId) {}
  virtual void after_recompute(const RuntimeView&, OpId) {}
  /// Why the last on_alloc_failure answered nothing, for the OOM report ("" when the tier is
  /// simply full): "dtr: nothing evictable: ..." says more than the allocator can.
  virtual std::string oom_reason() const { return {}; }
};

class Policy {
 public:
  virtual ~Policy() = default;
  /// A planning pass that changes the trace itself (in-place reuse merges buffers,
  /// compression adds encode/decode ops and smaller buffers). nullopt: the trace as it is.
  /// run() applies it before plan() and the engine; reports then name the new ops, and its
  /// label (when not empty) is the run's.
  virtual std::optional<Rewritten> rewrite(const Trace&, const PlatformSpec&) const {
    return std::nullopt;
  }
  /// The static schedule (and the runtime hooks, for a policy that has them). The engine
  /// runs it step by step. Const: everything one run needs is in the result.
  virtual PlanResult plan(const PlanningContext& ctx) const = 0;
  /// The compute-tier cap this policy runs under, if it takes `policy.budget`. run()
  /// resolves it into PlanningContext::tier_caps.
  virtual std::optional<Budget> budget() const { return std::nullopt; }
  /// Whether the policy moves work to the host of each rank's node, which the node's ranks
  /// share (ZeRO-Offload's optimizer step, its host memory): a run of symmetric ranks then
  /// simulates one node's ranks, not one rank with a host to itself.
  virtual bool shares_node_host() const { return false; }
};

struct PolicyInfo {
  std::string name;
  std::string description;
  std::vector<ParamSpec> params;
  std::function<std::unique_ptr<Policy>(const Params&)> create;
};

/// Every built-in policy, in the order `memsim list` shows them.
const std::vector<PolicyInfo>& builtin_policies();
const PolicyInfo* find_policy(std::string_view name);

// One per file under impl/.
PolicyInfo none_policy();
PolicyInfo keep_all_policy();
PolicyInfo checkpoint_sqrt_policy();
PolicyInfo revolve_policy();
PolicyInfo bptt_optimal_policy();
PolicyInfo checkmate_policy();
PolicyInfo inplace_policy();
PolicyInfo checkpoint_selective_policy();
PolicyInfo vdnn_policy();
PolicyInfo swap_lru_policy();
PolicyInfo swap_budget_policy();
PolicyInfo capuchin_policy();
PolicyInfo dtr_policy();
PolicyInfo compress_policy();
PolicyInfo hybrid_policy();
PolicyInfo zero_offload_policy();
PolicyInfo zero_infinity_policy();

}  // namespace memsim
