#include <vector>

#include "sim/policy/policy.h"

namespace memsim {
namespace {

// A framework without memory sharing: every buffer made during the step stays until the
// iteration ends, then the non-persistent ones are released together: each device's after
// the last op it issues (a free runs on the stream of the step before it, so the frees of a
// pipeline's first stage must not wait at the end of the last stage's stream, where they
// would run while the first stage still computes).
class KeepAllPolicy final : public Policy {
 public:
  PlanResult plan(const PlanningContext& ctx) const override {
    const Trace& trace = ctx.trace;
    std::vector<OpId> last_of_device;
    for (const Op& op : trace.ops) {
      if (op.device >= last_of_device.size()) last_of_device.resize(op.device + 1, kNoOp);
      last_of_device[op.device] = op.id;
    }
    // Per device its buffers' frees; the last list holds those of a device that runs no op.
    std::vector<std::vector<BufferId>> frees(last_of_device.size() + 1);
    for (const Buffer& b : trace.buffers) {
      if (b.persistent) continue;
      const std::uint32_t device = b.producer != kNoOp ? trace.ops[b.producer].device : b.device;
      const bool runs = device < last_of_device.size() && last_of_device[device] != kNoOp;
      frees[runs ? device : last_of_device.size()].push_back(b.id);
    }
    Plan plan;
    plan.steps.reserve(trace.ops.size() + trace.buffers.size());
    for (const Op& op : trace.ops) {
      plan.steps.push_back({StepKind::compute, op.id, 0});
      if (last_of_device[op.device] == op.id)
        for (BufferId b : frees[op.device]) plan.steps.push_back({StepKind::free, b, 0});
    }
    for (BufferId b : frees.back()) plan.steps.push_back({StepKind::free, b, 0});
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
