// revolve: Griewank's binomial checkpointing (Griewank 1992; Griewank & Walther 2000) on a
// chain-shaped trace. The forward is split into stages (a layer, a residual block, a
// recurrent step: see ckpt::find_stages); with c checkpoint slots a reversal of Griewank's
// game re-runs the fewest stages any schedule in that game can (schedule/chain.h).
//
// How the stages are laid on Griewank's steps depends on what the backward reads:
//  - a plain chain, where the backward of a stage reads only that stage's state (a linear
//    layer's input), has two layings, and the planner keeps the one that recomputes less
//    within the budget:
//      taped last: n steps; reversing step n is stage n's own first run (Griewank's taped
//        forward), then G_n and G_{n-1}; reversing step k < n is G_{k-1} from x_{k-1}.
//        t(n, c+1) - (n - 1) stages run again, one or more fewer than the loss step's at
//        the same slots: x_{n-1} stays through G_n instead of being remade after it (on the
//        DTR benchmark this reaches the least any schedule can at 0.5 and 0.25 of the
//        baseline: bench/dtr_bench.cpp). It costs memory only while G_n runs, the one
//        backward group with a single gradient alive, so the peak is no higher unless
//        what G_n reads outweighs the gradient G_{n-1} makes;
//      loss step: n + 1 steps, the loss the last; reversing step k+1 is G_k from x_k.
//        t(n + 1, c+1) - n stages run again, and x_{n-1} is not held while G_n runs.
//  - otherwise (an LSTM step's backward reads its gates), reversing step k re-runs stage k
//    from x_{k-1} to remake what G_k reads (Griewank's taped forward).
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "sim/policy/impl/ckpt_common.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

using schedule::ChainAction;
using schedule::ChainStep;

// How a plain chain is laid on Griewank's steps (see the top of the file); a chain whose
// backward needs more than the states is always taped at every step.
enum class Laying : std::uint8_t { taped_last, loss_step };

// Griewank's actions in terms of the stages.
std::vector<ChainStep> revolve_actions(const ckpt::Stages& st, std::uint32_t slots, Laying laying) {
  const auto n = static_cast<std::uint32_t>(st.count());
  std::vector<ChainStep> out;
  if (!st.reads_state_only) {
    for (const ChainStep& a : schedule::revolve_schedule(n, slots + 1)) {
      if (a.action == ChainAction::reverse) out.push_back({ChainAction::advance, a.step});
      out.push_back(a);
    }
  } else if (laying == Laying::loss_step) {
    for (const ChainStep& a : schedule::revolve_schedule(n + 1, slots + 1)) {
      if (a.action == ChainAction::advance)
        out.push_back(a);
      else if (a.step >= 2)
        out.push_back({ChainAction::reverse, a.step - 1});
    }
  } else {
    for (const ChainStep& a : schedule::revolve_schedule(n, slots + 1)) {
      if (a.action == ChainAction::advance) {
        out.push_back(a);
      } else if (a.step == n) {
        // The first sweep's last stage, its backward, and the previous stage's from x_{n-1}.
        out.push_back({ChainAction::advance, n});
        out.push_back({ChainAction::reverse, n});
        if (n >= 2) out.push_back({ChainAction::reverse, n - 1});
      } else if (a.step >= 2) {
        out.push_back({ChainAction::reverse, a.step - 1});
      }
    }
  }
  return out;
}

// Recomputed stages of a revolve schedule, from the closed form.
std::uint64_t revolve_recomputes(const ckpt::Stages& st, std::uint32_t slots, Laying laying) {
  const std::uint64_t n = st.count();
  // Taped at every step: each reversal but the last stage's also re-runs its stage, which
  // Griewank's count leaves out.
  if (!st.reads_state_only) return schedule::revolve_cost(n, slots + 1);
  // A plain chain: Griewank's advances beyond the first sweep.
  return laying == Laying::loss_step ? schedule::revolve_cost(n + 1, slots + 1) - n
                                     : schedule::revolve_cost(n, slots + 1) - (n - 1);
}

class RevolvePolicy final : public Policy {
 public:
  // What planning chose, for the label.
  struct Choices {
    std::uint32_t chosen = 0, stages = 0;
    bool whole = false;
  };

  explicit RevolvePolicy(const Params& params) : budget_(read_budget(params)) {
    const ConfigNode s = params.get("slots");
    if (s.as_string() != "auto") slots_ = static_cast<std::uint32_t>(s.as_int_in(0, 100'000'000));
  }

  std::optional<Budget> budget() const override { return budget_; }

  PlanResult plan(const PlanningContext& ctx) const override { return ckpt::plan_with(*this, ctx); }

  Plan plan_steps(const PlanningContext& ctx, Choices& c, PlanResult& out) const {
    const Trace& trace = ctx.trace;
    const std::vector<double>& durations = ctx.durations;
    const std::vector<std::uint64_t> caps = ctx.device_caps();
    const std::vector<ckpt::Stages> stages = ckpt::find_stages(trace, "revolve");
    std::uint32_t n = 0;
    for (const auto& st : stages) n = std::max(n, static_cast<std::uint32_t>(st.count()));
    c.stages = n;
    auto make_with = [&](Laying laying) {
      return [&, laying](std::uint32_t slots) {
        ckpt::Schedule s(trace);
        for (const auto& st : stages) ckpt::add_chain_schedule(st, revolve_actions(st, slots, laying), s);
        return s;
      };
    };
    // A plain chain has two layings; the first recomputes less at the same slots.
    bool plain = false;
    for (const auto& st : stages) plain |= st.reads_state_only;
    std::vector<Laying> layings{Laying::taped_last};
    if (plain) layings.push_back(Laying::loss_step);
    // Of two plans, the one that fits, then the one that recomputes less, then the lower.
    auto better = [](const ckpt::Fitted& a, const ckpt::Fitted& b) {
      if (a.fits != b.fits) return a.fits;
      if (!a.fits) return a.lowered.max_peak() < b.lowered.max_peak();
      return a.lowered.recompute_s < b.lowered.recompute_s;
    };

    if (slots_) {
      std::optional<ckpt::Fitted> best;
      for (Laying laying : layings) {
        ckpt::Fitted f;
        f.slots = *slots_;
        f.lowered = ckpt::lower(trace, make_with(laying)(f.slots), durations);
        f.fits = ckpt::fits(f.lowered, caps);
        if (!best || better(f, *best)) best = std::move(f);
      }
      c.chosen = best->slots;
      if (!best->fits)
        out.explain("revolve", fmt::format("{} slots over {} stages need {} at the peak, more than the {} the "
                            "device holds",
                            c.chosen, n, format_bytes(static_cast<double>(best->lowered.max_peak())),
                            format_bytes(static_cast<double>(caps[0]))));
      return std::move(best->lowered.plan);
    }
    // Enough memory for everything: nothing to recompute.
    ckpt::Lowered keep = ckpt::lower(trace, ckpt::Schedule(trace), durations);
    if (ckpt::fits(keep, caps)) {
      c.chosen = n;
      c.whole = true;
      return std::move(keep.plan);
    }
    // Start near what the memory left beside the states could hold, in states (at least
    // sqrt(n): a trace whose peak is not the states' guesses low).
    const ckpt::Stages& st = stages[0];
    std::uint64_t states = 0;
    for (std::size_t s = 1; s <= st.count(); ++s) states += st.state_bytes[s];
    const std::uint64_t rest = keep.peak_bytes[0] - std::min(keep.peak_bytes[0], states);
    const std::uint64_t unit = std::max<std::uint64_t>(1, states / std::max<std::size_t>(1, st.count()));
    std::uint32_t guess = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        n - 1, std::max<std::uint64_t>(static_cast<std::uint64_t>(std::sqrt(n)),
                                       (caps[0] - std::min(caps[0], rest)) / unit)));
    std::optional<ckpt::Fitted> best;
    for (Laying laying : layings) {
      // The fewest slots worth planning: a schedule of at most ~2^25 recomputed stages.
      std::uint32_t lo = 0;
      const std::uint64_t ops_per_stage = st.forward.size() / n + 1;
      while (lo + 1 < n && revolve_recomputes(st, lo, laying) * ops_per_stage > (1u << 25)) ++lo;
      ckpt::Fitted f = ckpt::fit_slots(trace, lo, n - 1, guess, make_with(laying), caps, durations);
      guess = f.slots;  // the next laying's answer is near: few plans to bracket it
      if (!best || better(f, *best)) best = std::move(f);
    }
    c.chosen = best->slots;
    if (!best->fits)
      out.explain("revolve", fmt::format("no schedule fits: even {} slot(s) over {} stages peak at {}, more "
                          "than the {} the device holds",
                          best->slots, n, format_bytes(static_cast<double>(best->lowered.max_peak())),
                          format_bytes(static_cast<double>(caps[0]))));
    return std::move(best->lowered.plan);
  }

  std::string label(const Choices& c) const {
    if (c.whole) return fmt::format("revolve(stages={}, nothing recomputed)", c.stages);
    if (c.stages == 0) return slots_ ? fmt::format("revolve(slots={})", *slots_) : "revolve";
    return fmt::format("revolve(slots={}, stages={})", c.chosen, c.stages);
  }

 private:
  Budget budget_;
  std::optional<std::uint32_t> slots_;
};

}  // namespace

PolicyInfo revolve_policy() {
  return {"revolve",
          "Griewank's binomial checkpointing of a chain-shaped trace: the fewest re-run stages "
          "for a number of checkpoint slots",
          {{"slots",
            "checkpoints held besides the input (0 or more), or auto: the most that fit the "
            "budget",
            "auto"},
           budget_param()},
          [](const Params& p) { return std::make_unique<RevolvePolicy>(p); }};
}

}  // namespace memsim
