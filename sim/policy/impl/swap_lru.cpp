// On-demand swapping, as CUDA unified memory or TensorFlow's Large Model Support do it:
// when an allocation fails, evict the least recently used buffers that the running op does
// not need to the offload tier; a buffer that is elsewhere when an op needs it is swapped
// back in on demand (the op stalls). With `prefetch_lookahead` L > 0, before each op the
// buffers the next L ops will read are swapped back in ahead of time, where the policy can
// make room for them (a prefetch that finds none is dropped; the reader fetches on demand).
// Resident buffers (weights, optimizer state) that do not fit under the cap start on the
// offload tier, those used last first.
//
// `swap-budget` is the same policy under a required `policy.budget`, for comparing
// policies at equal memory.
#include <algorithm>

#include <fmt/format.h>

#include "sim/policy/impl/swap_common.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

class SwapLruPolicy final : public Policy {
 public:
  SwapLruPolicy(std::string name, std::int64_t lookahead, Budget budget)
      : name_(std::move(name)), lookahead_(lookahead), budget_(budget) {}

  PlanResult plan(const PlanningContext& ctx) const override {
    Plan plan = plan_free_at_last_use(ctx.trace, ctx.liveness);
    auto tiers = swap_tiers(ctx.platform);
    plan.placements = overflow_placements(ctx.trace, ctx.platform, tiers, ctx.tier_caps);
    return {std::move(plan), label(), {}, {},
            std::make_shared<Hooks>(std::move(tiers), ctx.trace.buffers.size(), lookahead_)};
  }

  std::optional<Budget> budget() const override { return budget_; }

 private:
  std::string label() const {
    std::string b = budget_.is_fraction ? fmt::format("{}", budget_.value)
                                        : fmt::format("{}B", budget_.value);
    return fmt::format("{}(lookahead={}, budget={})", name_, lookahead_, b);
  }

  // Each buffer's last use, to evict the least recently used first.
  class Hooks final : public RuntimeHooks {
   public:
    Hooks(std::vector<SwapTiers> tiers, std::size_t buffers, std::int64_t lookahead)
        : tiers_(std::move(tiers)), last_use_(buffers, -1), lookahead_(lookahead) {}

    bool has_op_hooks() const override { return true; }

  void before_op(const RuntimeView& view, OpId op, std::vector<Action>& actions) override {
    const Trace& trace = view.trace();
    const Op& o = trace.ops[op];
    for (const auto* list : {&o.inputs, &o.updates, &o.outputs})
      for (BufferId b : *list) last_use_[b] = op;
    if (lookahead_ == 0) return;
    const SwapTiers& st = tiers_[o.device];
    const MemoryState& m = view.memory();
    const OpId end = static_cast<OpId>(std::min<std::size_t>(trace.ops.size(), op + 1 + lookahead_));
    for (OpId next = op + 1; next < end; ++next) {
      const Op& n = trace.ops[next];
      if (n.device != o.device) continue;
      for (BufferId b : n.reads()) {
        const std::size_t at = m.placement(b).tier;
        if (at != Placement::kNowhere && at != st.compute && !view.in_flight(b))
          actions.push_back({StepKind::swap_in, b, st.compute});
      }
    }
  }

  void on_alloc_failure(const RuntimeView& view, const AllocationFailure& f,
                        std::vector<Action>& actions) override {
    const Trace& trace = view.trace();
    const MemoryState& m = view.memory();
    const Op& running = trace.ops[f.op];
    const SwapTiers* st = nullptr;
    for (const auto& t : tiers_)
      if (t.compute == f.tier) st = &t;
    if (!st || !st->offload) return;  // nowhere to swap to: the run ends oom
    auto in_use = [&](BufferId b) {
      for (const auto* list : {&running.inputs, &running.outputs, &running.updates})
        if (std::find(list->begin(), list->end(), b) != list->end()) return true;
      return false;
    };
    // Least recently used first (never used before: -1), then the larger, then by id.
    std::vector<BufferId> candidates;
    std::uint64_t evictable = 0;
    for (BufferId b = 0; b < trace.buffers.size(); ++b)
      if (m.resident(b, f.tier) && !view.in_flight(b) && !in_use(b) && !view.in_use(b)) {
        candidates.push_back(b);
        evictable += m.placement(b).allocation.bytes;
      }
    // Evicting everything evictable would still not make room: no actions, so the run ends
    // oom with the op, tier and bytes, instead of swapping for nothing.
    const std::uint64_t free_now = m.largest_free_block(f.tier);
    if (free_now + evictable < f.bytes) return;
    // The first few in that order, from a heap rather than a sort of all of them: a step of
    // 10^5 resident buffers fails thousands of allocations, each needing a handful (a sort
    // each time made DeepSeekMoE 16B on one H100 run for minutes). The order, and so the
    // buffers taken, are the sort's.
    auto after = [&](BufferId x, BufferId y) {
      if (last_use_[x] != last_use_[y]) return last_use_[x] > last_use_[y];
      if (trace.buffers[x].bytes != trace.buffers[y].bytes) return trace.buffers[x].bytes < trace.buffers[y].bytes;
      return x > y;
    };
    std::make_heap(candidates.begin(), candidates.end(), after);
    std::vector<BufferId> order;
    for (std::uint64_t freed = 0; free_now + freed < f.bytes && !candidates.empty();) {
      std::pop_heap(candidates.begin(), candidates.end(), after);
      order.push_back(candidates.back());
      freed += m.placement(candidates.back()).allocation.bytes;
      candidates.pop_back();
    }
    swap_out_in_order(m, f, *st->offload, order, actions);
  }

   private:
    std::vector<SwapTiers> tiers_;
    std::vector<std::int64_t> last_use_;
    std::int64_t lookahead_;
  };

  std::string name_;
  std::int64_t lookahead_;
  Budget budget_;
};

std::vector<ParamSpec> lru_params(const std::string& budget_default) {
  return {{"prefetch_lookahead", "ops ahead whose inputs are swapped back in before they run (0: on demand only)",
           "2"},
          budget_default.empty() ? ParamSpec{"budget", budget_param().description, std::nullopt}
                                 : budget_param(budget_default)};
}

}  // namespace

PolicyInfo swap_lru_policy() {
  return {"swap-lru",
          "on-demand swapping: evict least-recently-used buffers to the offload tier when an "
          "allocation fails; swap back in on use or ahead of it",
          lru_params("1.0"), [](const Params& p) {
            return std::make_unique<SwapLruPolicy>(
                "swap-lru", p.get("prefetch_lookahead").as_int_in(0, 1 << 20), read_budget(p));
          }};
}

PolicyInfo swap_budget_policy() {
  return {"swap-budget",
          "swap-lru under a required cap on the compute tier (policy.budget), to compare "
          "policies at equal memory",
          lru_params(""), [](const Params& p) {
            return std::make_unique<SwapLruPolicy>(
                "swap-budget", p.get("prefetch_lookahead").as_int_in(0, 1 << 20), read_budget(p));
          }};
}

}  // namespace memsim
