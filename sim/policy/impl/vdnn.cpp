// vDNN (Rhu et al. 2016): during forward, offload each layer's input feature map to host
// memory once the layers that read it have run; during backward, prefetch it one layer ahead
// of the layer that needs it, overlapping the copy with that layer's compute.
//   all   offload every feature map the backward pass needs again
//   conv  only the inputs of convolutions (cheap layers' inputs stay)
//   dyn   the least offloading (none, then conv, then all) whose estimated peak fits
#include <fmt/format.h>

#include "sim/policy/impl/swap_common.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

enum class Mode { none, conv, all };

const char* name_of(Mode m) { return m == Mode::all ? "all" : m == Mode::conv ? "conv" : "none"; }

Plan vdnn_plan(const Trace& trace, const Liveness& liveness, const std::vector<SwapTiers>& tiers,
               Mode mode) {
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
  if (mode != Mode::none) {
    for (const Buffer& b : trace.buffers) {
      const BufferUses& u = uses[b.id];
      if (b.persistent || u.last_forward == kNoOp || u.first_later == kNoOp) continue;
      if (b.category != Category::activation && b.category != Category::input) continue;
      if (mode == Mode::conv && !conv_input[b.id]) continue;
      const SwapTiers& st = tiers[device[b.id]];
      if (!st.offload) continue;
      out_after[u.last_forward].push_back(b.id);
      const OpId ahead = previous_later[u.first_later];
      in_before[ahead == kNoOp ? u.first_later : ahead].push_back(b.id);
    }
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

class VdnnPolicy final : public Policy {
 public:
  VdnnPolicy(std::string mode, Budget budget) : mode_(std::move(mode)), budget_(budget) {}

  Plan plan(const Trace& trace, const Liveness& liveness, const PlatformSpec& platform) const override {
    const auto tiers = swap_tiers(platform);
    if (mode_ != "dyn") {
      chosen_ = mode_ == "all" ? Mode::all : Mode::conv;
      return vdnn_plan(trace, liveness, tiers, chosen_);
    }
    // vDNN-dyn: the least offloading whose estimated peak fits every device.
    for (Mode m : {Mode::none, Mode::conv, Mode::all}) {
      chosen_ = m;
      Plan p = vdnn_plan(trace, liveness, tiers, m);
      const auto peaks = plan_peaks(trace, p, tiers.size());
      bool fits = true;
      for (std::size_t d = 0; d < tiers.size(); ++d)
        fits &= peaks[d] <= platform.tiers[tiers[d].compute].capacity_bytes;
      if (fits || m == Mode::all) return p;
    }
    return {};
  }
  std::optional<Budget> budget() const override { return budget_; }
  std::string label() const override {
    if (mode_ == "dyn") return fmt::format("vdnn(dyn: {})", name_of(chosen_));
    return fmt::format("vdnn({})", mode_);
  }

 private:
  std::string mode_;
  Budget budget_;
  mutable Mode chosen_ = Mode::all;
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
