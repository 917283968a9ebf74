#include "sim/policy/plan.h"

namespace memsim {

std::string_view to_string(StepKind k) {
  switch (k) {
    case StepKind::compute: return "compute";
    case StepKind::free: return "free";
    case StepKind::swap_out: return "swap_out";
    case StepKind::swap_in: return "swap_in";
    case StepKind::drop: return "drop";
    case StepKind::recompute: return "recompute";
    case StepKind::evict: return "evict";
  }
  return "?";
}

Plan plan_free_at_last_use(const Trace& trace, const Liveness& liveness) {
  Plan plan;
  plan.steps.reserve(trace.ops.size() + trace.buffers.size());
  for (const Op& op : trace.ops) {
    plan.steps.push_back({StepKind::compute, op.id, 0});
    for (BufferId b : liveness.dies_after[op.id]) plan.steps.push_back({StepKind::free, b, 0});
  }
  return plan;
}

}  // namespace memsim
