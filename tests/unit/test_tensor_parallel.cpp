// Tensor and sequence parallelism in the transformer generators: what one rank of tp saves
// against Korthikanti et al. 2022 (Reducing Activation Recomputation in Large Transformer
// Models, table 2), the communication Megatron-LM puts in a layer, the split weights, and
// located errors for splits that do not divide.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/workload/trace.h"
#include "sim/workload/workload.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

// Two GPT-3 175B layers (h 12288, a 96) at s 2048, b 1, fp16 with dropout, blocks only.
const std::string kGpt3 =
    "model: gpt\nlayers: 2\nhidden: 12288\nheads: 96\nseq_len: 2048\nmax_positions: 2048\n"
    "blocks_only: true\nbatch: 1\ndtype: fp16\nmixed_precision: true\noptimizer: adam\n"
    "dropout: 0.1\n";
constexpr double s = 2048, b = 1, h = 12288, a = 96, t = 8, L = 2;
// Besides Korthikanti's terms the two LayerNorms of a layer keep an fp32 mean and rstd per
// token (16 sb bytes; 16 sb / t with sequence parallelism), which the paper leaves out.
constexpr double kNormStats = 16 * s * b;

double relative(double got, double want) { return std::abs(got - want) / want; }

// Each op of `phase` that reads an output of `op` waits for `waited`; how many there are.
std::size_t readers_waiting(const Trace& tr, const Op& op, OpId waited, Phase phase) {
  std::size_t n = 0;
  for (const Op& reader : tr.ops)
    for (BufferId in : reader.inputs)
      if (reader.phase == phase && std::find(op.outputs.begin(), op.outputs.end(), in) != op.outputs.end()) {
        EXPECT_NE(std::find(reader.waits_for.begin(), reader.waits_for.end(), waited), reader.waits_for.end())
            << reader.name;
        ++n;
      }
  return n;
}

std::map<std::string, int> comm_ops(const Trace& tr, Phase phase) {
  std::map<std::string, int> n;
  for (const Op& op : tr.ops)
    if (op.phase == phase && !op.group.empty()) ++n[op.kind];
  return n;
}

}  // namespace

TEST(TensorParallel, ARankSavesKorthikantisActivationsWithTensorParallelism) {
  // Tensor parallelism alone: sbh (10 + 24/t) + 5 as^2 b / t per layer. The 10 sbh are
  // replicated on every rank: the two LayerNorm inputs (4), the inputs of the QKV and first
  // MLP projections (2 + 2) and the two dropout masks after the sublayers (1 + 1).
  const Trace one = workload(kGpt3);
  EXPECT_EQ(static_cast<double>(saved_activation_bytes(one)), L * (s * b * h * (34 + 5 * a * s / h) + kNormStats));
  const Trace tr = workload(kGpt3 + "parallel:\n  tp: 8\n");
  const double korthikanti = L * (s * b * h * (10 + 24 / t) + 5 * a * s * s * b / t);
  const auto saved = static_cast<double>(saved_activation_bytes(tr));
  EXPECT_EQ(saved, korthikanti + L * kNormStats);
  EXPECT_LT(relative(saved, korthikanti), 0.01);
  // Per layer forward: an all-reduce after the attention and one after the MLP (g); the
  // backward all-reduces the input gradients of the two column-parallel pairs (f).
  EXPECT_EQ(comm_ops(tr, Phase::forward), (std::map<std::string, int>{{"all_reduce", 4}}));
  EXPECT_EQ(comm_ops(tr, Phase::backward), (std::map<std::string, int>{{"all_reduce", 4}}));
  const Op& g = op_named(tr, "transformer.h.0.attn.c_proj.tp_reduce");
  EXPECT_EQ(g.message_bytes, static_cast<std::uint64_t>(s * b * h * 2));
  EXPECT_EQ(g.group, "tp");
  ASSERT_NE(tr.find_group("tp"), nullptr);
  EXPECT_EQ(tr.find_group("tp")->ranks.size(), 8u);
  EXPECT_EQ(tr.parallel.ranks, 8u);
}

TEST(TensorParallel, SequenceParallelismDividesEverythingByT) {
  // sbh (34/t + 5as/(ht)): the norms, dropouts and residuals run on s/t tokens, and each
  // column-parallel linear keeps its token shard, all-gathering it again for its backward.
  const Trace tr = workload(kGpt3 + "parallel:\n  tp: 8\n  sp: true\n");
  const double korthikanti = L * (s * b * h * 34 / t + 5 * a * s * s * b / t);
  const auto saved = static_cast<double>(saved_activation_bytes(tr));
  EXPECT_EQ(saved, korthikanti + L * kNormStats / t);
  EXPECT_LT(relative(saved, korthikanti), 0.01);
  // g becomes a reduce-scatter and f an all-gather; the backward mirrors them, and each
  // column-parallel pair all-gathers its input once more.
  EXPECT_EQ(comm_ops(tr, Phase::forward),
            (std::map<std::string, int>{{"all_gather", 4}, {"reduce_scatter", 4}}));
  EXPECT_EQ(comm_ops(tr, Phase::backward),
            (std::map<std::string, int>{{"all_gather", 8}, {"reduce_scatter", 4}}));
  const Op& gather = op_named(tr, "transformer.h.1.mlp.sp_gather");
  EXPECT_EQ(gather.message_bytes, static_cast<std::uint64_t>(s * b * h * 2));
  EXPECT_EQ(buffer_named(tr, "transformer.h.1.ln_2.out").bytes, static_cast<std::uint64_t>(s * b * h * 2 / t));
}

TEST(TensorParallel, OverlappedCommunicationSplitsTheForwardCollectivesAroundTheirGemms) {
  // Megatron's --tp-comm-overlap: each forward all-gather is a head of 1/t that makes the
  // gathered tensor and the rest in flight beside the GEMMs reading it (what reads their
  // outputs waits for it); each forward reduce-scatter is (t - 1)/t issued when its GEMM
  // starts and a tail of 1/t that reads the GEMM's output. The backward's are split the same
  // way (below). The bytes sent and the buffers are those of sequence parallelism without it.
  const Trace plain = workload(kGpt3 + "parallel:\n  tp: 8\n  sp: true\n");
  const Trace tr = workload(kGpt3 + "parallel:\n  tp: 8\n  sp: true\n  tp_comm_overlap: true\n");
  ASSERT_EQ(tr.buffers.size(), plain.buffers.size());
  for (std::size_t i = 0; i < tr.buffers.size(); ++i) EXPECT_EQ(tr.buffers[i].bytes, plain.buffers[i].bytes);
  EXPECT_EQ(comm_ops(tr, Phase::forward), (std::map<std::string, int>{{"all_gather", 8}, {"reduce_scatter", 8}}));
  // Backward, per layer: the two row-parallel output gradients all-gathered (head and rest),
  // the two saved shards gathered again, the two column-parallel input gradients
  // reduce-scattered (rest and tail).
  const std::map<std::string, int> plain_backward = comm_ops(plain, Phase::backward);
  EXPECT_EQ(comm_ops(tr, Phase::backward),
            (std::map<std::string, int>{{"all_gather", plain_backward.at("all_gather") + 4},
                                        {"reduce_scatter", plain_backward.at("reduce_scatter") + 4}}));
  std::map<std::string, std::uint64_t> bytes, plain_bytes;
  for (const Op& op : tr.ops)
    if (!op.group.empty()) bytes[std::string(op.kind)] += op.message_bytes;
  for (const Op& op : plain.ops)
    if (!op.group.empty()) plain_bytes[std::string(op.kind)] += op.message_bytes;
  EXPECT_EQ(bytes, plain_bytes);
  const std::uint64_t whole = static_cast<std::uint64_t>(s * b * h * 2);
  const Op& head = op_named(tr, "transformer.h.1.mlp.sp_gather");
  const Op& rest = op_named(tr, "transformer.h.1.mlp.sp_gather.overlapped");
  EXPECT_EQ(head.message_bytes, whole / 8);
  EXPECT_EQ(rest.message_bytes, whole - whole / 8);
  EXPECT_TRUE(rest.inputs.empty() && rest.outputs.empty() && rest.updates.empty());
  // The MLP's first GEMM reads the gathered tensor without waiting for the rest; the op
  // reading its output waits for it.
  std::size_t gemm = 0, gated = 0;
  for (const Op& op : tr.ops) {
    if (op.phase != Phase::forward || !op.group.empty()) continue;
    const bool reads_gathered = std::find(op.inputs.begin(), op.inputs.end(), head.outputs[0]) != op.inputs.end();
    if (reads_gathered) {
      ++gemm;
      EXPECT_TRUE(op.waits_for.empty()) << op.name;
      gated += readers_waiting(tr, op, rest.id, Phase::forward);
    }
  }
  EXPECT_GE(gemm, 1u);
  EXPECT_GE(gated, 1u);
  const Op& scatter_head = op_named(tr, "transformer.h.1.mlp.c_proj.sp_scatter.overlapped");
  const Op& scatter_tail = op_named(tr, "transformer.h.1.mlp.c_proj.sp_scatter");
  EXPECT_EQ(scatter_head.message_bytes + scatter_tail.message_bytes, whole);
  EXPECT_EQ(scatter_tail.message_bytes, whole / 8);
  ASSERT_EQ(scatter_head.waits_for.size(), 1u);
  // It waits for the op before the GEMM that makes the tail's input, not for that GEMM.
  const OpId gemm_out = tr.buffers[scatter_tail.inputs[0]].producer;
  EXPECT_LT(scatter_head.waits_for[0], gemm_out);
  // The backward: the MLP's second GEMM reads the head of its output gradient's all-gather;
  // what reads that GEMM's outputs in the backward waits for the rest.
  const Op& grad_head = op_named(tr, "transformer.h.1.mlp.c_proj.sp_scatter.backward");
  const Op& grad_rest = op_named(tr, "transformer.h.1.mlp.c_proj.sp_scatter.backward.overlapped");
  EXPECT_EQ(grad_head.message_bytes, whole / 8);
  EXPECT_EQ(grad_rest.message_bytes, whole - whole / 8);
  const Op& dgrad = op_named(tr, "transformer.h.1.mlp.c_proj.backward");
  EXPECT_NE(std::find(dgrad.inputs.begin(), dgrad.inputs.end(), grad_head.outputs[0]), dgrad.inputs.end());
  EXPECT_EQ(std::find(dgrad.waits_for.begin(), dgrad.waits_for.end(), grad_rest.id), dgrad.waits_for.end());
  EXPECT_GE(readers_waiting(tr, dgrad, grad_rest.id, Phase::backward), 1u);
  // The first MLP GEMM's input gradient: (t - 1)/t issued when the GEMM starts, a tail of 1/t
  // reading its output.
  const Op& rs_rest = op_named(tr, "transformer.h.1.mlp.sp_gather.backward.overlapped");
  const Op& rs_tail = op_named(tr, "transformer.h.1.mlp.sp_gather.backward");
  EXPECT_EQ(rs_rest.message_bytes + rs_tail.message_bytes, whole);
  EXPECT_EQ(rs_tail.message_bytes, whole / 8);
  ASSERT_EQ(rs_rest.waits_for.size(), 1u);
  EXPECT_LT(rs_rest.waits_for[0], tr.buffers[rs_tail.inputs[0]].producer);
  EXPECT_EQ(tr.ops[tr.buffers[rs_tail.inputs[0]].producer].name, "transformer.h.1.mlp.c_fc.backward");
  EXPECT_NE(workload_error(kGpt3 + "parallel:\n  tp: 8\n  tp_comm_overlap: true\n")
                .find("parallel.tp_comm_overlap: overlaps the all-gathers and reduce-scatters of sequence parallelism"),
            std::string::npos);
}

TEST(TensorParallel, SelectiveRecomputeDropsTheAttentionsQuadraticTerm) {
  // Selective recompute keeps none of the seq x seq tensors: sbh (10 + 24/t) with tensor
  // parallelism, 34 sbh / t with sequence parallelism too.
  const std::string selective = kGpt3 + "attention_impl: selective\n";
  const Trace tp = workload(selective + "parallel:\n  tp: 8\n");
  const double tp_formula = L * s * b * h * (10 + 24 / t);
  EXPECT_EQ(static_cast<double>(saved_activation_bytes(tp)), tp_formula + L * kNormStats);
  EXPECT_LT(relative(static_cast<double>(saved_activation_bytes(tp)), tp_formula), 0.01);

  const Trace sp = workload(selective + "parallel:\n  tp: 8\n  sp: true\n");
  const double sp_formula = L * s * b * h * 34 / t;
  EXPECT_EQ(static_cast<double>(saved_activation_bytes(sp)), sp_formula + L * kNormStats / t);
  EXPECT_LT(relative(static_cast<double>(saved_activation_bytes(sp)), sp_formula), 0.01);

  // The backward runs the core again: q k^T, the softmax and the dropout, before their
  // backward ops, and the FLOPs of one more q k^T.
  EXPECT_EQ(op_named(sp, "transformer.h.0.attn.recompute.qk").phase, Phase::backward);
  EXPECT_EQ(op_named(sp, "transformer.h.0.attn.recompute.qk").flops,
            op_named(sp, "transformer.h.0.attn.qk").flops);
  const Trace one = workload(kGpt3 + "attention_impl: selective\n");
  EXPECT_EQ(static_cast<double>(saved_activation_bytes(one)), L * (34 * s * b * h + kNormStats));
}

TEST(TensorParallel, EachRankHoldsItsShareOfTheWeights) {
  // Llama 7B's shapes on 8 ranks: q, k, v, gate and up split by output features, o and down
  // by input features; the vocabulary padded to a multiple of 128 x 8 and split.
  const std::string llama =
      "model: llama\nlayers: 2\nseq_len: 512\nbatch: 1\ndtype: bf16\nmixed_precision: true\n"
      "optimizer: adamw\nattention_impl: fused\n";
  const Trace one = workload(llama);
  const Trace tp = workload(llama + "parallel:\n  tp: 8\n");
  for (const char* w : {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight",
                        "model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.down_proj.weight"})
    EXPECT_EQ(buffer_named(tp, w).bytes * 8, buffer_named(one, w).bytes) << w;
  // Norms are replicated.
  EXPECT_EQ(buffer_named(tp, "model.layers.0.input_layernorm.weight").bytes,
            buffer_named(one, "model.layers.0.input_layernorm.weight").bytes);
  // 32000 rows padded to 32768, 4096 per rank.
  EXPECT_EQ(buffer_named(tp, "model.embed_tokens.weight").bytes, 4096u * 4096 * 2);
  EXPECT_EQ(buffer_named(tp, "lm_head.weight").bytes, 4096u * 4096 * 2);
  EXPECT_LT(tp.parameters * 7, one.parameters);
}

TEST(TensorParallel, SplitsThatDoNotDivideAreLocatedErrors) {
  const std::string e = workload_error(kGpt3 + "parallel:\n  tp: 7\n");
  EXPECT_NE(e.find("w.yaml"), std::string::npos) << e;
  EXPECT_NE(e.find("tp"), std::string::npos) << e;
  EXPECT_NE(e.find("a divisor of the 96 attention heads"), std::string::npos) << e;
  EXPECT_NE(workload_error(kGpt3 + "parallel:\n  sp: true\n").find("sequence parallelism needs tp > 1"),
            std::string::npos);
  EXPECT_EQ(workload_error("model: resnet\nparallel:\n  tp: 2\n"),
            "w.yaml:3:7: parallel.tp: model resnet50 does not split over tensor-parallel ranks; the transformers "
            "(bert, gpt2, gpt, llama) do");
}

TEST(TensorParallel, ALlamaLayerSavesMoreThanMegatronsFormulaByItsSwiGluAndLessByItsMissingDropout) {
  // Megatron-LM's theoretical memory report counts sbh (18 + 4 f/h) / t per layer (sequence
  // parallelism and selective recompute; a GELU MLP with two dropouts). A Llama layer saves
  // sbh (16 + 8 f/h) / t: no dropout masks (-2), and SwiGLU keeps four f-wide tensors (the
  // gate and up outputs, SiLU's output, the product) where GELU keeps two; the k/v heads
  // are repeated to the query's before the recomputed core, so Q, K, V are 6 sbh / t as in
  // the formula. Besides: the two RMSNorms' fp32 rstd, 8 sb / t.
  const std::string spec =
      "model: llama\nhidden: 8192\nheads: 64\nnum_kv_heads: 8\nintermediate: 28672\nvocab: 128256\n"
      "seq_len: 8192\nbatch: 1\nattention_impl: selective\ndropout: 0\ndtype: bf16\nmixed_precision: true\n"
      "optimizer: adamw\nparallel:\n  tp: 8\n  sp: true\n";
  const double layer = static_cast<double>(saved_activation_bytes(workload(spec + "layers: 2\n"))) -
                       static_cast<double>(saved_activation_bytes(workload(spec + "layers: 1\n")));
  const double sbh = 8192.0 * 8192, f_h = 28672.0 / 8192;
  EXPECT_EQ(layer, sbh * (16 + 8 * f_h) / 8 + 8 * 8192.0 / 8);
  const double megatron = sbh * (18 + 4 * f_h) / 8;
  EXPECT_NEAR(layer / megatron, (16 + 8 * f_h) / (18 + 4 * f_h), 1e-4);  // 44 / 32
}

TEST(TensorParallel, FullRecomputeKeepsOnlyEachLayersInput) {
  // Korthikanti's table 2, full recompute: 2 sbh per layer with tensor parallelism alone,
  // 2 sbh / t with sequence parallelism; the backward runs each layer's forward again first.
  const std::string full = kGpt3 + "recompute: full\n";
  const Trace tp = workload(full + "parallel:\n  tp: 8\n");
  EXPECT_EQ(static_cast<double>(saved_activation_bytes(tp)), L * 2 * s * b * h);
  const Trace sp = workload(full + "parallel:\n  tp: 8\n  sp: true\n");
  EXPECT_EQ(static_cast<double>(saved_activation_bytes(sp)), L * 2 * s * b * h / t);
  const Op& again = op_named(sp, "transformer.h.0.attn.qk@recompute");
  EXPECT_EQ(again.phase, Phase::backward);
  EXPECT_EQ(again.flops, op_named(sp, "transformer.h.0.attn.qk").flops);
  // The remade forward comes before the layer's first backward op and feeds it.
  const Op& first_backward = op_named(sp, "transformer.h.1.mlp.c_proj.backward");
  EXPECT_LT(op_named(sp, "transformer.h.1.mlp.c_fc@recompute").id, first_backward.id);
  bool remade = false;
  for (BufferId in : first_backward.inputs) {
    EXPECT_NE(sp.buffers[in].name, "transformer.h.1.mlp.act.out") << "reads the forward's own GELU output";
    remade |= sp.buffers[in].name == "transformer.h.1.mlp.act.out@recompute";
  }
  EXPECT_TRUE(remade);
}
