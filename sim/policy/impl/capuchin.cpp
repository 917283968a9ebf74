// Capuchin-style swapping (Peng et al. 2020), planned from expected access times. Capuchin
// observes one iteration to learn when each tensor is accessed; here that first pass is the
// cost model: every op's start time if nothing waited. Then, for each feature map the
// backward needs again, the free time between its last forward access and its next access
// is compared with the round trip to the offload tier: only tensors whose round trip hides
// in that gap are swapped, most free time first, until the estimated peak fits the compute
// tier. Each swap-in is triggered by the op that starts early enough for the copy to land
// before its use; the planner then replays the copy queue (one copy at a time per
// direction) and moves late swap-ins earlier by their lateness — Capuchin's adjustment
// from measured stall, done on the expected timeline.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "sim/engine/cost_model.h"
#include "sim/policy/impl/swap_common.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

struct Candidate {
  BufferId buffer;
  double free_time_s;
  double out_s, in_s;
};

class CapuchinPolicy final : public Policy {
 public:
  CapuchinPolicy(Budget budget, std::int64_t rounds) : budget_(budget), rounds_(rounds) {}

  Plan plan(const Trace& trace, const Liveness& liveness, const PlatformSpec& platform) const override {
    const auto tiers = swap_tiers(platform);
    const auto durations = op_durations(trace, platform);
    const auto start = expected_start_times(trace, durations);
    const auto uses = buffer_uses(trace);
    const auto device = buffer_devices(trace);

    std::vector<Candidate> candidates;
    for (const Buffer& b : trace.buffers) {
      const BufferUses& u = uses[b.id];
      if (b.persistent || u.last_forward == kNoOp || u.first_later == kNoOp) continue;
      if (b.category != Category::activation && b.category != Category::input) continue;
      const SwapTiers& st = tiers[device[b.id]];
      if (!st.offload) continue;
      const double bytes = static_cast<double>(b.bytes);
      const double free_time = start[u.first_later] - (start[u.last_forward] + durations[u.last_forward]);
      const double out_s = st.out->transfer_time_s(bytes), in_s = st.in->transfer_time_s(bytes);
      if (free_time >= out_s + in_s) candidates.push_back({b.id, free_time, out_s, in_s});
    }
    std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      return a.free_time_s - a.out_s - a.in_s > b.free_time_s - b.out_s - b.in_s;
    });

    // The fewest candidates whose plan fits every compute tier (bisection: the estimated
    // peak only falls as more is swapped).
    auto fits = [&](const Plan& p) {
      const auto peaks = plan_peaks(trace, p, tiers.size());
      for (std::size_t d = 0; d < tiers.size(); ++d)
        if (peaks[d] > platform.tiers[tiers[d].compute].capacity_bytes) return false;
      return true;
    };
    std::size_t lo = 0, hi = candidates.size();
    if (fits(build(trace, liveness, tiers, start, durations, uses, device, candidates, 0))) hi = 0;
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (fits(build(trace, liveness, tiers, start, durations, uses, device, candidates, mid)))
        hi = mid;
      else
        lo = mid + 1;
    }
    swapped_ = hi;
    tiers_ = tiers;
    accesses_ = buffer_accesses(trace);
    return build(trace, liveness, tiers, start, durations, uses, device, candidates, hi);
  }

  // The plan's peak is an estimate on the expected timeline; where the run outgrows it,
  // Capuchin falls back to evicting on demand, as in its passive mode.
  void on_alloc_failure(const RuntimeView& view, const AllocationFailure& f,
                        std::vector<Action>& actions) override {
    evict_furthest_next_use(view, f, tiers_, accesses_, actions);
  }

  std::optional<Budget> budget() const override { return budget_; }
  std::string label() const override { return fmt::format("capuchin(swapped {} buffers)", swapped_); }

 private:
  Plan build(const Trace& trace, const Liveness& liveness, const std::vector<SwapTiers>& tiers,
             const std::vector<double>& start, const std::vector<double>& durations,
             const std::vector<BufferUses>& uses, const std::vector<std::uint32_t>& device,
             const std::vector<Candidate>& candidates, std::size_t count) const {
    // Ops of each (device, stream) by start time, to turn a time into a triggering op.
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<OpId>> stream_ops;
    for (const Op& op : trace.ops) stream_ops[{op.device, op.stream}].push_back(op.id);
    auto trigger_at = [&](OpId user, double when, OpId not_before) {
      const auto& ops = stream_ops[{trace.ops[user].device, trace.ops[user].stream}];
      // The last op starting at or before `when`, but after the swap-out was issued.
      auto it = std::upper_bound(ops.begin(), ops.end(), when,
                                 [&](double t, OpId o) { return t < start[o]; });
      OpId op = it == ops.begin() ? ops.front() : *(it - 1);
      return std::clamp(op, not_before, user);
    };

    std::vector<double> lead(count, 0);  // how much earlier than "just in time" to start
    std::vector<OpId> trigger(count, 0);
    for (std::int64_t round = 0; round <= rounds_; ++round) {
      for (std::size_t i = 0; i < count; ++i) {
        const Candidate& c = candidates[i];
        const BufferUses& u = uses[c.buffer];
        trigger[i] = trigger_at(u.first_later, start[u.first_later] - c.in_s - lead[i], u.last_forward + 1);
      }
      // Replay the copies: each direction carries one copy at a time, in issue order.
      std::vector<std::pair<double, std::size_t>> outs, ins;
      for (std::size_t i = 0; i < count; ++i) {
        const BufferUses& u = uses[candidates[i].buffer];
        outs.push_back({start[u.last_forward] + durations[u.last_forward], i});
        ins.push_back({start[trigger[i]], i});
      }
      std::sort(outs.begin(), outs.end());
      std::sort(ins.begin(), ins.end());
      std::vector<double> out_done(count, 0);
      double busy_until = 0;
      for (const auto& [t, i] : outs) out_done[i] = busy_until = std::max(busy_until, t) + candidates[i].out_s;
      bool late = false;
      busy_until = 0;
      for (const auto& [t, i] : ins) {
        const double begin = std::max({busy_until, t, out_done[i]});
        busy_until = begin + candidates[i].in_s;
        const double lateness = busy_until - start[uses[candidates[i].buffer].first_later];
        if (lateness > 1e-12) {
          lead[i] += lateness;
          late = true;
        }
      }
      if (!late) break;
    }

    std::vector<std::vector<BufferId>> out_after(trace.ops.size()), in_before(trace.ops.size());
    for (std::size_t i = 0; i < count; ++i) {
      const BufferId b = candidates[i].buffer;
      out_after[uses[b].last_forward].push_back(b);
      in_before[trigger[i]].push_back(b);
    }
    Plan plan;
    plan.steps.reserve(trace.ops.size() * 2 + trace.buffers.size());
    for (const Op& op : trace.ops) {
      for (BufferId b : in_before[op.id])
        plan.steps.push_back({StepKind::swap_in, b, static_cast<std::uint32_t>(tiers[device[b]].compute)});
      plan.steps.push_back({StepKind::compute, op.id, 0});
      for (BufferId b : out_after[op.id])
        plan.steps.push_back({StepKind::swap_out, b, static_cast<std::uint32_t>(*tiers[device[b]].offload)});
      for (BufferId b : liveness.dies_after[op.id]) plan.steps.push_back({StepKind::free, b, 0});
    }
    return plan;
  }

  Budget budget_;
  std::int64_t rounds_;
  mutable std::size_t swapped_ = 0;
  mutable std::vector<SwapTiers> tiers_;
  mutable std::vector<std::vector<OpId>> accesses_;
};

}  // namespace

PolicyInfo capuchin_policy() {
  return {"capuchin",
          "Capuchin-style swapping planned from expected access times: swap only what the "
          "gap between accesses hides, prefetch early enough, adjust late swap-ins",
          {budget_param(),
           {"adjust_rounds", "rounds of moving late swap-ins earlier on the expected timeline", "8"}},
          [](const Params& p) {
            return std::make_unique<CapuchinPolicy>(read_budget(p),
                                                    p.get("adjust_rounds").as_int_in(0, 1000));
          }};
}

}  // namespace memsim
