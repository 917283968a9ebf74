#pragma once
// What it would take to fit, after `memsim run` ends in oom. Every figure comes from a run:
// the step with the full tier freed of its cap (the peak with enough memory, and the
// categories that alone exceed the tier), the largest batch that fits under the same
// policy (memsim fit's search), and every registered policy at this batch, the fastest that
// fits being the advice; for a transformer, also its own recomputation (recompute: full,
// selective attention) under policy none, quoted when it fits faster than any policy. Each
// is a child `memsim run` kept under OUT/advice/points/<id>/, so the line that quotes a run
// names the folder that shows it, and asking again reruns nothing.
#include <cstdint>
#include <functional>
#include <string>

#include "sim/platform/platform.h"
#include "sim/report/summary.h"
#include "sim/sweep/resolve.h"
#include "sim/workload/trace.h"

namespace memsim {

/// A progress line for a terminal ("run 3: batch 128, ok"); not called when quiet.
using AdviceProgress = std::function<void(const std::string& line)>;

/// Advice for `request`, whose run gave `summary` (status oom). `memsim` is the executable
/// of the child runs; `out_dir` the run's output folder. `step_bytes` bounds what the step
/// can hold at once on any tier (every buffer of it, its largest workspace and the devices'
/// reserved memory): the run with enough memory gives every tier of every device at least
/// that (step_memory_bound).
OomAdvice advise(const RunRequest& request, const Summary& summary, const std::string& out_dir,
                 const std::string& memsim, std::uint64_t step_bytes, const AdviceProgress& progress);

/// What one tier could ever need for `trace` on `platform`: all its buffers at once, twice
/// over (an allocator's rounding and fragmentation), plus its largest workspace and the
/// largest reserved memory of a device; at most the largest capacity memsim accepts.
std::uint64_t step_memory_bound(const Trace& trace, const PlatformSpec& platform);

/// The workload's batch after the overrides (a spec's `batch:`, else its model's default);
/// 0 when the workload has none (a trace).
std::int64_t workload_batch(const std::string& workload, const std::vector<Override>& overrides);

/// A parameter of the workload's model after the overrides (as written, else the model's
/// default); "" when the workload is a trace or its model has no such parameter.
std::string workload_param(const std::string& workload, const std::vector<Override>& overrides,
                           const std::string& name);

}  // namespace memsim
