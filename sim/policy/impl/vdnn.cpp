// vDNN (Rhu et al. 2016): during forward, offload each layer's input feature map to host
// memory once the layers that read it have run; during backward, prefetch it one layer ahead
// of the layer that needs it, overlapping the copy with that layer's compute.
//   all   offload every feature map the backward pass needs again
//   conv  only the inputs of convolutions (cheap layers' inputs stay)
//   dyn   the least offloading (none, then conv, then all) whose estimated peak fits
// A prefetch that would overflow the compute tier while the op before its reader runs is
// issued at its reader instead (on demand).
#include <fmt/format.h>

#include "sim/policy/impl/swap_common.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

enum class Mode { none, conv, all };

const char* name_of(Mode m) { return m == Mode::all ? "all" : m == Mode::conv ? "conv" : "none"; }

// `caps`: the compute tiers' capacities by device (empty: no limit). A prefetch issued one op
// ahead holds its bytes while that op runs; where that would overflow the tier, the prefetch
// waits until the op that reads it (an on-demand copy, whose time shows as stall).
Plan vdnn_plan(const Trace& trace, const Liveness& liveness, const std::vector<SwapTiers>& tiers,
               Mode mode, const std::vector<std::uint64_t>& caps = {},
               std::size_t* on_demand = nullptr) {
  const auto uses = buffer_uses(trace);
  const auto device = buffer_devices(trace);
  std::vector<std::uint8_t> conv_input(trace.buffers.size(), 0);
  for (const Op& op : trace.ops)
    if (op.phase == Phase::forward && op.kind == "conv2d")
      for (BufferId b : op.inputs) conv_input[b] = 1;

  // The later-phase ops of each (device, stream), in order: a prefetch goes one op ahead.
  std::vector<OpId> previous_later(trace.ops.size(), kNoOp);
  {
    std::vector<std::vector<OpId>> last_by_stream;
    for (const Op& op : trace.ops) {
      if (op.phase == Phase::forward) continue;
      if (last_by_stream.size() <= op.device) last_by_stream.resize(op.device + 1);
      auto& per = last_by_stream[op.device];
      if (per.size() <= op.stream) per.resize(op.stream + 1, kNoOp);
      previous_later[op.id] = per[op.stream];
      per[op.stream] = op.id;
    }
  }
  std::vector<std::vector<BufferId>> out_after(trace.ops.size()), in_before(trace.ops.size());
  std::vector<OpId> consumer(trace.buffers.size(), kNoOp);  // a prefetch's reader
  if (mode != Mode::none) {
    for (const Buffer& b : trace.buffers) {
      const BufferUses& u = uses[b.id];
      if (b.persistent || u.last_forward == kNoOp || u.first_later == kNoOp) continue;
      if (b.category != Category::activation && b.category != Category::input) continue;
      if (mode == Mode::conv && !conv_input[b.id]) continue;
      const SwapTiers& st = tiers[device[b.id]];
      if (!st.offload) continue;
      out_after[u.last_forward].push_back(b.id);
      // One later-phase op ahead, but never before the swap-out: where the phases
      // interleave (an imported trace), that op may come before the buffer's forward use.
      OpId ahead = previous_later[u.first_later];
      if (ahead != kNoOp && ahead <= u.last_forward) ahead = kNoOp;
      in_before[ahead == kNoOp ? u.first_later : ahead].push_back(b.id);
      consumer[b.id] = u.first_later;
    }
  }
  auto build = [&] {
    Plan plan;
    plan.steps.reserve(trace.ops.size() * 2 + trace.buffers.size());
    for (const Op& op : trace.ops) {
      for (BufferId b : in_before[op.id])
        plan.steps.push_back({StepKind::swap_in, b, tiers[device[b]].compute});
      plan.steps.push_back({StepKind::compute, op.id, 0});
      for (BufferId b : out_after[op.id])
        plan.steps.push_back({StepKind::swap_out, b, *tiers[device[b]].offload});
      for (BufferId b : liveness.dies_after[op.id]) plan.steps.push_back({StepKind::free, b, 0});
    }
    return plan;
  };
  Plan plan = build();
  if (caps.empty()) return plan;
  // The bytes each op runs with under this plan; an op that overflows its tier lets its
  // prefetches for the next op wait for that op. Moving them lowers only this op's bytes.
  const std::vector<std::uint64_t> at = bytes_at_ops(trace, plan, tiers.size());
  std::size_t moved = 0;
  for (const Op& op : trace.ops) {
    if (op.device >= caps.size() || at[op.id] <= caps[op.device]) continue;
    auto& list = in_before[op.id];
    for (auto it = list.begin(); it != list.end();) {
      if (consumer[*it] != kNoOp && consumer[*it] != op.id) {
        in_before[consumer[*it]].push_back(*it);
        it = list.erase(it);
        ++moved;
      } else {
        ++it;
      }
    }
  }
  if (on_demand) *on_demand = moved;
  return moved ? build() : plan;
}

class VdnnPolicy final : public Policy {
 public:
  VdnnPolicy(std::string mode, Budget budget) : mode_(std::move(mode)), budget_(budget) {}

  PlanResult plan(const PlanningContext& ctx) const override {
    const Trace& trace = ctx.trace;
    const auto tiers = swap_tiers(ctx.platform, trace);
    std::vector<std::uint64_t> caps;
    for (const SwapTiers& t : tiers) caps.push_back(ctx.tier_caps[t.compute]);
    std::size_t on_demand = 0;
    if (mode_ != "dyn") {
      const Mode chosen = mode_ == "all" ? Mode::all : Mode::conv;
      Plan p = vdnn_plan(trace, ctx.liveness, tiers, chosen, caps, &on_demand);
      return {std::move(p), label(chosen, on_demand), {}, {}, {}};
    }
    // vDNN-dyn: the least offloading whose estimated peak fits every device.
    for (Mode m : {Mode::none, Mode::conv, Mode::all}) {
      Plan p = vdnn_plan(trace, ctx.liveness, tiers, m, caps, &on_demand);
      const auto peaks = plan_peaks(trace, p, tiers.size());
      bool fits = true;
      for (std::size_t d = 0; d < tiers.size(); ++d) fits &= peaks[d] <= caps[d];
      if (fits || m == Mode::all) return {std::move(p), label(m, on_demand), {}, {}, {}};
    }
    return {};
  }
  std::optional<Budget> budget() const override { return budget_; }
  std::string label(Mode chosen, std::size_t on_demand) const {
    const std::string waits =
        on_demand ? fmt::format(", {} prefetches wait for their reader", on_demand) : "";
    if (mode_ == "dyn") return fmt::format("vdnn(dyn: {}{})", name_of(chosen), waits);
    return fmt::format("vdnn({}{})", mode_, waits);
  }

 private:
  std::string mode_;
  Budget budget_;
};

}  // namespace

PolicyInfo vdnn_policy() {
  return {"vdnn",
          "vDNN (Rhu et al. 2016): offload feature maps to host after their forward use, "
          "prefetch each one layer ahead in backward",
          {{"mode", "all (every feature map), conv (inputs of convolutions), dyn (least that fits)",
            "all"},
           budget_param()},
          [](const Params& p) {
            return std::make_unique<VdnnPolicy>(p.get("mode").as_choice({"all", "conv", "dyn"}),
                                                read_budget(p));
          }};
}

}  // namespace memsim
