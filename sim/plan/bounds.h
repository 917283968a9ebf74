#pragma once
// Lower bounds on a layout's step time and per-GPU memory, from the model's own ops and
// buffers, worked out without simulating it (docs/plan.md, "The bounds"). Both are true
// lower bounds of what `memsim run` reports for the layout under policy none:
//
//   time   >= micro-batches x max over streams of (the durations of one micro-batch's forward
//             and backward compute ops of this TP rank, as the cost model times them) / pp
//   and the host's time to issue them (`host_overhead:`; the engine's host clock):
//          >= per-step host time + micro-batches x one micro-batch's per-op host times / pp
//   and, with pp > 1, the pipeline's fill: the last stage starts once the first micro-batch's
//   forward has passed the stages before it, then runs its own blocks for every micro-batch:
//          >= layers / pp x (micro-batches x (block forward + backward on one stream)
//                            + (pp - 1) / virtual_stages x block forward GEMMs)
//   memory >= (the bytes this rank keeps for the whole step under its TP, DP and ZeRO stage:
//             weights, master weights, optimizer state, DDP's gradient buckets and whatever
//             else is resident when the step starts) / pp                  (0 with offload)
//             + min(micro-batches, pp) x layers / pp x the activations one block keeps from
//               its forward for its own backward (0 with offload)
//             + the memory the device reserves for its runtime (reserved: in the platform)
//
// Each stream runs its ops one after another and no op is shorter than its cost-model
// duration; the pipeline's busiest stage holds at least its share of either sum. The first
// stage runs min(micro-batches, pp) forwards of all its blocks before its first backward (1F1B
// and the interleaved schedule alike, as Megatron orders them), and each block's activations
// from one forward stay allocated until that micro-batch's backward reads them. Everything
// left out (communication, the bubble, the optimizer step, activations) only adds to the
// real figures. The sums come from generating the model: one micro-batch on one data-
// parallel rank for the time (per TP, SP, recomputation and micro-batch size), a step
// sharded over the data-parallel ranks for the memory (per TP, ZeRO stage and DP).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sim/inputs/inputs.h"
#include "sim/plan/layout.h"
#include "sim/platform/platform.h"

namespace memsim {

/// What the plan needs to know of the model and the platform, read once.
struct PlanFacts {
  std::string workload_name;         // the trace's name ("gpt")
  std::uint32_t layers = 0;          // numbered layers (transformer blocks)
  std::int64_t seq_len = 0;          // tokens per sample
  bool materialized = false;         // attention not FlashAttention's (selective recompute applies)
  DType dtype = DType::fp32;         // the dtype most forward FLOPs are in
  double peak_flops = 0;             // the first GPU's peak for that dtype
  std::string tier;                  // the first GPU's compute tier
  std::uint64_t capacity_bytes = 0;
  std::uint32_t platform_gpus = 0, gpus_per_node = 0;
  bool has_offload_tier = false;
};

class PlanBounds {
 public:
  /// `overrides`: the user's --set values and --seq-len, under every layout's own.
  PlanBounds(std::string platform, std::string workload, std::vector<Override> overrides);

  const PlanFacts& facts() const { return facts_; }
  const PlatformSpec& platform() const { return platform_; }

  /// The bounds of `layout`; nullopt when the model refuses the layout (a TP that does not
  /// divide its heads, SP over tokens that do not split), with the model's message in `why`.
  std::optional<double> time_s(const Layout& layout, std::string* why);
  std::optional<std::uint64_t> memory_bytes(const Layout& layout, std::string* why);
  /// The longest path of the step `memsim run` builds for `layout` at `global_batch`
  /// (path_bound.h): tighter than time_s, at the cost of building the step; nullopt with
  /// offload (the policy rewrites the step) or when it cannot be worked out. Safe to call
  /// from several threads at once.
  std::optional<double> path_time_s(const Layout& layout, std::int64_t global_batch) const;

 private:
  struct Entry {
    double value = 0;  // time: the busiest stream's forward and backward; memory: the bytes
    // time, per transformer block (the least of any block): each stream's forward and
    // backward, and the forward's GEMMs, which follow one another on the block's data path.
    std::vector<double> block_forward, block_backward;
    double block_chain = 0;
    double host = 0;  // the host's time to issue one micro-batch's forward and backward ops
    /// The least, over the transformer blocks, of the bytes a block's forward makes that its
    /// own backward reads (one micro-batch): allocated from the forward until the backward.
    double block_saved = 0;
    std::string error;
  };
  Entry generate(const std::vector<std::string>& sets, bool time);
  /// The time entry of `layout` (tp, sp, recomputation, micro-batch), generated once.
  const Entry& time_entry(const Layout& layout);

  std::string platform_arg_, workload_arg_;
  std::vector<Override> overrides_;
  PlatformSpec platform_;
  PlanFacts facts_;
  std::map<std::tuple<std::uint32_t, bool, int, std::uint32_t>, Entry> time_;    // tp, sp, recompute, mb
  std::map<std::tuple<std::uint32_t, int, std::uint32_t, std::uint32_t>, Entry> memory_;  // tp, zero, dp, hsdp
};

}  // namespace memsim
