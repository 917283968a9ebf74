#include "sim/policy/policy.h"

namespace memsim {
namespace {

// A framework without memory sharing: every buffer made during the step stays until the
// iteration ends, then the non-persistent ones are released together.
class KeepAllPolicy final : public Policy {
 public:
  PlanResult plan(const PlanningContext& ctx) const override {
    const Trace& trace = ctx.trace;
    Plan plan;
    plan.steps.reserve(trace.ops.size() + trace.buffers.size());
    for (const Op& op : trace.ops) plan.steps.push_back({StepKind::compute, op.id, 0});
    for (const Buffer& b : trace.buffers)
      if (!b.persistent) plan.steps.push_back({StepKind::free, b.id, 0});
    return {std::move(plan), "keep-all", {}, {}, {}};
  }
};

}  // namespace

PolicyInfo keep_all_policy() {
  return {"keep-all",
          "keep every buffer until the iteration ends (a framework without memory sharing)",
          {}, [](const Params&) { return std::make_unique<KeepAllPolicy>(); }};
}

}  // namespace memsim
