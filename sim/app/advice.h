#pragma once
// What it would take to fit, after `memsim run` ends in oom. Every figure comes from a run:
// the step with the full tier freed of its cap (the peak with enough memory, and the
// categories that alone exceed the tier), the largest batch that fits under the same
// policy (memsim fit's search), and every registered policy at this batch, the fastest that
// fits being the advice. Each is a child `memsim run` kept under OUT/advice/points/<id>/,
// so the line that quotes a run names the folder that shows it, and asking again reruns
// nothing.
#include <functional>
#include <string>

#include "sim/report/summary.h"
#include "sim/sweep/resolve.h"

namespace memsim {

/// A progress line for a terminal ("run 3: batch 128, ok"); not called when quiet.
using AdviceProgress = std::function<void(const std::string& line)>;

/// Advice for `request`, whose run gave `summary` (status oom). `memsim` is the executable
/// of the child runs; `out_dir` the run's output folder.
OomAdvice advise(const RunRequest& request, const Summary& summary, const std::string& out_dir,
                 const std::string& memsim, const AdviceProgress& progress);

/// The workload's batch after the overrides (a spec's `batch:`, else its model's default);
/// 0 when the workload has none (a trace).
std::int64_t workload_batch(const std::string& workload, const std::vector<Override>& overrides);

}  // namespace memsim
