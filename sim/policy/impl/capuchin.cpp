// Capuchin-style swapping (Peng et al. 2020), planned from expected access times. Capuchin
// observes one iteration to learn when each tensor is accessed; here that first pass is the
// cost model: every op's start time if nothing waited. Then, for each feature map the
// backward needs again, the free time between its last forward access and its next access
// is compared with the round trip to the offload tier: only tensors whose round trip hides
// in that gap are considered, most free time first, and each is kept only if it lowers the
// bytes over the compute tier's capacity.
//
// The estimate follows the engine on the expected timeline rather than step order: the copies
// of a device queue on one link per direction, a swap-out frees its space only when its copy
// lands, and a swap-in holds its space from the op that issues it. Swap-ins are placed as late
// as the queue allows (scheduled backward from their readers), so the space comes back as
// late as possible; a tensor whose swap-in would have to start before its swap-out lands does
// not hide its round trip and is not swapped.
//
// Where the run outgrows the estimate, an allocation that fails falls back to evicting on
// demand (Capuchin's passive mode): what is next used furthest ahead goes, and comes back two
// ops before its next reader where there is room.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "sim/policy/impl/swap_common.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

struct Candidate {
  BufferId buffer;
  double free_time_s;
  double out_s, in_s;
};

// Where a chosen candidate's copies fall on the expected timeline.
struct Swap {
  std::size_t candidate;
  double out_done_s = 0;  // its swap-out lands: the space is free from then
  OpId trigger = kNoOp;   // the op before which its swap-in is issued: the space is held again
};

// How far a plan's estimate is over the compute tiers: the largest overshoot at any op and
// the overshoots summed over ops.
struct Excess {
  std::uint64_t max = 0, sum = 0;
  bool fits() const { return max == 0; }
};

class CapuchinPolicy final : public Policy {
 public:
  explicit CapuchinPolicy(Budget budget) : budget_(budget) {}

  PlanResult plan(const PlanningContext& ctx) const override {
    Planner p(ctx);
    std::vector<Swap> chosen;
    Excess now = p.excess(chosen);
    // Capuchin's rule: most free time first; a candidate is kept only if it hides given the
    // copies already chosen and lowers the overshoot (it is away across an op over capacity).
    for (std::size_t i = 0; i < p.candidates.size() && !now.fits(); ++i) {
      std::vector<Swap> trial = chosen;
      trial.push_back({i});
      if (!p.schedule(trial)) continue;
      const Excess e = p.excess(trial);
      if (e.sum < now.sum && e.max <= now.max) {
        chosen = std::move(trial);
        now = e;
      }
    }
    return {p.build(chosen), fmt::format("capuchin(swapped {} buffers)", chosen.size()), {}, {},
            std::make_shared<Fallback>(p.tiers, buffer_accesses(ctx.trace), ctx.trace.buffers.size())};
  }

  std::optional<Budget> budget() const override { return budget_; }

 private:
  // The plan's peak is an estimate on the expected timeline; where the run outgrows it,
  // Capuchin falls back to evicting on demand, as in its passive mode.
  class Fallback final : public RuntimeHooks {
   public:
    Fallback(std::vector<SwapTiers> tiers, std::vector<std::vector<OpId>> accesses,
             std::size_t buffers)
        : tiers_(std::move(tiers)), accesses_(std::move(accesses)), evicted_(buffers, 0) {}

  void on_alloc_failure(const RuntimeView& view, const AllocationFailure& f,
                        std::vector<Action>& actions) override {
    const std::size_t first = actions.size();
    evict_furthest_next_use(view, f, tiers_, accesses_, actions);
    for (std::size_t k = first; k < actions.size(); ++k) evicted_[actions[k].id] = 1;
  }

  // What the fallback evicted comes back ahead of its next reader, a few ops early, where
  // there is room (a prefetch that finds none is dropped and its reader fetches it).
  bool has_op_hooks() const override { return true; }
  void before_op(const RuntimeView& view, OpId op, std::vector<Action>& actions) override {
    const Trace& trace = view.trace();
    const std::uint32_t device = trace.ops[op].device;
    if (device >= tiers_.size()) return;
    const std::uint32_t compute = tiers_[device].compute;
    const OpId end = static_cast<OpId>(std::min<std::size_t>(trace.ops.size(), op + 1 + kFallbackLookahead));
    for (OpId next = op; next < end; ++next) {
      const Op& n = trace.ops[next];
      if (n.device != device) continue;
      for (BufferId b : n.reads()) {
        if (!evicted_[b] || view.in_flight(b)) continue;
        const std::size_t at = view.memory().placement(b).tier;
        if (at == compute) {
          evicted_[b] = 0;
        } else if (at != Placement::kNowhere) {
          evicted_[b] = 0;
          actions.push_back({StepKind::swap_in, b, compute});
        }
      }
    }
  }

   private:
    std::vector<SwapTiers> tiers_;
    std::vector<std::vector<OpId>> accesses_;
    std::vector<std::uint8_t> evicted_;  // by the fallback, not yet asked back
  };

  struct Planner {
    const Trace& trace;
    const Liveness& liveness;
    std::vector<SwapTiers> tiers;
    std::vector<double> durations, start;
    std::vector<BufferUses> uses;
    std::vector<std::uint32_t> device;
    std::vector<Candidate> candidates;
    std::vector<std::uint64_t> capacity;              // per device
    std::vector<std::uint64_t> unswapped;             // per op: bytes_at_ops with nothing swapped
    std::vector<std::vector<OpId>> by_time;           // per device: its ops by start time
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<OpId>> stream_ops;

    explicit Planner(const PlanningContext& ctx)
        : trace(ctx.trace), liveness(ctx.liveness), tiers(swap_tiers(ctx.platform, ctx.trace)),
          durations(ctx.durations), start(expected_start_times(trace, durations)),
          uses(buffer_uses(trace)), device(buffer_devices(trace)) {
      for (const Buffer& b : trace.buffers) {
        const BufferUses& u = uses[b.id];
        if (b.persistent || u.last_forward == kNoOp || u.first_later == kNoOp) continue;
        if (b.category != Category::activation && b.category != Category::input) continue;
        const SwapTiers& st = tiers[device[b.id]];
        if (!st.offload) continue;
        const double bytes = static_cast<double>(b.bytes);
        const double free_time = start[u.first_later] - end(u.last_forward);
        const double out_s = st.out->transfer_time_s(bytes), in_s = st.in->transfer_time_s(bytes);
        if (free_time >= out_s + in_s) candidates.push_back({b.id, free_time, out_s, in_s});
      }
      std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
        return a.free_time_s - a.out_s - a.in_s > b.free_time_s - b.out_s - b.in_s;
      });
      for (const SwapTiers& st : tiers) capacity.push_back(ctx.tier_caps[st.compute]);
      unswapped = bytes_at_ops(trace, build({}), tiers.size());
      by_time.resize(tiers.size());
      for (const Op& op : trace.ops) {
        if (op.device < tiers.size()) by_time[op.device].push_back(op.id);
        stream_ops[{op.device, op.stream}].push_back(op.id);
      }
      for (auto& ops : by_time)
        std::stable_sort(ops.begin(), ops.end(), [&](OpId x, OpId y) { return start[x] < start[y]; });
    }

    double end(OpId op) const { return start[op] + durations[op]; }

    // Places the copies of `swaps` on the expected timeline: swap-outs in issue order, one at
    // a time per device; swap-ins backward from their readers' start, each as late as the
    // ones after it allow. False if some swap-in would have to be issued before its
    // swap-out lands (its round trip does not hide behind the others').
    bool schedule(std::vector<Swap>& swaps) const {
      std::vector<std::size_t> order(swaps.size());
      for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
      auto buffer = [&](std::size_t k) { return candidates[swaps[k].candidate].buffer; };
      std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
        const double tx = end(uses[buffer(x)].last_forward), ty = end(uses[buffer(y)].last_forward);
        return tx != ty ? tx < ty : buffer(x) < buffer(y);
      });
      std::vector<double> busy(tiers.size(), 0);
      for (std::size_t k : order) {
        double& b = busy[device[buffer(k)]];
        b = std::max(b, end(uses[buffer(k)].last_forward)) + candidates[swaps[k].candidate].out_s;
        swaps[k].out_done_s = b;
      }
      std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
        const double tx = start[uses[buffer(x)].first_later], ty = start[uses[buffer(y)].first_later];
        return tx != ty ? tx > ty : buffer(x) > buffer(y);
      });
      std::vector<double> next_begin(tiers.size(), std::numeric_limits<double>::infinity());
      for (std::size_t k : order) {
        const BufferUses& u = uses[buffer(k)];
        double& next = next_begin[device[buffer(k)]];
        const double begin = std::min(start[u.first_later], next) - candidates[swaps[k].candidate].in_s;
        next = begin;
        if (begin < swaps[k].out_done_s) return false;
        // The last op on the reader's stream that starts by then, after the swap-out's issue.
        const auto& ops = stream_ops.at({trace.ops[u.first_later].device, trace.ops[u.first_later].stream});
        auto it = std::upper_bound(ops.begin(), ops.end(), begin + 1e-12,
                                   [&](double t, OpId o) { return t < start[o]; });
        if (it == ops.begin()) return false;
        const OpId trigger = std::min(*(it - 1), u.first_later);
        if (trigger <= u.last_forward || start[trigger] + 1e-12 < swaps[k].out_done_s) return false;
        swaps[k].trigger = trigger;
      }
      return true;
    }

    // The bytes at each op with `swaps` placed: the unswapped estimate less the buffers away
    // when it starts (their swap-out landed, their swap-in not yet issued).
    Excess excess(const std::vector<Swap>& swaps) const {
      std::vector<std::vector<std::int64_t>> away(tiers.size());
      for (std::size_t d = 0; d < tiers.size(); ++d) away[d].assign(by_time[d].size() + 1, 0);
      for (const Swap& s : swaps) {
        const BufferId b = candidates[s.candidate].buffer;
        const auto& ops = by_time[device[b]];
        auto at = [&](double t) {
          return std::lower_bound(ops.begin(), ops.end(), t,
                                  [&](OpId o, double v) { return start[o] < v; }) - ops.begin();
        };
        const auto from = at(s.out_done_s), until = at(start[s.trigger]);
        if (from >= until) continue;
        away[device[b]][from] += static_cast<std::int64_t>(trace.buffers[b].bytes);
        away[device[b]][until] -= static_cast<std::int64_t>(trace.buffers[b].bytes);
      }
      Excess e;
      for (std::size_t d = 0; d < tiers.size(); ++d) {
        std::int64_t gone = 0;
        for (std::size_t i = 0; i < by_time[d].size(); ++i) {
          gone += away[d][i];
          const auto bytes = static_cast<std::int64_t>(unswapped[by_time[d][i]]) - gone;
          const auto cap = static_cast<std::int64_t>(capacity[d]);
          if (bytes <= cap) continue;
          const auto over = static_cast<std::uint64_t>(bytes - cap);
          e.max = std::max(e.max, over);
          e.sum += over;
        }
      }
      return e;
    }

    // The trace with each chosen swap-out after its buffer's last forward use and each
    // swap-in before its trigger (several before one op: the one needed first first).
    Plan build(const std::vector<Swap>& swaps) const {
      std::vector<std::vector<BufferId>> out_after(trace.ops.size());
      std::vector<std::vector<std::pair<OpId, BufferId>>> in_before(trace.ops.size());
      for (const Swap& s : swaps) {
        const BufferId b = candidates[s.candidate].buffer;
        out_after[uses[b].last_forward].push_back(b);
        in_before[s.trigger].push_back({uses[b].first_later, b});
      }
      Plan plan;
      plan.steps.reserve(trace.ops.size() * 2 + trace.buffers.size());
      for (const Op& op : trace.ops) {
        auto& ins = in_before[op.id];
        std::sort(ins.begin(), ins.end());
        for (const auto& [user, b] : ins)
          plan.steps.push_back({StepKind::swap_in, b, tiers[device[b]].compute});
        plan.steps.push_back({StepKind::compute, op.id, 0});
        auto& outs = out_after[op.id];
        std::sort(outs.begin(), outs.end());
        for (BufferId b : outs)
          plan.steps.push_back({StepKind::swap_out, b, *tiers[device[b]].offload});
        for (BufferId b : liveness.dies_after[op.id]) plan.steps.push_back({StepKind::free, b, 0});
      }
      return plan;
    }
  };

  Budget budget_;
  static constexpr std::size_t kFallbackLookahead = 2;
};

}  // namespace

PolicyInfo capuchin_policy() {
  return {"capuchin",
          "Capuchin-style swapping planned from expected access times: swap, most free time "
          "first, what the gap between accesses hides given the copy queue and what lowers the "
          "estimated peak; prefetch as late as the queue allows",
          {budget_param()},
          [](const Params& p) { return std::make_unique<CapuchinPolicy>(read_budget(p)); }};
}

}  // namespace memsim
