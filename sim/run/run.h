#pragma once
// The pipeline, written once: a platform, the step of each device and a policy in, a
// summary out. Every caller — `memsim run`, fit, sweeps, benches and tests — goes through
// run():
//
//   workloads (one per device) -> Trace (combined) -> the policy's rewrite
//   -> PlanningContext{trace, liveness, durations, caps from the budget}
//   -> policy.plan(ctx) const -> PlanResult{Plan, label, notes, hooks}
//   -> simulate(ctx, planned) -> Summary
//
// A budget never rewrites the platform: it becomes the caps the policy plans under and the
// engine's allocators run under, and the summary reports each tier's capacity and its
// budget side by side.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/policy/policy.h"
#include "sim/report/recorder.h"
#include "sim/report/summary.h"
#include "sim/workload/trace.h"

namespace memsim {

struct RunInputs {
  PlatformSpec platform;
  /// The step of each device that runs (in `slots` order), or one step that runs on each
  /// of them (data-parallel replicas).
  std::vector<Trace> workloads;
  /// The compute devices (indices into platform.compute_devices()) that run, in order;
  /// empty: all of them. The others stay idle.
  std::vector<std::uint32_t> slots;
  const Policy* policy = nullptr;
  /// Keep every allocation and release in the recorder (events.csv).
  bool keep_allocations = false;
  /// Keep the memory samples (memory.csv, the trace's counters); without them the run keeps
  /// its events and peaks only.
  bool keep_samples = true;
  /// Of those, keep at most this many (the rest are counted, and go to `stream`): a trace
  /// capped at N events needs no more than TraceLayout::kept_samples_for(N).
  std::size_t samples_kept = SIZE_MAX;
  /// Which ops take the duration measured in the trace: as the trace says (where it was
  /// measured on this platform), wherever one was measured, or none (the cost model).
  enum class Durations : std::uint8_t { as_traced, measured, model } durations = Durations::as_traced;
  /// Where the records also go as the engine makes them (files written on another thread);
  /// nullptr: kept in the recorder only.
  RecordStream* stream = nullptr;
  /// Name what was live at each tier's peak (summary.peaks) before returning; false leaves
  /// that to explain_peaks(RunResult&), which the caller may run beside other work.
  bool explain_peaks = true;
  /// Told every few thousand events how many ops have run, of how many, and the simulated
  /// time (a terminal's progress line); empty: none.
  std::function<void(std::uint64_t ops_done, std::uint64_t ops_total, double simulated_s)> progress;
  /// Every op its own SimGrid activity (simulate()'s `exact`): slower, for checking.
  bool exact = false;
};

struct RunResult {
  Summary summary;
  Trace trace;        // the step as it ran: the devices' steps combined, then rewritten
  Plan plan;          // the policy's plan for it
  Recorder recorder;  // its events and memory samples
  /// The policy's notes, from its rewrite and its plan, in order ("revolve: ...").
  std::vector<std::string> notes;
  /// Tiers whose peak another tier's stands for (a simulated rank's, for its symmetric
  /// peers): (tier, the tier it copies).
  std::vector<std::pair<std::size_t, std::size_t>> peak_copies;
};

/// Runs one step. Throws InputError for inputs that do not fit together or a step past the
/// op limit, PolicyError for a policy that breaks the rules of memory, InternalError for a
/// summary that fails check_summary (sim/run/sanity.h). SimGrid's engine is a process
/// singleton: once per process.
RunResult run(const RunInputs& inputs);
/// The same, moving the step out of `inputs.workloads` where it runs as it is (one device, or
/// a placed pipeline) instead of copying it; the rest of `inputs` is left as it was.
RunResult run(RunInputs&& inputs);
/// The same into `out`, in place: what `inputs.stream` is given of `out` (the step) stays
/// where it is after the call.
void run(RunInputs&& inputs, RunResult& out);

/// Fills summary.peaks from the run's records (see explain_peaks in sim/report/peak.h),
/// for a run made with `explain_peaks` false. Reads the recorder, the step and the platform;
/// writes summary.peaks only.
void explain_peaks(RunResult& result, const PlatformSpec& platform);

/// The engine stage alone, for a step already laid out on the platform's devices: `policy`
/// plans it under the tiers' own capacities (no budget, no rewrite) and the engine runs the
/// plan; events go to `recorder`. For tests and benches of the engine and of a policy's plan.
/// `exact`: as simulate()'s in sim/engine/engine.h.
Summary simulate(const PlatformSpec& platform, const Trace& trace, const Policy& policy,
                 Recorder& recorder, bool exact = false);

/// What `policy` plans for `trace` on `platform` under the tiers' own capacities, for tests
/// and benches of a plan (its runtime hooks dropped: they would outlive their context).
PlanResult plan_for(const Policy& policy, const Trace& trace, const PlatformSpec& platform);

/// The caps a budget puts on each tier (indexed like platform.tiers): a compute device's
/// compute tier gets the budget (a fraction of `baseline_peaks[k]`, its own step's peak under
/// `none`, plus the tier's `reserved` bytes, the memory held outside the allocator that the
/// baseline does not count; or a size, which includes them) where it is below the capacity,
/// as the tier's allocator rounds it; every other tier, and a device without a baseline under
/// a fraction, keeps its capacity.
std::vector<std::uint64_t> tier_caps(const PlatformSpec& platform, const Budget* budget,
                                     const std::vector<std::uint64_t>& baseline_peaks,
                                     const std::vector<std::uint64_t>& reserved = {});

}  // namespace memsim
