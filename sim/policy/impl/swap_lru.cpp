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
#include <set>

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
    auto tiers = swap_tiers(ctx.platform, ctx.trace);
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

  // Each buffer's last use, to evict the least recently used first. The choice walks an
  // index of each compute tier's buffers in eviction order and stops once it has enough, so
  // a failed allocation costs what it evicts, not a scan of every buffer of the step (a
  // step of 10^5 buffers fails tens of thousands of allocations: DeepSeekMoE 16B on a DGX
  // H100 ran for many minutes).
  //
  // The index of a tier holds every buffer resident there, and some that have left: a
  // buffer is (re)filed under its device's tier when an op touches it (before_op, which
  // comes before the op takes space for it or fetches it, and the op pins it until it ends)
  // and when this policy prefetches it there; at the start, every buffer already placed. A
  // buffer met in the walk that is no longer in the tier, and that no op holds, no copy
  // carries and no prefetch of ours awaits, is taken out: it can only come back through one
  // of those ways, which files it again.
  class Hooks final : public RuntimeHooks {
   public:
    Hooks(std::vector<SwapTiers> tiers, std::size_t buffers, std::int64_t lookahead)
        : tiers_(std::move(tiers)),
          last_use_(buffers, -1),
          filed_in_(buffers, kNotFiled),
          prefetching_(buffers, 0),
          lookahead_(lookahead) {
      std::size_t n = 0;
      for (const SwapTiers& t : tiers_) n = std::max<std::size_t>(n, t.compute + 1);
      index_.resize(n);
    }

    bool has_op_hooks() const override { return true; }

  void before_op(const RuntimeView& view, OpId op, std::vector<Action>& actions) override {
    const Trace& trace = view.trace();
    const Op& o = trace.ops[op];
    start(view);
    const SwapTiers& st = tiers_[o.device];
    for (const auto* list : {&o.inputs, &o.updates, &o.outputs})
      for (BufferId b : *list) {
        unfile(trace, b);
        last_use_[b] = op;
        prefetching_[b] = 0;  // the op holds it now
        file(trace, b, st.compute);
      }
    if (lookahead_ == 0) return;
    const MemoryState& m = view.memory();
    const OpId end = static_cast<OpId>(std::min<std::size_t>(trace.ops.size(), op + 1 + lookahead_));
    for (OpId next = op + 1; next < end; ++next) {
      const Op& n = trace.ops[next];
      if (n.device != o.device) continue;
      for (BufferId b : n.reads()) {
        const std::size_t at = m.placement(b).tier;
        if (at != Placement::kNowhere && at != st.compute && !view.in_flight(b)) {
          actions.push_back({StepKind::swap_in, b, st.compute});
          prefetching_[b] = 1;
          if (filed_in_[b] != st.compute) {
            unfile(trace, b);
            file(trace, b, st.compute);
          }
        }
      }
    }
  }

  void on_alloc_failure(const RuntimeView& view, const AllocationFailure& f,
                        std::vector<Action>& actions) override {
    const Trace& trace = view.trace();
    const MemoryState& m = view.memory();
    const Op& running = trace.ops[f.op];
    start(view);
    const SwapTiers* st = nullptr;
    for (const auto& t : tiers_)
      if (t.compute == f.tier) st = &t;
    if (!st || !st->offload) return;  // nowhere to swap to: the run ends oom
    auto in_use = [&](BufferId b) {
      for (const auto* list : {&running.inputs, &running.outputs, &running.updates})
        if (std::find(list->begin(), list->end(), b) != list->end()) return true;
      return false;
    };
    // Least recently used first (never used before: -1), then the larger, then by id: the
    // index's order. Taken until the request would fit; when even all of them would not make
    // room, no actions, so the run ends oom with the op, tier and bytes, instead of swapping
    // for nothing.
    const std::uint64_t free_now = m.largest_free_block(f.tier);
    std::vector<BufferId> order;
    std::uint64_t freed = 0;
    auto& index = index_[f.tier];
    for (auto it = index.begin(); it != index.end() && free_now + freed < f.bytes;) {
      const BufferId b = it->buffer;
      const bool held = view.in_flight(b) || in_use(b) || view.in_use(b);
      if (!m.resident(b, f.tier)) {
        if (held || prefetching_[b]) {
          ++it;
        } else {
          filed_in_[b] = kNotFiled;
          it = index.erase(it);
        }
        continue;
      }
      ++it;
      if (held) continue;
      order.push_back(b);
      freed += m.placement(b).allocation.bytes;
    }
    if (free_now + freed < f.bytes) return;
    swap_out_in_order(m, f, *st->offload, order, actions);
  }

   private:
    static constexpr std::uint32_t kNotFiled = 0xffffffffu;
    struct Entry {
      std::int64_t last_use;
      std::uint64_t smaller;  // the larger first
      BufferId buffer;
      auto operator<=>(const Entry&) const = default;
    };

    // The buffers placed before the first op, filed where they are.
    void start(const RuntimeView& view) {
      if (started_) return;
      started_ = true;
      const MemoryState& m = view.memory();
      for (BufferId b = 0; b < view.trace().buffers.size(); ++b) {
        const std::size_t at = m.placement(b).tier;
        if (at < index_.size()) file(view.trace(), b, static_cast<std::uint32_t>(at));
      }
    }
    void file(const Trace& trace, BufferId b, std::uint32_t tier) {
      index_[tier].insert(entry(trace, b));
      filed_in_[b] = tier;
    }
    void unfile(const Trace& trace, BufferId b) {
      if (filed_in_[b] == kNotFiled) return;
      index_[filed_in_[b]].erase(entry(trace, b));
      filed_in_[b] = kNotFiled;
    }
    Entry entry(const Trace& trace, BufferId b) const {
      return {last_use_[b], UINT64_MAX - trace.buffers[b].bytes, b};
    }

    std::vector<SwapTiers> tiers_;
    std::vector<std::int64_t> last_use_;
    std::vector<std::uint32_t> filed_in_;     // the tier whose index holds it
    std::vector<std::uint8_t> prefetching_;   // a prefetch of ours may still bring it in
    std::vector<std::set<Entry>> index_;      // per compute tier, in eviction order
    std::int64_t lookahead_;
    bool started_ = false;
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
