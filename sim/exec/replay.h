#pragma once
// The residency machine in zero time: what the engine will do to memory running a plan,
// without SimGrid, so that planners can estimate a plan's peak before anything runs.
//
// Every compute device (as Op::device names it) holds a byte counter — the ideal allocator,
// with no capacity — for its compute tier; everything in another tier (a swap's
// destination, a placement on NVMe) counts nothing. Copies land at once: a swap-out
// releases the compute tier at its step, a swap-in (or a read of a buffer that is elsewhere)
// takes it at its step. Drops, remakes, frees and re-runs follow the machine's rules
// (residency.h), exactly as the engine applies them.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/exec/residency.h"
#include "sim/policy/plan.h"
#include "sim/workload/trace.h"

namespace memsim::exec {

struct Replayed {
  /// Per compute device (indexed like Op::device): the peak of its compute tier.
  std::vector<std::uint64_t> peak_bytes;
  /// The peak of the sum over devices.
  std::uint64_t total_peak_bytes = 0;
  std::uint64_t recompute_ops = 0;  // ops run again to remake dropped buffers
  double recompute_s = 0;           // their time (with durations)
  std::uint64_t max_peak() const;
};

/// Watches a replay: called as each op runs (a first run or a re-run), its outputs and
/// workspace allocated, with the bytes live on each device then (the workspace not
/// included).
using OpObserver = std::function<void(const Op& op, const std::vector<std::uint64_t>& live)>;

/// Drives the machine in zero time, step by step: for planners that build a plan as they
/// go (the recomputation policies' lowering) and for replay() below.
class Replayer {
 public:
  /// `durations` (per op, seconds; may be empty) prices re-runs; `who` names the policy in
  /// the messages of a plan that breaks the rules.
  Replayer(const Trace& trace, const std::vector<double>& durations, std::string who);
  ~Replayer();
  Replayer(const Replayer&) = delete;
  Replayer& operator=(const Replayer&) = delete;

  /// Places the buffers resident at the start (those in `placements` in another tier).
  void start(const std::vector<InitialPlacement>& placements = {});
  /// A plan's step, as the engine runs it. Compute steps set the device that the following
  /// steps run on.
  void step(const Step& s);
  /// Whether b is in its device's compute tier now.
  bool resident(BufferId b) const;
  /// A plan's recompute step: whether any output of `op` is dropped (else it is skipped).
  bool needs_recompute(const Op& op) const;

  /// Buffers read or allocated from now on are appended here (nullptr: not recorded).
  void record_touched(std::vector<BufferId>* touched);
  /// A number the caller sets; each device remembers the mark in force at its peak.
  void set_mark(std::size_t mark);
  const std::vector<std::size_t>& peak_marks() const;
  void observe(OpObserver observer);

  Replayed result() const;

 private:
  class ZeroTime;
  std::unique_ptr<ZeroTime> memory_;
  std::unique_ptr<Residency<ZeroTime>> residency_;
  const Trace& trace_;
  std::uint32_t device_ = 0;
  std::vector<std::uint32_t> home_;  // per buffer: the device a swap-in brings it to
};

/// What the engine will see running `plan`: peaks under the ideal allocator, re-runs and
/// their time. Throws PolicyError for a plan that reads a freed buffer.
Replayed replay(const Trace& trace, const Plan& plan, const std::vector<double>& durations = {},
                const OpObserver& observer = {});

/// The peak under `none` (every buffer freed after its last use) with the ideal allocator,
/// summed over devices: what a budget fraction is a fraction of.
std::uint64_t baseline_peak_bytes(const Trace& trace);

/// The peak with nothing ever freed (a framework without memory sharing), summed over devices.
std::uint64_t keep_all_peak_bytes(const Trace& trace);

}  // namespace memsim::exec
