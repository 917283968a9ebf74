// checkpoint-sqrt: Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost".
// The forward ops, in issue order, are split into k segments (about sqrt(n) of them). What a
// segment makes and a later segment's forward reads is kept (the checkpoints); the rest is
// dropped after its last forward use and, when the backward reaches the segment, the
// segment's forward runs again before the first backward op that needs it (Chen's
// "recompute the segment, then backpropagate through it"). The last segment keeps
// everything: its backward follows at once. Cost: about one extra forward pass; memory:
// about k checkpoints plus one segment.
//
// With `policy.budget`, Chen's greedy variant: walking the forward, a segment ends once the
// activations made since the last boundary exceed B; B is searched (Chen's grid search) for
// the least recomputation whose peak fits the budget.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/policy/impl/ckpt_common.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

constexpr std::uint32_t kNoSegment = 0xffffffffu;

// What add_segments marks per buffer and per op, sized to the trace once and cleared after
// each device over that device's own buffers and ops only.
struct Marks {
  std::vector<std::uint32_t> seg_of, op_seg;
  std::vector<std::uint8_t> kept, read_back, need, rerun;
  explicit Marks(const Trace& trace)
      : seg_of(trace.buffers.size(), kNoSegment),
        op_seg(trace.ops.size(), kNoSegment),
        kept(trace.buffers.size(), 0),
        read_back(trace.buffers.size(), 0),
        need(trace.buffers.size(), 0),
        rerun(trace.ops.size(), 0) {}
  void clear(const Trace& trace, const std::vector<OpId>& ops) {
    for (OpId o : ops) {
      op_seg[o] = kNoSegment;
      rerun[o] = 0;
      const Op& op = trace.ops[o];
      for (const auto* list : {&op.inputs, &op.outputs, &op.updates})
        for (BufferId b : *list) {
          seg_of[b] = kNoSegment;
          kept[b] = read_back[b] = need[b] = 0;
        }
    }
  }
};

// Chen's schedule for one device: `segment[q]` is the segment of forward op q; `later` is the
// device's other ops.
void add_segments(const Trace& trace, const std::vector<OpId>& forward, const std::vector<OpId>& later,
                  const std::vector<std::uint32_t>& segment, Marks& marks, ckpt::Schedule& out) {
  if (forward.empty()) return;
  const std::uint32_t last = segment.back();
  auto& [seg_of, op_seg, kept, read_back, need, rerun] = marks;
  for (std::size_t q = 0; q < forward.size(); ++q) {
    op_seg[forward[q]] = segment[q];
    for (BufferId b : trace.ops[forward[q]].outputs)
      if (!trace.buffers[b].persistent) seg_of[b] = segment[q];
  }
  // Checkpoints: read by the forward of a later segment.
  for (OpId o : forward) {
    const Op& op = trace.ops[o];
    for (BufferId b : op.reads())
      if (seg_of[b] != kNoSegment && seg_of[b] < op_seg[o]) kept[b] = 1;
  }
  // Per segment: the first backward op reading what it made and did not keep.
  const std::uint32_t segments = last + 1;
  std::vector<OpId> first_reader(segments, kNoOp);
  for (OpId o : later) {
    const Op& op = trace.ops[o];
    for (BufferId b : op.reads()) {
      const std::uint32_t s = seg_of[b];
      if (s == kNoSegment || s == last || kept[b]) continue;
      read_back[b] = 1;
      if (first_reader[s] == kNoOp) first_reader[s] = op.id;
    }
  }
  // Each segment's ops to re-run: those making what the backward reads, and, back to the
  // checkpoints, what those need (in-place updates of it included).
  std::size_t end = forward.size();
  for (std::uint32_t s = segments; s-- > 0;) {
    std::size_t begin = end;
    while (begin > 0 && segment[begin - 1] == s) --begin;
    if (s != last && first_reader[s] != kNoOp) {
      for (std::size_t q = begin; q < end; ++q)
        for (BufferId b : trace.ops[forward[q]].outputs)
          if (read_back[b]) need[b] = 1;
      for (bool changed = true; changed;) {
        changed = false;
        for (std::size_t q = end; q-- > begin;) {
          const OpId o = forward[q];
          if (rerun[o]) continue;
          const Op& op = trace.ops[o];
          bool wanted = false;
          for (BufferId b : op.outputs) wanted |= need[b] != 0;
          for (BufferId b : op.updates) wanted |= need[b] != 0;
          if (!wanted) continue;
          rerun[o] = 1;
          changed = true;
          for (BufferId b : op.reads())
            if (seg_of[b] == s && !kept[b]) need[b] = 1;
        }
      }
      auto& list = out.before[first_reader[s]];
      for (std::size_t q = begin; q < end; ++q)
        if (rerun[forward[q]]) list.push_back(forward[q]);
    }
    end = begin;
  }
  marks.clear(trace, forward);
  marks.clear(trace, later);
}

// k segments of n / k ops, the last one taking the rest (the loss, after 16 layers in 4).
std::vector<std::uint32_t> equal_segments(std::size_t n, std::uint32_t k) {
  std::vector<std::uint32_t> seg(n);
  const std::size_t size = std::max<std::size_t>(1, n / k);
  for (std::size_t q = 0; q < n; ++q) seg[q] = static_cast<std::uint32_t>(std::min<std::size_t>(k - 1, q / size));
  return seg;
}

// Chen's greedy: a boundary after the op that takes the bytes made since the last one past B.
std::vector<std::uint32_t> greedy_segments(const Trace& trace, const std::vector<OpId>& forward,
                                           double limit) {
  std::vector<std::uint32_t> seg(forward.size());
  std::uint32_t s = 0;
  double made = 0;
  for (std::size_t q = 0; q < forward.size(); ++q) {
    seg[q] = s;
    for (BufferId b : trace.ops[forward[q]].outputs) made += static_cast<double>(trace.buffers[b].bytes);
    if (made > limit && q + 1 < forward.size()) {
      ++s;
      made = 0;
    }
  }
  return seg;
}

class CheckpointSqrtPolicy final : public Policy {
 public:
  // What planning chose, for the label.
  struct Choices {
    std::uint32_t chosen = 0;
    double limit = 0;
  };

  explicit CheckpointSqrtPolicy(const Params& params)
      : budget_(read_budget(params)), greedy_(params.given("budget")) {
    const ConfigNode s = params.get("segments");
    if (s.as_string() != "auto") segments_ = static_cast<std::uint32_t>(s.as_int_in(1, 100'000'000));
  }

  std::optional<Budget> budget() const override { return budget_; }

  PlanResult plan(const PlanningContext& ctx) const override { return ckpt::plan_with(*this, ctx); }

  Plan plan_steps(const PlanningContext& ctx, Choices& c, PlanResult& out) const {
    const Trace& trace = ctx.trace;
    const ckpt::DeviceOps ops(trace);
    const auto& forward = ops.forward;
    const auto devices = static_cast<std::uint32_t>(forward.size());
    Marks marks(trace);
    const std::size_t n = forward[0].size();
    if (segments_ || !greedy_) {
      c.chosen = segments_ ? *segments_
                          : std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::lround(std::sqrt(static_cast<double>(n)))));
      ckpt::Schedule s(trace);
      for (std::uint32_t d = 0; d < devices; ++d)
        add_segments(trace, forward[d], ops.later[d],
                     equal_segments(forward[d].size(), std::min<std::uint32_t>(c.chosen, std::max<std::size_t>(1, forward[d].size()))),
                     marks, s);
      return ckpt::lower(trace, s, {}).plan;
    }
    // The greedy variant under the budget: B from all the activations down, a quarter of an
    // octave at a time, and no recomputation at all first.
    const std::vector<double>& durations = ctx.durations;
    const std::vector<std::uint64_t> caps = ctx.device_caps();
    double total = 0;
    for (OpId o : forward[0])
      for (BufferId b : trace.ops[o].outputs) total += static_cast<double>(trace.buffers[b].bytes);
    struct Best {
      ckpt::Lowered lowered;
      bool fits = false;
      std::uint32_t segments = 1;
      double limit = 0;
    };
    std::optional<Best> best;
    std::vector<std::vector<std::uint32_t>> tried;
    auto consider = [&](double limit) {
      std::vector<std::uint32_t> seg0 = greedy_segments(trace, forward[0], limit);
      if (std::find(tried.begin(), tried.end(), seg0) != tried.end()) return;
      ckpt::Schedule s(trace);
      for (std::uint32_t d = 0; d < devices; ++d)
        add_segments(trace, forward[d], ops.later[d], d == 0 ? seg0 : greedy_segments(trace, forward[d], limit),
                     marks, s);
      Best b{ckpt::lower(trace, s, durations), false, seg0.empty() ? 1 : seg0.back() + 1, limit};
      b.fits = ckpt::fits(b.lowered, caps);
      tried.push_back(std::move(seg0));
      const bool better =
          !best || (b.fits && !best->fits) ||
          (b.fits == best->fits &&
           (b.fits ? std::pair(b.lowered.recompute_s, b.lowered.max_peak()) <
                         std::pair(best->lowered.recompute_s, best->lowered.max_peak())
                   : b.lowered.max_peak() < best->lowered.max_peak()));
      if (better) best = std::move(b);
    };
    consider(total * 2);  // one segment: nothing dropped
    for (int i = 0; i < 160 && !(best->fits && best->lowered.recompute_s == 0); ++i) {
      const double limit = total * std::pow(2.0, -i / 4.0);
      if (limit < 1) break;
      consider(limit);
    }
    c.chosen = best->segments;
    c.limit = best->limit;
    if (!best->fits)
      out.explain("checkpoint-sqrt",
            fmt::format("no segmentation fits the budget: the least peak, {} with {} segments, "
                             "is more than the {} allowed",
                             format_bytes(static_cast<double>(best->lowered.max_peak())), c.chosen,
                             format_bytes(static_cast<double>(caps[0]))));
    return std::move(best->lowered.plan);
  }

  std::string label(const Choices& c) const {
    if (greedy_ && !segments_)
      return c.chosen ? fmt::format("checkpoint-sqrt(greedy, segments={}, B={})", c.chosen,
                                   format_bytes(c.limit))
                     : "checkpoint-sqrt(greedy)";
    return c.chosen ? fmt::format("checkpoint-sqrt(segments={})", c.chosen) : "checkpoint-sqrt";
  }

 private:
  Budget budget_;
  bool greedy_;  // a budget was given: Chen's greedy segments under it
  std::optional<std::uint32_t> segments_;
};

}  // namespace

PolicyInfo checkpoint_sqrt_policy() {
  return {"checkpoint-sqrt",
          "Chen et al.'s sublinear-memory checkpointing: keep segment boundaries, recompute each "
          "segment in the backward (greedy segments under policy.budget)",
          {{"segments",
            "forward segments (1 or more), or auto: the square root of the forward op count, or "
            "with a budget the greedy search",
            "auto"},
           budget_param()},
          [](const Params& p) { return std::make_unique<CheckpointSqrtPolicy>(p); }};
}

}  // namespace memsim
