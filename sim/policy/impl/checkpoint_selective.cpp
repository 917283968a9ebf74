// checkpoint-selective: Korthikanti et al. 2022 (Megatron-LM's selective activation
// recomputation). Only the forward ops that make large tensors for little work are
// recomputed — in a transformer the attention core: the scores q k^T, softmax, dropout on
// the probabilities and probabilities x v, whose seq x seq outputs dominate the activations
// while costing a few percent of the FLOPs. Their outputs are dropped after the forward and
// remade, from the kept q, k and v, just before the first backward op that reads one; the
// rest of the activations are kept.
#include <algorithm>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "sim/policy/impl/ckpt_common.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

class SelectivePolicy final : public Policy {
 public:
  // What planning chose, for the label.
  struct Choices {
    std::size_t ops = 0;
  };

  explicit SelectivePolicy(const Params& params) : budget_(read_budget(params)) {
    const ConfigNode n = params.get("kinds");
    std::stringstream in(n.as_string());
    for (std::string k; std::getline(in, k, ',');) {
      k.erase(0, k.find_first_not_of(' '));
      k.erase(k.find_last_not_of(' ') + 1);
      if (!k.empty()) kinds_.insert(k);
    }
    if (kinds_.empty()) n.fail_expected("op kinds separated by commas, like 'bmm,softmax,dropout'");
    min_bytes_per_flop_ = params.get("min_bytes_per_flop").as_double();
    if (min_bytes_per_flop_ < 0)
      params.get("min_bytes_per_flop").fail_expected("a ratio of 0 or more");
  }

  std::optional<Budget> budget() const override { return budget_; }

  PlanResult plan(const PlanningContext& ctx) const override { return ckpt::plan_with(*this, ctx); }

  Plan plan_steps(const PlanningContext& ctx, Choices& c, PlanResult& out) const {
    const Trace& trace = ctx.trace;
    // The ops to recompute: of the chosen kinds, and making at least this many bytes per
    // FLOP (cheap for their size).
    std::vector<std::uint8_t> chosen(trace.ops.size(), 0);
    std::vector<std::uint8_t> from_chosen(trace.buffers.size(), 0);
    for (const Op& op : trace.ops) {
      if (op.phase != Phase::forward || !kinds_.contains(op.kind)) continue;
      double bytes = 0;
      for (BufferId b : op.outputs) bytes += static_cast<double>(trace.buffers[b].bytes);
      if (op.flops > 0 && bytes / op.flops < min_bytes_per_flop_) continue;
      chosen[op.id] = 1;
      ++c.ops;
      for (BufferId b : op.outputs) from_chosen[b] = 1;
    }
    // Before the first backward op that reads one of their outputs, run again the chosen
    // ops that remake it (and the chosen ops those read from).
    ckpt::Schedule s(trace);
    std::vector<std::uint8_t> remade(trace.ops.size(), 0);
    std::vector<OpId> todo, group;
    for (const Op& op : trace.ops) {
      if (op.phase == Phase::forward) continue;
      group.clear();
      for (BufferId b : op.reads())
        if (from_chosen[b] && !remade[trace.buffers[b].producer]) todo.push_back(trace.buffers[b].producer);
      while (!todo.empty()) {
        const OpId p = todo.back();
        todo.pop_back();
        if (remade[p]) continue;
        remade[p] = 1;
        group.push_back(p);
        for (BufferId b : trace.ops[p].reads())
          if (from_chosen[b] && !remade[trace.buffers[b].producer]) todo.push_back(trace.buffers[b].producer);
      }
      std::sort(group.begin(), group.end());
      s.before[op.id] = group;
    }
    const std::vector<double>& durations = ctx.durations;
    ckpt::Lowered l = ckpt::lower(trace, s, durations);
    const auto caps = ctx.device_caps();
    if (!ckpt::fits(l, caps))
      out.explain("checkpoint-selective", fmt::format("recomputing {} ops still needs {} at the peak, more than the {} the "
                             "device holds",
                             c.ops, format_bytes(static_cast<double>(l.max_peak())),
                             format_bytes(static_cast<double>(caps[0]))));
    return std::move(l.plan);
  }

  std::string label(const Choices& c) const {
    std::string k;
    for (const auto& x : kinds_) k += (k.empty() ? "" : ",") + x;
    return fmt::format("checkpoint-selective({}{})", k, c.ops ? fmt::format(": {} ops", c.ops) : "");
  }

 private:
  Budget budget_;
  std::set<std::string, std::less<>> kinds_;
  double min_bytes_per_flop_ = 0;
};

}  // namespace

PolicyInfo checkpoint_selective_policy() {
  return {"checkpoint-selective",
          "Megatron-style selective recomputation: recompute only cheap ops with large outputs "
          "(the attention core: scores, softmax, dropout), keep the rest",
          {{"kinds", "forward op kinds to recompute, separated by commas", "bmm,softmax,dropout"},
           {"min_bytes_per_flop",
            "recompute an op of those kinds only if it makes at least this many output bytes "
            "per FLOP (0: all of them)",
            "0"},
           budget_param()},
          [](const Params& p) { return std::make_unique<SelectivePolicy>(p); }};
}

}  // namespace memsim
