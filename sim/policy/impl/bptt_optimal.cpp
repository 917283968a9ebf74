// bptt-optimal: Gruslys et al. 2016's dynamic program (BPTT-MSM) over a recurrent network's
// T time steps and a memory of M slots. Each step (a stage of the chain-shaped trace, see
// ckpt::find_stages) leaves a hidden state (what the next step reads: h and c of an LSTM)
// and an internal state (what its backward reads: the gates too). Storing a hidden state
// costs one slot and lets the reversal restart there; storing an internal state costs alpha
// slots (its size over the hidden state's, rounded up) and also spares re-running that step
// for its backward. The table (schedule/chain.h) gives the fewest forward steps for every
// (T, M); the slots are the most that fit the budget.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/policy/impl/ckpt_common.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

// Typical sizes of a step: the median over the stages (the first and last steps of a
// recurrent layer can differ).
std::uint64_t median(std::vector<std::uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Above this many table updates the DP would take more than a few seconds.
constexpr double kMaxTableWork = 4e9;

class BpttPolicy final : public Policy {
 public:
  // What planning chose, for the label.
  struct Choices {
    std::uint32_t chosen = 0, steps = 0, alpha = 1;
    bool whole = false;
  };

  explicit BpttPolicy(const Params& params) : budget_(read_budget(params)) {
    const ConfigNode s = params.get("slots");
    if (s.as_string() != "auto") slots_ = static_cast<std::uint32_t>(s.as_int_in(0, 10'000'000));
  }

  std::optional<Budget> budget() const override { return budget_; }

  PlanResult plan(const PlanningContext& ctx) const override { return ckpt::plan_with(*this, ctx); }

  Plan plan_steps(const PlanningContext& ctx, Choices& c, PlanResult& out) const {
    const Trace& trace = ctx.trace;
    const std::vector<double>& durations = ctx.durations;
    const std::vector<std::uint64_t> caps = ctx.device_caps();
    const std::vector<ckpt::Stages> stages = ckpt::find_stages(trace, "bptt-optimal");
    const ckpt::Stages& st = stages[0];
    const auto n = static_cast<std::uint32_t>(st.count());
    c.steps = n;
    std::vector<std::uint64_t> hidden(st.state_bytes.begin() + 1, st.state_bytes.end());
    std::vector<std::uint64_t> internal(st.internal_bytes.begin() + 1, st.internal_bytes.end());
    const std::uint64_t unit = std::max<std::uint64_t>(1, median(hidden));
    c.alpha = static_cast<std::uint32_t>(std::max<double>(
        1.0, std::ceil(static_cast<double>(median(internal)) / static_cast<double>(unit))));

    // Enough memory for everything: nothing to recompute.
    if (!slots_) {
      ckpt::Lowered keep = ckpt::lower(trace, ckpt::Schedule(trace), durations);
      if (ckpt::fits(keep, caps)) {
        c.whole = true;
        return std::move(keep.plan);
      }
    }
    // Slots worth a table: never more than all the internal states.
    const std::uint32_t all = c.alpha * (n > 0 ? n - 1 : 0);
    auto guard = [&](std::uint32_t slots) {
      const double work = schedule::BpttTable::work(n, slots, c.alpha);
      if (work > kMaxTableWork)
        throw InputError(fmt::format("{}: bptt-optimal: the table over {} steps and {} slots would "
                                     "take about {:.0e} updates; give a smaller budget or fewer "
                                     "slots, or use revolve",
                                     trace.name, n, slots, work));
    };
    schedule::BpttTable table(n, 0, c.alpha);
    auto make = [&](std::uint32_t slots) {
      table.extend(slots);
      ckpt::Schedule s(trace);
      const auto actions = table.schedule(slots);
      for (const auto& stg : stages) ckpt::add_chain_schedule(stg, actions, s);
      return s;
    };
    if (slots_) {
      c.chosen = std::min(*slots_, all);
      guard(c.chosen);
      ckpt::Fitted f;
      f.lowered = ckpt::lower(trace, make(c.chosen), durations);
      f.fits = ckpt::fits(f.lowered, caps);
      if (!f.fits)
        out.explain("bptt-optimal", fmt::format("{} slots over {} steps need {} at the peak, more than the {} the "
                            "device holds",
                            c.chosen, n, format_bytes(static_cast<double>(f.lowered.max_peak())),
                            format_bytes(static_cast<double>(caps[0]))));
      return std::move(f.lowered.plan);
    }
    // The most slots that fit, searched from about sqrt(T) hidden states' worth.
    const auto first = std::min<std::uint32_t>(all, static_cast<std::uint32_t>(std::sqrt(n)) * c.alpha);
    ckpt::Fitted best = ckpt::fit_slots(trace, 0, all, first, [&](std::uint32_t s) {
      guard(s);
      return make(s);
    }, caps, durations);
    if (!best.fits)
      out.explain("bptt-optimal", fmt::format("no schedule fits: even {} slot(s) over {} steps peak at {}, more than "
                          "the {} the device holds",
                          best.slots, n, format_bytes(static_cast<double>(best.lowered.max_peak())),
                          format_bytes(static_cast<double>(caps[0]))));
    c.chosen = best.slots;
    return std::move(best.lowered.plan);
  }

  std::string label(const Choices& c) const {
    if (c.whole) return fmt::format("bptt-optimal(steps={}, nothing recomputed)", c.steps);
    if (c.steps == 0) return slots_ ? fmt::format("bptt-optimal(slots={})", *slots_) : "bptt-optimal";
    return fmt::format("bptt-optimal(slots={}, steps={}, alpha={})", c.chosen, c.steps, c.alpha);
  }

 private:
  Budget budget_;
  std::optional<std::uint32_t> slots_;
};

}  // namespace

PolicyInfo bptt_optimal_policy() {
  return {"bptt-optimal",
          "Gruslys et al.'s dynamic program for backpropagation through time: which hidden and "
          "internal states to store in M slots for the least recomputation",
          {{"slots",
            "memory for stored states, in hidden-state sizes (0 or more), or auto: the most that "
            "fit the budget",
            "auto"},
           budget_param()},
          [](const Params& p) { return std::make_unique<BpttPolicy>(p); }};
}

}  // namespace memsim
