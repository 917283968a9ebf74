#pragma once
// Pipeline parallelism (GPipe, PipeDream-Flush's 1F1B, Megatron-LM's interleaved 1F1B): the
// model's numbered layers (transformer blocks "model.layers.3", residual blocks
// "layer1.0") split evenly into pp x virtual_stages chunks, chunk c on stage c mod pp; what
// comes before the first layer (embeddings) goes with the first chunk, what comes after
// (final norm, head, loss) with the last. A tensor one chunk makes and a chunk on another
// stage reads (the residual stream forward, its gradient backward) is sent point to point
// (a send on the producer, a recv on the reader, over a process group of the two stages'
// devices), each after its last write; weights and inputs that several stages use are
// held by each (the tied embedding of GPT-2 on the first and the last stage, each with its
// own optimizer step, as Megatron keeps it). A parameter gradient that several stages add
// to (the tied embedding's: the head's part on the last stage, the embedding's on the
// first) is each stage's own, accumulated over its micro-batches, and all-reduced once per
// step over those stages (Megatron's embedding group) before their optimizer steps, after
// the data-parallel reduction.
//
// Each stage then runs its schedule's order of forward and backward micro-batches
// (pipeline_order), each micro-batch with buffers of its own, its receives posted when the
// schedule reaches them, and data parallelism (parallelize()'s DDP or ZeRO) over the stage's
// own data-parallel group. The result is placed: Op::device is the rank, rank = tp_rank +
// tp x (dp_rank + dp x stage). With symmetric ranks one rank per stage is simulated (the
// first of its TP and DP groups), its peers' traffic still on the links; otherwise every
// rank.
#include <cstdint>
#include <vector>

#include "sim/workload/parallel.h"
#include "sim/workload/trace.h"

namespace memsim {

/// The blocks stage `stage` of `stages` runs, in order, for `m` micro-batches over `chunks`
/// model chunks per stage (1 unless interleaved). Throws InputError when the schedule cannot
/// run them (interleaving needs m to be a multiple of the stages).
std::vector<MicroBatchBlock> pipeline_order(PipelineSchedule schedule, std::uint32_t stages, std::uint32_t stage,
                                            std::uint32_t m, std::uint32_t chunks);

/// Every simulated rank's step of `step` (one micro-batch of this TP rank's model) under
/// `settings` with settings.pp > 1, placed on its rank (ParallelLayout::simulated).
Trace pipeline(const Trace& step, const ParallelSettings& settings);

}  // namespace memsim
