#pragma once
// Training across devices, data-parallel part: a workload's `parallel:` section turns the
// step a model generator emits (one device, the whole model) into the step of one rank of
// `dp`, with the communication PyTorch DDP, DeepSpeed ZeRO and FSDP put in it:
//
//   parallel:
//     dp: 8                        # data-parallel ranks
//     zero: 3                      # 0 DDP, 1 optimizer state sharded, 2 and gradients, 3 and parameters
//     bucket: 25MiB                # gradient bucket (DDP's bucket_cap_mb; ZeRO-1/2's reduce bucket)
//
// zero 0 (DDP): gradients are all-reduced in buckets as backward makes them, on the
//   communication stream; a bucket is a persistent `comm` buffer (gradient_as_bucket_view
//   false, PyTorch's default; `bucket_view: true` all-reduces the gradients in place).
// zero 1: master weights and optimizer state hold 1/dp of each parameter; each bucket of
//   gradients is reduce-scattered in place (the step reads this rank's slice of the full
//   gradients, which live until the step); after the step the weights are all-gathered.
// zero 2: as 1, but each bucket is reduce-scattered into this rank's shard, and the full
//   gradients die after it.
// zero 3 (FSDP's full shard): the weights are shards too; each unit (a transformer block,
//   `layers.3`; a residual block, `layer1.0`; else a top-level module) is all-gathered into
//   a `comm` buffer before its forward and again before its backward (`reshard_after_forward`
//   false keeps the forward's); with `prefetch` the next unit's gather is issued when the
//   current unit starts (ahead of the current unit's reduce-scatter on the communication
//   stream, as FSDP's pre-forward and pre-backward hooks issue it), without it when the
//   current unit ends; each unit's gradients are reduce-scattered after its backward.
// micro_batches m (or global_batch G: m = G / (batch x dp), rounded up): the forward and
//   backward run m times; from the second on, a parameter's gradient is made into a buffer of
//   its own and added into .grad (accumulate_grad); the reduction waits for the last
//   micro-batch (DDP's no_sync(), and FSDP's too: full gradients accumulate, then one
//   reduce-scatter), and ZeRO-3 gathers each unit again in every micro-batch.
// hsdp S (with zero 3, FSDP's hybrid shard): as zero 3 within groups of S data-parallel ranks
//   (gathers and reduce-scatters over "dp_shard"), each unit's gradient shard then
//   all-reduced over the dp / S groups ("dp_replica"), as FSDP does after its reduce-scatter.
// Every shard is ceil(bytes / dp): per-GPU model state for mixed-precision Adam (16 bytes per
// parameter) is 16P (DDP), 4P + 12P/N (ZeRO-1), 2P + 14P/N (ZeRO-2), 16P/N (ZeRO-3), 16P/S
// (HSDP).
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/workload/trace.h"

namespace memsim {

/// A pipeline's order of forward and backward micro-batches on each stage: GPipe (all
/// forwards, then all backwards), 1F1B (PipeDream-Flush: p - s - 1 warm-up forwards on stage
/// s, then one forward and one backward in turn) or Megatron's interleaved 1F1B over
/// virtual_stages model chunks per device.
enum class PipelineSchedule : std::uint8_t { gpipe, one_f_one_b, interleaved };
std::string_view to_string(PipelineSchedule s);

struct ParallelSettings {
  std::uint32_t dp = 1;
  /// Tensor parallelism (Megatron-LM): each rank holds 1/tp of every attention and MLP
  /// weight, column-split then row-split, with an all-reduce after each pair (the model
  /// generator emits them; see ModelBuilder::tp_copy). Ranks are numbered TP innermost:
  /// rank = tp_rank + tp x dp_rank.
  std::uint32_t tp = 1;
  /// Sequence parallelism (Korthikanti et al. 2022): with tp, the norms, dropouts and
  /// residuals run on 1/tp of the tokens, and each all-reduce becomes a reduce-scatter and
  /// an all-gather.
  bool sp = false;
  /// Megatron's --tp-comm-overlap (with sp): the forward's all-gathers and reduce-scatters
  /// overlap the GEMMs next to them (ModelBuilder::sp_gather, tensor_parallel.cpp).
  bool tp_comm_overlap = false;
  /// Expert parallelism: a mixture of experts' experts split over ep ranks of each
  /// data-parallel group (consecutive data-parallel ranks), tokens sent to their experts'
  /// ranks and back by all-to-all (Megatron's alltoall token dispatcher).
  std::uint32_t ep = 1;
  /// Context parallelism (Megatron's --context-parallel-size; TransformerEngine's ring
  /// attention over point-to-point exchanges): each of cp ranks holds 1/cp of every
  /// sequence (2 cp chunks, two per rank, so that a causal mask loads them evenly), the
  /// attention passes k and v around the cp ranks; the weights are replicated over them and
  /// their gradients reduced over dp x cp. Ranks: rank = tp_rank + tp x (cp_rank + cp x
  /// (dp_rank + dp x stage)).
  std::uint32_t cp = 1;
  /// Pipeline parallelism: the layers split into pp stages on different devices
  /// (pipeline.h), PP outermost: rank = tp_rank + tp x (dp_rank + dp x stage).
  std::uint32_t pp = 1;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  std::uint32_t virtual_stages = 1;  // model chunks per device (interleaved)
  /// Layers on the first and the last stage (0: the even share); the other stages share the
  /// rest evenly (Megatron's --decoder-first/last-pipeline-num-layers; Llama 3 405B puts one
  /// layer less on each end). One chunk per stage only.
  std::uint32_t first_stage_layers = 0, last_stage_layers = 0;
  /// Pipeline sends with tp > 1 and no sp: each TP rank sends 1/tp of the tensor and the
  /// receiving stage all-gathers it over its TP group (Megatron-LM's
  /// scatter_gather_tensors_in_pipeline; Narayanan et al. 2021, section 4.1).
  bool scatter_gather = false;
  /// Micro-batches after the first add their parameter gradients into .grad inside the
  /// backward op itself (Megatron's gradient_accumulation_fusion: the weight-gradient GEMM
  /// accumulates into main_grad) rather than making a gradient of their own and adding it
  /// (PyTorch's AccumulateGrad, the default).
  bool fused_accumulation = false;
  /// The global batch asked for (0: none): micro_batches is it over batch x dp, rounded up.
  std::int64_t global_batch = 0;
  int zero = 0;
  /// Gradient accumulation: the step is this many forward and backward passes of the
  /// workload's batch (a micro-batch), then one reduction and one optimizer step.
  std::uint32_t micro_batches = 1;
  std::uint64_t bucket_bytes = 25ull << 20;
  bool bucket_view = false;
  /// Megatron-LM's --DDP-impl local: every gradient in one contiguous buffer (no bucket memory
  /// of its own), reduced once after the last of them is made, not overlapped with the
  /// backward; false: buckets reduced as the backward fills them (PyTorch DDP, ZeRO).
  bool ddp_local = false;
  /// ZeRO-1/2 (Megatron's distributed optimizer, --overlap-param-gather): the updated weight
  /// shards are all-gathered before each bucket's first use in the forward, overlapping the
  /// forward, rather than after the optimizer step.
  bool overlap_param_gather = false;
  bool prefetch = true;
  bool reshard_after_forward = true;
  /// HSDP (FSDP's HYBRID_SHARD, zero 3): the model state sharded over groups of `hsdp`
  /// consecutive data-parallel ranks (a node), replicated over the dp / hsdp groups; each
  /// unit's gradients reduce-scattered within the group, then the shard all-reduced across
  /// the groups. 0: sharded over all dp ranks (FULL_SHARD).
  std::uint32_t hsdp = 0;
  bool symmetric = true;

  /// The groups of ranks that each hold a whole copy of the sharded state: dp / hsdp (1
  /// without HSDP).
  std::uint32_t dp_replicas() const { return hsdp > 0 ? dp / hsdp : 1; }

  /// The ranks that hold the same weights and reduce their gradients: dp x cp (Megatron's
  /// data-parallel group with context parallelism).
  std::uint32_t weight_replicas() const { return dp * cp; }
};

/// The keys of `parallel:` with their defaults: every parallel scheme's (sim/parallel/scheme.h),
/// in the registry's order, for `memsim list` and the checks.
std::vector<ParamSpec> parallel_param_specs();
/// Reads them; a bad value is an InputError located at the value. `batch` is the workload's
/// (micro-)batch, for `global_batch` (0: the model has none).
ParallelSettings read_parallel_settings(const Params& params, std::int64_t batch = 0);

/// An input error caused by a key of `parallel:` ("pp" for layers that do not split into
/// the stages): generate_workload locates it at the first of `keys` the section gives (its
/// line, or the --set that gave it), else at the section.
class ParallelKeyError : public InputError {
 public:
  ParallelKeyError(std::vector<std::string> keys, const std::string& message)
      : InputError(message), keys_(std::move(keys)) {}
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  std::vector<std::string> keys_;
};

/// Rank 0's step of `step` (a single-device step) under `settings`: every built-in parallel
/// scheme that transforms the step and applies, in order (apply_parallel_schemes, scheme.h; a
/// workload's `parallel:` section goes through that, with its keys). Throws InputError for a
/// step it cannot shard (no optimizer step to find the parameters by), a ParallelKeyError
/// where one key is the cause.
Trace parallelize(const Trace& step, const ParallelSettings& settings);

/// Every rank of a step simulated (parallel.symmetric false, no pipeline): rank 0's step
/// was copied onto each rank's device (combine_per_device, device k = rank k), its groups
/// rank 0's. Each op's group becomes its rank's instance of it (the Mesh's group around the
/// rank, named "tp@FIRST_RANK" as a pipeline's placement names them), and the trace's
/// groups those instances.
void place_rank_groups(Trace& placed);

/// About how many ops parallelize(step, settings) makes, every simulated rank's together:
/// each micro-batch's forward and backward, its gradients' accumulation, one optimizer step,
/// and ZeRO-3's gathers in each micro-batch, on one rank per pipeline (symmetric ranks) or on
/// all of them. Counted before anything is made, so that a product past the op limit is
/// refused at once (generate_workload).
double parallel_op_estimate(const Trace& step, const ParallelSettings& settings);

// ---- building blocks of parallelize(), shared with the pipeline (pipeline.cpp) ----

/// One block of a micro-batch schedule: the forward or the backward ops of model chunk
/// `chunk` (a virtual stage; 0 without interleaving) for micro-batch `mb`.
struct MicroBatchBlock {
  bool forward = true;
  std::uint32_t mb = 0;
  std::uint32_t chunk = 0;
};
/// `step` (one micro-batch) run as `order` says: each block's ops copied, micro-batch k > 0
/// with buffers of its own ("NAME@mbK") and its parameter gradients added into .grad
/// (accumulate_grad), then the optimizer steps once. `chunk_of` gives each op's chunk
/// (empty: all 0). A receive (kind recv) also waits for the op before its block: it is
/// posted when the schedule reaches it. `mb` gets each op's micro-batch.
/// `exchange_after_pairs` (Megatron-LM's interleaved schedule): a forward block followed by a
/// backward one run their computations back to back, and every step (such a pair, or a
/// block alone) ends with its blocks' sends and then the next step's receives, one
/// batch_isend_irecv; otherwise each block is its receives, its ops and its sends.
/// `name_room`: the characters a later pass will put before each name (the pipeline's
/// "stage3:"), reserved with the names made here so that adding them moves, not reallocates.
Trace run_micro_batches(const Trace& step, const std::vector<MicroBatchBlock>& order, std::uint32_t m,
                        std::vector<std::uint32_t>& mb, const std::vector<std::uint32_t>& chunk_of,
                        bool fused_accumulation = false, bool exchange_after_pairs = false,
                        std::size_t name_room = 0);
/// The data-parallel part of parallelize(): DDP buckets or ZeRO over process group "dp" of
/// `step` (taken, not copied), whose ops' micro-batches are `mb`.
Trace shard_over_dp(Trace step, const ParallelSettings& settings, std::vector<std::uint32_t> mb);
/// "tp 8, dp 2, zero 1, 8 micro-batches": the layout in words.
std::string parallel_summary(const ParallelSettings& s);

}  // namespace memsim
