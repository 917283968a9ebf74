// Dynamic Tensor Rematerialization (Kirisame et al., ICLR 2021) as a runtime policy: nothing
// is planned ahead; when an allocation does not fit under the budget, the resident buffer
// with the smallest h is dropped, and the engine remakes it (re-running its producer,
// recursively) when something reads it again. The bookkeeping is in dtr_core.h.
#include <memory>

#include <fmt/format.h>

#include "sim/core/units.h"
#include "sim/policy/impl/dtr_core.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

class DtrPolicy final : public Policy {
 public:
  DtrPolicy(Budget budget, std::string budget_text, DtrHeuristic heuristic)
      : budget_(budget), budget_text_(std::move(budget_text)), heuristic_(heuristic) {}

  // Frees at last use, except that a buffer a candidate may need later is dropped instead
  // (see dtr_core.h): the engine can then remake it.
  PlanResult plan(const PlanningContext& ctx) const override {
    const Trace& trace = ctx.trace;
    const DtrRemakeRules rules = dtr_remake_rules(trace, ctx.liveness);
    Plan plan;
    plan.steps.reserve(trace.ops.size() + trace.buffers.size());
    for (const Op& op : trace.ops) {
      plan.steps.push_back({StepKind::compute, op.id, 0});
      for (BufferId b : ctx.liveness.dies_after[op.id])
        plan.steps.push_back({rules.drop_at_death[b] ? StepKind::drop : StepKind::free, b, 0});
    }
    return {std::move(plan), fmt::format("dtr(h={}, budget={})", to_string(heuristic_), budget_text_),
            {}, {}, std::make_shared<Hooks>(ctx, heuristic_)};
  }

  std::optional<Budget> budget() const override { return budget_; }

 private:
  // The runtime: DTR's state of every buffer, its evictions and its remakes.
  class Hooks final : public RuntimeHooks {
   public:
    Hooks(const PlanningContext& ctx, DtrHeuristic heuristic)
        : core_(ctx.trace, ctx.liveness, ctx.durations, heuristic),
          thrash_limit_(4 * ctx.trace.ops.size() + 1000) {}

    bool has_op_hooks() const override { return true; }

    void before_op(const RuntimeView& view, OpId op, std::vector<Action>&) override {
      recomputes_ = 0;
      core_.op_begins(op, view.now_s(), false);
    }

    void after_op(const RuntimeView& view, OpId op, std::vector<Action>& actions) override {
      core_.op_ends(op, view.now_s(), false);
      for (BufferId b : core_.outer_op_done()) {
        actions.push_back({StepKind::drop, b, 0});
        core_.evicted(b);
      }
    }

    void before_recompute(const RuntimeView& view, OpId op) override {
      ++recomputes_;
      core_.op_begins(op, view.now_s(), true);
    }

    void after_recompute(const RuntimeView& view, OpId op) override {
      core_.op_ends(op, view.now_s(), true);
    }

    void on_alloc_failure(const RuntimeView& view, const AllocationFailure& f,
                          std::vector<Action>& actions) override {
      const std::size_t tier = f.tier;
      auto resident = [&](BufferId b) { return view.memory().resident(b, tier); };
      // An op whose inputs keep evicting each other would never finish: give up instead.
      if (recomputes_ > thrash_limit_) {
        reason_ = fmt::format("dtr: thrashing: {} recomputations for one op; the budget is too "
                              "small for this workload",
                              recomputes_);
        return;
      }
      // Not what an op begun on another stream reads or writes: it would remake it at once.
      const auto victim =
          core_.choose(view.now_s(), [&](BufferId b) { return resident(b) && !view.in_use(b); });
      if (!victim) {
        reason_ = fmt::format(
            "dtr: nothing left to evict: the buffers the running op (and the recomputations "
            "under it) hold take {} of {}",
            format_bytes(static_cast<double>(core_.locked_bytes(resident))),
            format_bytes(static_cast<double>(view.memory().usage(tier).limit_bytes())));
        return;
      }
      actions.push_back({StepKind::drop, *victim, 0});
      core_.evicted(*victim);
    }

    std::string oom_reason() const override { return reason_; }

   private:
    DtrCore core_;
    std::size_t recomputes_ = 0;
    std::size_t thrash_limit_ = 0;
    std::string reason_;
  };

  Budget budget_;
  std::string budget_text_;
  DtrHeuristic heuristic_;
};

}  // namespace

PolicyInfo dtr_policy() {
  return {"dtr",
          "Dynamic Tensor Rematerialization (Kirisame et al. 2021): at runtime, under the budget, "
          "evict the buffer with the least h = cost / (size x staleness) and recompute it on use",
          {budget_param(),
           {"heuristic",
            "full (h with the evicted neighbourhood, DTR's equivalence classes), local (immediate "
            "evicted neighbours only), lru (the stalest first) or largest (the largest first)",
            "full"}},
          [](const Params& params) -> std::unique_ptr<Policy> {
            const Budget budget = read_budget(params);
            const ConfigNode h = params.get("heuristic");
            const auto heuristic = dtr_heuristic_from_string(h.as_string());
            if (!heuristic) h.fail_expected("one of full, local, lru, largest");
            return std::make_unique<DtrPolicy>(budget, params.get("budget").as_string(), *heuristic);
          }};
}

}  // namespace memsim
