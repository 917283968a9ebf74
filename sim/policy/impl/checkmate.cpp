// checkmate: optimal rematerialization of the whole training graph as a mixed-integer
// program (Jain et al. 2020), solved by COIN-OR CBC within a time limit, or within limits of
// work (branch-and-bound nodes, simplex iterations) that give the same answer on any machine
// (schedule/remat_milp.h). Any forward op may run again, any number of times, anywhere
// before its reader; the answer is the least recomputation time that fits the budget, with
// CBC's bound and whether it is proven optimal. Without an integer solution in its limits, the LP
// relaxation is rounded (the paper's fallback).
//
// The graph: one node per op of a device, or, past `max_nodes`, runs of consecutive ops of
// one phase taken together (the program has n^2 variables); the optimizer's ops are one
// node. A forward node's value is what its ops make that later ops read; what a backward
// node makes is pinned from its stage to its last reader's (it cannot run again, so no
// schedule changes that). A node's workspace is the most its ops hold at once besides its
// value. An in-place update adds no memory: later readers depend on the updating node and
// on the node holding the buffer (the engine replays the updates when it remakes the
// buffer; the program does not charge for them). Buffers resident from the start count as
// constant. Where the engine needs more than the program counts (coarse nodes; a buffer
// updated in place is remade at its reader, with what it is made from), the excess is
// pinned to the stage where the engine peaks and the program solved again.
#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/policy/impl/ckpt_common.h"
#include "sim/policy/policy.h"
#include "sim/policy/schedule/remat_milp.h"

namespace memsim {
namespace {

struct Grouped {
  schedule::RematGraph graph;
  std::vector<std::vector<OpId>> ops;  // per node
};

Grouped build_graph(const Trace& trace, std::uint32_t device, const std::vector<double>& durations,
                    std::size_t max_nodes) {
  // The optimizer's ops make one node: they only read what is pinned (weight gradients)
  // and could not be recomputed anyway; nodes are better spent on the forward and backward.
  std::vector<OpId> mine;
  std::size_t optimizer = 0;
  for (const Op& op : trace.ops)
    if (op.device == device) {
      mine.push_back(op.id);
      optimizer += op.phase == Phase::optimizer;
    }
  const std::size_t slots = std::max<std::size_t>(1, max_nodes - (optimizer > 0));
  const std::size_t per = std::max<std::size_t>(1, (mine.size() - optimizer + slots - 1) / slots);
  Grouped g;
  for (OpId o : mine) {
    const Phase phase = trace.ops[o].phase;
    if (g.ops.empty() || (g.ops.back().size() >= per && phase != Phase::optimizer) ||
        trace.ops[g.ops.back().front()].phase != phase)
      g.ops.emplace_back();
    g.ops.back().push_back(o);
  }
  const std::size_t n = g.ops.size();
  auto& G = g.graph;
  G.cost.assign(n, 0);
  G.mem.assign(n, 0);
  G.workspace.assign(n, 0);
  G.recomputable.assign(n, false);
  G.deps.assign(n, {});
  for (const Buffer& b : trace.buffers)
    if (b.producer == kNoOp) G.constant += static_cast<double>(b.bytes);
  // Each buffer's memory belongs to the node that made it (its holder); an in-place update
  // makes the node a writer of the buffer, without new memory. A reader depends on the last
  // writer (it needs the update) and on the holder (it needs the memory kept). A holder's
  // value counts as memory when a later node reads it, as workspace when it dies inside.
  std::vector<int> writer(trace.buffers.size(), -1), holder(trace.buffers.size(), -1);
  std::vector<int> last_reader(trace.buffers.size(), -1);  // the last other node reading it
  std::vector<std::uint8_t> read_outside(trace.buffers.size(), 0), read_by_forward(trace.buffers.size(), 0);
  for (std::size_t v = 0; v < n; ++v) {
    const int me = static_cast<int>(v);
    for (OpId o : g.ops[v]) {
      const Op& op = trace.ops[o];
      G.cost[v] += durations[o];
      for (BufferId b : op.reads()) {
        if (writer[b] >= 0 && writer[b] != me) G.deps[v].push_back(writer[b]);
        if (holder[b] >= 0 && holder[b] != me) {
          G.deps[v].push_back(holder[b]);
          read_outside[b] = 1;
          last_reader[b] = me;
          if (op.phase == Phase::forward) read_by_forward[b] = 1;
        }
      }
      for (BufferId b : op.outputs)
        if (!trace.buffers[b].persistent) writer[b] = holder[b] = me;
      for (BufferId b : op.updates)
        if (holder[b] >= 0) writer[b] = me;
    }
    G.recomputable[v] = trace.ops[g.ops[v].front()].phase == Phase::forward;
  }
  for (auto& d : G.deps) {
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
  }
  // A node that cannot run again holds each of its buffers from its stage to the buffer's
  // last reader, whatever the schedule: pinned memory, not part of its value. As part of its
  // value, the activation gradient a conv's backward makes would live as long as the weight
  // gradient made with it, until the optimizer reads that, and no budget would fit.
  enum class Kind : std::uint8_t { value, inside, pinned };
  std::vector<Kind> kind(trace.buffers.size(), Kind::value);
  G.pinned.assign(n, 0);
  for (const Buffer& b : trace.buffers) {
    const int h = holder[b.id];
    if (h < 0) continue;
    const double bytes = static_cast<double>(b.bytes);
    if (!read_outside[b.id]) {
      kind[b.id] = Kind::inside;
    } else if (!G.recomputable[h] && !read_by_forward[b.id]) {
      kind[b.id] = Kind::pinned;
      for (int t = h + 1; t <= last_reader[b.id]; ++t) G.pinned[t] += bytes;
    } else {
      G.mem[h] += bytes;
    }
  }
  // A node's workspace: the most its ops need at once beyond its value (counted whole from
  // the start): their own workspace, what they make that dies inside (freed after its last
  // reader there) and what they make that is pinned.
  std::vector<OpId> last_op(trace.buffers.size(), kNoOp);
  for (const Op& op : trace.ops)
    for (BufferId b : op.reads()) last_op[b] = op.id;
  for (std::size_t v = 0; v < n; ++v) {
    double live = 0, most = 0;
    std::vector<BufferId> inside;
    for (OpId o : g.ops[v]) {
      const Op& op = trace.ops[o];
      for (BufferId b : op.outputs)
        if (holder[b] == static_cast<int>(v) && kind[b] != Kind::value) {
          live += static_cast<double>(trace.buffers[b].bytes);
          if (kind[b] == Kind::inside) inside.push_back(b);
        }
      most = std::max(most, live + static_cast<double>(op.workspace_bytes));
      std::erase_if(inside, [&](BufferId b) {
        if (last_op[b] != kNoOp && last_op[b] > o) return false;
        live -= static_cast<double>(trace.buffers[b].bytes);
        return true;
      });
    }
    G.workspace[v] = most;
  }
  return g;
}

class CheckmatePolicy final : public Policy {
  static constexpr int kRetries = 4;  // solves again when the engine needs more than the program
 public:
  // What planning chose, for the label.
  struct Choices {
    schedule::RematAnswer answer;
    std::size_t nodes = 0, ops = 0;
  };

  explicit CheckmatePolicy(const Params& params)
      : budget_(read_budget(params)),
        max_nodes_(static_cast<std::size_t>(params.get("max_nodes").as_int_in(2, 100'000))),
        integer_(params.get("method").as_choice({"milp", "lp"}) == "milp") {
    const ConfigNode seconds = params.get("seconds");
    if (!is_none(seconds)) {
      limits_.seconds = seconds.as_double();
      if (!(limits_.seconds > 0)) seconds.fail_expected("a time limit in seconds above zero, or none");
    } else {
      limits_.seconds = 0;
    }
    for (const char* key : {"nodes", "iterations"}) {
      const ConfigNode v = params.get(key);
      if (is_none(v)) continue;
      const std::int64_t n = v.as_int_in(1, std::int64_t{1} << 40);
      (std::string_view(key) == "nodes" ? limits_.nodes : limits_.iterations) = n;
    }
  }

  std::optional<Budget> budget() const override { return budget_; }

  PlanResult plan(const PlanningContext& ctx) const override { return ckpt::plan_with(*this, ctx); }

  Plan plan_steps(const PlanningContext& ctx, Choices& c, PlanResult& out) const {
    const Trace& trace = ctx.trace;
    const std::vector<double>& durations = ctx.durations;
    const std::vector<std::uint64_t> caps = ctx.device_caps();
    ckpt::Schedule schedule(trace);
    for (std::uint32_t d = 0; d < ckpt::device_count(trace); ++d) {
      const Grouped g = build_graph(trace, d, durations, max_nodes_);
      c.nodes = g.graph.size();
      c.ops = 0;
      for (const auto& v : g.ops) c.ops += v.size();
      schedule::RematOptions opt = limits_;
      opt.integer = integer_;
      const double cap = static_cast<double>(d < caps.size() ? caps[d] : caps.back());
      // The engine can need more than the program counts: a coarse node's ops run again one
      // by one, and a buffer updated in place is remade at its reader, so what it is made
      // from lives until then. When the lowered schedule peaks above the cap, the excess is
      // pinned to the stage where the engine peaks and the program solved again; the last
      // time, for a budget lower by the excess (or by what the engine needed beyond the
      // program). The first schedule that fits is kept, or failing that the one that peaks
      // least.
      schedule::RematGraph graph = g.graph;
      std::vector<int> node_of(trace.ops.size(), -1);
      for (std::size_t v = 0; v < g.ops.size(); ++v)
        for (OpId o : g.ops[v]) node_of[o] = static_cast<int>(v);
      double target = cap;
      std::optional<ckpt::Schedule> best;
      std::uint64_t best_peak = 0;
      schedule::RematAnswer best_answer;
      bool stopped = false;
      for (int attempt = 0; attempt <= kRetries; ++attempt) {
        schedule::RematAnswer a = schedule::solve_remat(graph, target, opt);
        if (!a.found) {
          stopped = a.time_limit || a.work_limit;
          break;
        }
        ckpt::Schedule trial = schedule;
        for (std::size_t t = 0; t < g.ops.size(); ++t)
          for (int i : a.recompute[t]) {
            auto& list = trial.before[g.ops[t].front()];
            list.insert(list.end(), g.ops[i].begin(), g.ops[i].end());
          }
        const ckpt::Lowered l = ckpt::lower(trace, trial, durations);
        const std::uint64_t peak = d < l.peak_bytes.size() ? l.peak_bytes[d] : 0;
        const OpId at = d < l.peak_op.size() ? l.peak_op[d] : kNoOp;
        const double excess = static_cast<double>(peak) - cap;
        const double gap = static_cast<double>(peak) - schedule::remat_peak(graph, a.recompute);
        if (!best || peak < best_peak) {
          best = std::move(trial);
          best_peak = peak;
          best_answer = std::move(a);
        }
        if (excess <= 0 || attempt == kRetries) break;
        std::string again;
        if (attempt + 1 < kRetries && at != kNoOp && node_of[at] >= 0) {
          graph.pinned[node_of[at]] += excess;
          again = fmt::format("with {} more at '{}'", format_bytes(excess), trace.ops[at].name);
        } else {
          target = std::min(target - excess, cap - gap);
          again = fmt::format("for {}", format_bytes(target));
        }
        out.notes.push_back(fmt::format("checkmate: the schedule peaks at {} in the engine, above "
                                        "the budget; solving again {}",
                                        format_bytes(static_cast<double>(peak)), again));
      }
      if (!best) {
        c.answer = schedule::RematAnswer{};
        out.explain("checkmate",
                    fmt::format("no schedule of {} nodes fits {} (the program is infeasible{})",
                                c.nodes, format_bytes(cap),
                                stopped ? ", or no solution was found " + limits_text() : ""));
        continue;  // plan as it is: the engine reports where memory runs out
      }
      c.answer = std::move(best_answer);
      schedule = std::move(*best);
      if (!c.answer.proven_optimal)
        out.notes.push_back(
                   fmt::format("checkmate: not proven optimal{}: best found {} of recomputation ({}), bound {}",
                               c.answer.time_limit || c.answer.work_limit ? " " + limits_text() : "",
                               format_seconds(c.answer.cost), c.answer.method, format_seconds(c.answer.bound)));
    }
    ckpt::Lowered l = ckpt::lower(trace, schedule, durations);
    if (c.answer.found && !ckpt::fits(l, caps))
      out.notes.push_back(fmt::format("checkmate: the schedule peaks at {} in the engine, above the "
                                      "budget (the program counts memory differently)",
                                      format_bytes(static_cast<double>(l.max_peak()))));
    return std::move(l.plan);
  }

  std::string label(const Choices& c) const {
    if (c.nodes == 0) return "checkmate";
    const std::string graph = c.nodes < c.ops ? fmt::format("{} nodes of {} ops", c.nodes, c.ops)
                                            : fmt::format("{} ops", c.ops);
    if (!c.answer.found) return fmt::format("checkmate({}, no schedule)", graph);
    if (c.answer.proven_optimal) return fmt::format("checkmate({}, optimal)", graph);
    return fmt::format("checkmate({}, not proven optimal: {})", graph, c.answer.method);
  }

 private:
  static bool is_none(const ConfigNode& v) { return v.is_scalar() && v.as_string() == "none"; }

  // "within the limit of 60 s and 500 nodes": the solver's limits, for the notes.
  std::string limits_text() const {
    std::vector<std::string> parts;
    if (limits_.seconds > 0) parts.push_back(fmt::format("{} s", limits_.seconds));
    if (limits_.nodes > 0) parts.push_back(fmt::format("{} nodes", limits_.nodes));
    if (limits_.iterations > 0) parts.push_back(fmt::format("{} simplex iterations", limits_.iterations));
    return fmt::format("within the limit of {}", fmt::join(parts, " and "));
  }

  Budget budget_;
  schedule::RematOptions limits_;
  std::size_t max_nodes_;
  bool integer_;
};

}  // namespace

PolicyInfo checkmate_policy() {
  return {"checkmate",
          "optimal rematerialization as a mixed-integer program (Jain et al.), solved by CBC "
          "within a time or work limit; LP rounding when no integer solution is found",
          {budget_param(),
           {"seconds",
            "CBC's time limit for the program (and again for its LP relaxation, and again for "
            "each solve for a lower budget), or none; the answer then depends on the machine's "
            "speed",
            "60"},
           {"nodes",
            "CBC's limit on branch-and-bound nodes for each solve, or none: a limit of work, "
            "which gives the same answer on any machine",
            "none"},
           {"iterations", "CBC's limit on simplex iterations for each solve, or none (work, as nodes)",
            "none"},
           {"max_nodes", "largest graph solved op by op; beyond, runs of consecutive ops are nodes",
            "120"},
           {"method", "milp (branch and bound) or lp (the relaxation, rounded)", "milp"}},
          [](const Params& p) { return std::make_unique<CheckmatePolicy>(p); }};
}

}  // namespace memsim
