#include "sim/policy/policy.h"

namespace memsim {
namespace {

// Memory sharing by liveness: each buffer is freed right after its last use, as PyTorch
// does when a tensor's last reference goes. Nothing is moved; a step that does not fit is
// an OOM.
class NonePolicy final : public Policy {
 public:
  PlanResult plan(const PlanningContext& ctx) const override {
    return {plan_free_at_last_use(ctx.trace, ctx.liveness), "none", {}, {}, {}};
  }
};

}  // namespace

PolicyInfo none_policy() {
  return {"none", "free each buffer after its last use (memory sharing by liveness); no swapping",
          {}, [](const Params&) { return std::make_unique<NonePolicy>(); }};
}

}  // namespace memsim
