// Swap or recompute, per buffer (Capuchin's decision rule, Peng et al. ASPLOS 2020), under
// `policy.budget`, as a planning pass.
//
// Candidates are the activations kept for the backward pass: made in the forward pass, read
// again in the backward pass, with at least one op between the last forward use L and the
// first backward use F. For each:
//   swap       2 x (bytes / B + latency) over the widest route from the compute tier to the
//              nearest offload tier (bandwidth B: the slowest link or memory on the way);
//              swapped out after L, prefetched so that the copy ends as F starts; only when
//              the ops between take longer than the two copies
//   recompute  the producer's time (and its in-place updaters'); dropped after L and remade
//              by the engine when F reads it. Only when everything the producer reads is still
//              alive at F.
// The cheaper is chosen (swap when the times tie). Candidates are taken, most bytes saved
// per second of that cost first, while the step's live-bytes profile (liveness-based, the
// ideal allocator's view) still exceeds the compute tier's capacity somewhere in the span
// the buffer would free: at the budget the plan frees no more than it needs.
//
// Left out: Capuchin's measured access times and its runtime feedback, the overlap of a
// swap with compute as a cost (a swap counts in full), and recompute chains through dropped
// inputs (the engine remakes them, but their time is not in the decision). An allocation
// that needs the space of a swap-out still on its way waits for it (a stall).
#include <algorithm>
#include <functional>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "sim/core/units.h"
#include "sim/exec/replay.h"
#include "sim/platform/routes.h"
#include "sim/policy/policy.h"
#include "sim/workload/analysis.h"

namespace memsim {
namespace {

// Range add, range max over the ops' live bytes.
class MaxTree {
 public:
  explicit MaxTree(const std::vector<double>& v) : n_(v.size()), max_(4 * n_ + 4, 0), add_(4 * n_ + 4, 0) {
    if (n_) build(1, 0, n_ - 1, v);
  }
  void add(std::size_t lo, std::size_t hi, double d) { if (n_) add(1, 0, n_ - 1, lo, hi, d); }
  double max(std::size_t lo, std::size_t hi) const {
    return n_ ? max(1, 0, n_ - 1, lo, hi) : 0;
  }

 private:
  void build(std::size_t k, std::size_t l, std::size_t r, const std::vector<double>& v) {
    if (l == r) {
      max_[k] = v[l];
      return;
    }
    const std::size_t m = (l + r) / 2;
    build(2 * k, l, m, v);
    build(2 * k + 1, m + 1, r, v);
    max_[k] = std::max(max_[2 * k], max_[2 * k + 1]);
  }
  void add(std::size_t k, std::size_t l, std::size_t r, std::size_t lo, std::size_t hi, double d) {
    if (hi < l || r < lo) return;
    if (lo <= l && r <= hi) {
      max_[k] += d;
      add_[k] += d;
      return;
    }
    const std::size_t m = (l + r) / 2;
    add(2 * k, l, m, lo, hi, d);
    add(2 * k + 1, m + 1, r, lo, hi, d);
    max_[k] = std::max(max_[2 * k], max_[2 * k + 1]) + add_[k];
  }
  double max(std::size_t k, std::size_t l, std::size_t r, std::size_t lo, std::size_t hi) const {
    if (hi < l || r < lo) return -std::numeric_limits<double>::infinity();
    if (lo <= l && r <= hi) return max_[k];
    const std::size_t m = (l + r) / 2;
    return std::max(max(2 * k, l, m, lo, hi), max(2 * k + 1, m + 1, r, lo, hi)) + add_[k];
  }
  std::size_t n_;
  std::vector<double> max_, add_;
};

struct Choice {
  BufferId buffer = 0;
  bool swap = false;
  OpId last_forward = 0;  // L: swap_out or drop after it
  OpId prefetch = 0;      // a swap's swap_in goes before this op
  std::size_t offload_tier = 0;
};

class HybridPolicy final : public Policy {
 public:
  HybridPolicy(Budget budget, std::string budget_text, bool verbose)
      : budget_(budget), budget_text_(std::move(budget_text)), verbose_(verbose) {}

  PlanResult plan(const PlanningContext& ctx) const override;
  std::optional<Budget> budget() const override { return budget_; }

 private:
  // What plan() chose, for the label and the failure hook.
  struct Chosen {
    std::vector<Choice> choices;
    std::size_t swaps = 0, recomputes = 0;
    std::uint64_t swap_bytes = 0, recompute_bytes = 0;
    std::string over;
  };

  // Nothing to add at run time: the engine waits for the planned swap-outs still on their
  // way before it calls this an OOM. The hook says why.
  class Hooks final : public RuntimeHooks {
   public:
    Hooks(std::size_t swaps, std::size_t recomputes, std::string over)
        : swaps_(swaps), recomputes_(recomputes), over_(std::move(over)) {}
    void on_alloc_failure(const RuntimeView& view, const AllocationFailure& f,
                          std::vector<Action>&) override {
      reason_ = fmt::format("hybrid: its {} swaps and {} recomputations do not bring the step "
                            "under {} here{}",
                            swaps_, recomputes_,
                            format_bytes(static_cast<double>(view.memory().usage(f.tier).limit_bytes())),
                            over_);
    }
    std::string oom_reason() const override { return reason_; }

   private:
    std::size_t swaps_, recomputes_;
    std::string over_;
    std::string reason_;
  };

  std::string label(const Chosen& ch) const {
    return "hybrid(budget=" + budget_text_ +
           fmt::format(": swap {} ({}), recompute {} ({})", ch.swaps,
                       format_bytes(static_cast<double>(ch.swap_bytes)), ch.recomputes,
                       format_bytes(static_cast<double>(ch.recompute_bytes))) +
           ")";
  }

  Budget budget_;
  std::string budget_text_;
  bool verbose_;
};

PlanResult HybridPolicy::plan(const PlanningContext& ctx) const {
  const Trace& trace = ctx.trace;
  const Liveness& liveness = ctx.liveness;
  const PlatformSpec& platform = ctx.platform;
  PlanResult out;
  Chosen ch;
  const std::size_t n_ops = trace.ops.size(), n_buf = trace.buffers.size();
  const std::vector<double>& dur = ctx.durations;
  std::vector<double> ends(n_ops + 1, 0);  // ends[i]: the time op i starts, run back to back
  for (std::size_t i = 0; i < n_ops; ++i) ends[i + 1] = ends[i] + dur[i];
  const auto devices = platform.op_devices();

  // Live bytes during each op, per compute device: the step under `none`, replayed.
  std::vector<std::vector<double>> live(devices.size(), std::vector<double>(n_ops, 0));
  exec::replay(trace, plan_free_at_last_use(trace, liveness), {},
               [&](const Op& op, const std::vector<std::uint64_t>& now) {
                 for (std::size_t d = 0; d < devices.size() && d < now.size(); ++d)
                   live[d][op.id] = static_cast<double>(now[d]);
                 live[op.device][op.id] += static_cast<double>(op.workspace_bytes);
               });

  // L and F per buffer; in-place updaters.
  std::vector<OpId> last_fwd(n_buf, kNoOp), first_bwd(n_buf, kNoOp);
  const auto updaters = memsim::updaters(trace);
  for (const Buffer& b : trace.buffers) last_fwd[b.id] = b.producer;
  for (const Op& op : trace.ops)
    for (BufferId b : op.reads()) {
      if (first_bwd[b] != kNoOp) continue;
      if (op.phase == Phase::backward) first_bwd[b] = op.id;
      else last_fwd[b] = op.id;
    }
  auto alive_at = [&](BufferId p, OpId f) {
    return trace.buffers[p].persistent || (liveness.last_use[p] != kNoOp && liveness.last_use[p] >= f);
  };

  struct Candidate {
    Choice choice;
    double cost_s;
    std::uint64_t bytes;
    std::size_t from, to;  // the ops it frees memory for
    std::uint32_t device;
  };
  std::vector<Candidate> candidates;
  // Per compute device: the route to the offload tier it swaps to.
  std::vector<std::size_t> computes;
  for (std::size_t d : devices) computes.push_back(*platform.devices[d].operand_tier());
  std::vector<std::optional<OffloadRoute>> nearest = nearest_offloads(platform, computes);
  std::vector<std::optional<Route>> routes(devices.size());
  std::vector<std::size_t> offload(devices.size(), 0);
  for (std::size_t d = 0; d < devices.size(); ++d)
    if (nearest[d]) {
      routes[d] = std::move(nearest[d]->out);
      offload[d] = nearest[d]->tier;
    }
  for (const Buffer& b : trace.buffers) {
    if (b.persistent || b.producer == kNoOp || first_bwd[b.id] == kNoOp) continue;
    const Op& producer = trace.ops[b.producer];
    const OpId l = last_fwd[b.id], f = first_bwd[b.id];
    if (producer.phase != Phase::forward || f <= l + 1) continue;
    Candidate c{{b.id, false, l, f, 0}, 0, b.bytes, l + 1, f - 1, producer.device};
    // Recompute: the producer (and in-place updaters before F) again, if their inputs live.
    double recompute_s = dur[producer.id];
    bool can_recompute = true;
    std::vector<OpId> replay{producer.id};
    for (OpId u : updaters[b.id])
      if (u < f) replay.push_back(u);
    for (OpId o : replay) {
      if (o != producer.id) recompute_s += dur[o];
      for (BufferId p : trace.ops[o].reads())
        if (p != b.id && !alive_at(p, f)) can_recompute = false;
    }
    // Swap: out after L, in so that it arrives as F starts; frees memory in between.
    std::optional<Candidate> swap;
    if (const auto& r = routes[producer.device]) {
      const double one_way = r->transfer_time_s(static_cast<double>(b.bytes));
      // First op that starts after the swap-out is done; last op at which the prefetch starts.
      const auto out_done = static_cast<std::size_t>(
          std::lower_bound(ends.begin(), ends.end(), ends[l + 1] + one_way) - ends.begin());
      // The latest op p with the ops p..F-1 taking at least the copy (else right after L).
      const auto latest = std::upper_bound(ends.begin(), ends.begin() + f + 1, ends[f] - one_way) - ends.begin();
      const std::size_t prefetch = std::max<std::size_t>(l + 1, latest > 0 ? static_cast<std::size_t>(latest - 1) : 0);
      if (out_done <= prefetch) {
        swap = c;
        swap->choice = {b.id, true, l, static_cast<OpId>(prefetch), offload[producer.device]};
        swap->cost_s = 2 * one_way;
        // The space counts as free from L on: an allocation that needs it before the copy
        // is done waits for it (on_alloc_failure), a stall the run reports.
        swap->from = l + 1;
        swap->to = prefetch - 1;
      }
    }
    if (swap && (!can_recompute || swap->cost_s <= recompute_s)) {
      candidates.push_back(*swap);
    } else if (can_recompute) {
      c.cost_s = recompute_s;
      candidates.push_back(c);
    }
    if (verbose_)
      out.notes.push_back(fmt::format(
          "hybrid: {} ({}): swap {}, recompute {} -> {}", b.name,
          format_bytes(static_cast<double>(b.bytes)),
          swap ? format_seconds(swap->cost_s) : "no route or no gap",
          can_recompute ? format_seconds(recompute_s) : "inputs dead by then",
          candidates.empty() || candidates.back().choice.buffer != b.id ? "keep"
          : candidates.back().choice.swap                                ? "swap"
                                                                         : "recompute"));
  }
  // Most bytes freed per second of cost first (ties: the longer span, then the id).
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    const double ka = static_cast<double>(a.bytes) / std::max(a.cost_s, 1e-15);
    const double kb = static_cast<double>(b.bytes) / std::max(b.cost_s, 1e-15);
    if (ka != kb) return ka > kb;
    if (a.to - a.from != b.to - b.from) return a.to - a.from > b.to - b.from;
    return a.choice.buffer < b.choice.buffer;
  });
  std::vector<MaxTree> trees;
  std::vector<double> cap;
  for (std::size_t d = 0; d < devices.size(); ++d) {
    trees.emplace_back(live[d]);
    cap.push_back(static_cast<double>(ctx.tier_caps[*platform.devices[devices[d]].operand_tier()]));
  }
  // A recomputation at F re-runs the producer, which reads its inputs and remakes its other
  // dropped outputs: those come back at F if they are away then (a dropped one remade, its
  // own inputs in turn; a swapped one swapped in on demand) and stay. So a choice "pins"
  // what it needs at F: the span of a buffer already away is cut short at F (its bytes
  // count again from F on), and a buffer chosen later frees memory only up to its first pin.
  std::vector<std::vector<OpId>> pins(n_buf);
  std::vector<std::pair<std::size_t, std::size_t>> away(n_buf, {1, 0});  // span, empty if from > to
  std::vector<std::int8_t> chosen(n_buf, -1);                            // 1 swap, 0 recompute
  auto needs = [&](BufferId b, OpId f, const std::function<void(BufferId)>& visit) {
    const Op& producer = trace.ops[trace.buffers[b].producer];
    for (BufferId o : producer.outputs)
      if (o != b) visit(o);
    for (BufferId p : producer.reads())
      if (p != b) visit(p);
    for (OpId u : updaters[b])
      if (u < f)
        for (BufferId p : trace.ops[u].reads())
          if (p != b) visit(p);
  };
  // Taking a buffer is tentative: its pins may bring back buffers already away, and if that
  // lifts the profile over the cap anywhere, the choice is undone (a log of what changed).
  struct Undo {
    std::uint32_t device;
    std::size_t from, to;
    double bytes;         // added to the tree over [from, to]
    BufferId buffer;      // whose span was cut (kNoOp: none)
    std::size_t old_to;
    BufferId pinned;      // whose pins grew by one (kNoOp: none)
  };
  std::vector<Undo> log;
  auto tree_add = [&](std::uint32_t d, std::size_t from, std::size_t to, double bytes) {
    trees[d].add(from, to, bytes);
    log.push_back({d, from, to, bytes, kNoOp, 0, kNoOp});
  };
  // Pins b's needs at f; returns false when a buffer brought back lifts the profile over cap.
  auto pin = [&](BufferId b, OpId f) {
    bool fits = true;
    std::vector<BufferId> remade{b};
    while (!remade.empty()) {
      const BufferId x = remade.back();
      remade.pop_back();
      needs(x, f, [&](BufferId p) {
        pins[p].push_back(f);
        log.push_back({0, 0, 0, 0, kNoOp, 0, p});
        auto& [from, to] = away[p];
        if (from > f || f > to) return;
        const Buffer& buf = trace.buffers[p];
        const std::uint32_t d = trace.ops[buf.producer].device;
        tree_add(d, f, to, static_cast<double>(buf.bytes));
        fits &= trees[d].max(f, to) <= cap[d];
        log.push_back({0, 0, 0, 0, p, to, kNoOp});
        to = f - 1;
        if (chosen[p] == 0) remade.push_back(p);
      });
    }
    return fits;
  };
  auto undo = [&] {
    for (auto u = log.rbegin(); u != log.rend(); ++u) {
      if (u->pinned != kNoOp) pins[u->pinned].pop_back();
      else if (u->buffer != kNoOp) away[u->buffer].second = u->old_to;
      else trees[u->device].add(u->from, u->to, -u->bytes);
    }
  };
  for (const Candidate& c : candidates) {
    MaxTree& tree = trees[c.device];
    if (n_ops == 0 || tree.max(0, n_ops - 1) <= cap[c.device]) continue;
    const BufferId b = c.choice.buffer;
    std::size_t to = c.to;
    for (OpId p : pins[b])
      if (p >= c.from && p <= to) to = p - 1;
    if (to < c.from || tree.max(c.from, to) <= cap[c.device]) continue;
    log.clear();
    tree_add(c.device, c.from, to, -static_cast<double>(c.bytes));
    // It comes back at F, or earlier at its first pin: what it needs comes back then.
    if (!c.choice.swap && !pin(b, static_cast<OpId>(to + 1))) {
      undo();
      continue;
    }
    away[b] = {c.from, to};
    chosen[b] = c.choice.swap ? 1 : 0;
    ch.choices.push_back(c.choice);
    (c.choice.swap ? ch.swaps : ch.recomputes) += 1;
    (c.choice.swap ? ch.swap_bytes : ch.recompute_bytes) += c.bytes;
  }
  // Where the planned profile still exceeds a cap, for the OOM reason.
  for (std::size_t d = 0; d < devices.size(); ++d)
    if (n_ops > 0 && trees[d].max(0, n_ops - 1) > cap[d])
      for (std::size_t i = 0; i < n_ops; ++i)
        if (const double v = trees[d].max(i, i); v > cap[d]) {
          ch.over = fmt::format("; its plan still needs {} at op '{}'", format_bytes(v), trace.ops[i].name);
          break;
        }
  std::sort(ch.choices.begin(), ch.choices.end(),
            [](const Choice& a, const Choice& b) { return a.last_forward < b.last_forward; });
  if (verbose_)
    out.notes.push_back(fmt::format("hybrid: {} swapped ({}), {} recomputed ({})", ch.swaps,
                                    format_bytes(static_cast<double>(ch.swap_bytes)), ch.recomputes,
                                    format_bytes(static_cast<double>(ch.recompute_bytes))));

  std::vector<std::vector<Step>> after(n_ops), before(n_ops);
  for (const Choice& c : ch.choices) {
    if (c.swap) {
      after[c.last_forward].push_back({StepKind::swap_out, c.buffer, static_cast<std::uint32_t>(c.offload_tier)});
      const auto device = trace.ops[trace.buffers[c.buffer].producer].device;
      before[c.prefetch].push_back(
          {StepKind::swap_in, c.buffer,
           static_cast<std::uint32_t>(*platform.devices[devices[device]].operand_tier())});
    } else {
      after[c.last_forward].push_back({StepKind::drop, c.buffer, 0});
    }
  }
  Plan plan;
  plan.steps.reserve(n_ops + n_buf + 2 * ch.choices.size());
  for (const Op& op : trace.ops) {
    for (const Step& s : before[op.id]) plan.steps.push_back(s);
    plan.steps.push_back({StepKind::compute, op.id, 0});
    for (BufferId b : liveness.dies_after[op.id]) plan.steps.push_back({StepKind::free, b, 0});
    for (const Step& s : after[op.id]) plan.steps.push_back(s);
  }
  out.plan = std::move(plan);
  out.label = label(ch);
  out.hooks = std::make_shared<Hooks>(ch.swaps, ch.recomputes, ch.over);
  return out;
}

}  // namespace

PolicyInfo hybrid_policy() {
  return {"hybrid",
          "per activation kept for backward, swap or recompute, whichever takes less time "
          "(Capuchin's rule), as many as the budget needs",
          {budget_param(),
           {"verbose", "print each buffer's swap and recompute times and the choice to stderr", "false"}},
          [](const Params& params) -> std::unique_ptr<Policy> {
            return std::make_unique<HybridPolicy>(read_budget(params), params.get("budget").as_string(),
                                                  params.get("verbose").as_bool());
          }};
}

}  // namespace memsim
