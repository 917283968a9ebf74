// Context parallelism (parallel.cp): each rank holds 1/cp of every sequence, and the
// attention runs as TransformerEngine's ring attention, k and v passed around the cp ranks
// (ModelBuilder::context_parallel_attention). What it keeps, sends and computes per rank,
// against the formulas, and where it is refused.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "sim/parallel/mesh.h"
#include "sim/workload/parallel.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

// A small Llama with grouped-query attention: hidden 256 in 8 heads of 32, 2 k/v heads;
// batch 2 of 512 tokens, bf16.
constexpr std::int64_t kBatch = 2, kSeq = 512, kHidden = 256, kHeadDim = 32, kKvHeads = 2;

std::string llama(std::uint32_t cp, const std::string& parallel = "", const std::string& attention = "fused") {
  return fmt::format(
      "model: llama\nlayers: 2\nhidden: {}\nheads: 8\nnum_kv_heads: {}\nintermediate: 512\nvocab: 1024\n"
      "seq_len: {}\nbatch: {}\ndtype: bf16\nmixed_precision: true\noptimizer: adamw\nattention_impl: {}\n"
      "parallel:\n  cp: {}\n{}",
      kHidden, kKvHeads, kSeq, kBatch, attention, cp, parallel);
}

struct Sent {
  std::uint64_t bytes = 0;
  int exchanges = 0;
};

// The ring exchanges of layer 0's attention in one phase.
Sent kv_ring(const Trace& t, Phase phase) {
  Sent s;
  for (const Op& op : t.ops)
    if (op.kind == "ring_exchange" && op.phase == phase && op.name.rfind("model.layers.0.", 0) == 0) {
      EXPECT_EQ(std::string(op.group), "cp") << op.name;
      s.bytes += op.message_bytes;
      ++s.exchanges;
    }
  return s;
}

double attention_flops(const Trace& t, const std::string& kind) {
  double f = 0;
  for (const Op& op : t.ops)
    if (op.kind == kind && op.name.rfind("model.layers.0.", 0) == 0) f += op.flops;
  return f;
}

}  // namespace

TEST(ContextParallel, EachRankKeepsOneCpthOfTheSequencesActivations) {
  // Every activation the step saves is per token but the loss's total weight (one number, as
  // nll_loss saves it), and a rank holds
  // 1/cp of the tokens: the rest of the saved bytes at cp c are exactly those of the whole
  // sequence (cp 1, which the model tests check against Korthikanti's and FlashAttention's
  // counts) over c. (The reference has dp 2, so that both reduce their gradients.)
  auto per_token = [](const Trace& t) {
    return saved_activation_bytes(t) - buffer_named(t, "nll_loss.total_weight").bytes;
  };
  const std::uint64_t whole = per_token(workload(llama(1, "  dp: 2\n")));
  for (const std::uint32_t c : {2u, 4u, 8u}) {
    SCOPED_TRACE(c);
    const Trace t = workload(llama(c));
    EXPECT_EQ(per_token(t) * c, whole);
    // The attention's saves by hand: q, k, v and its output of b x s/c tokens in bf16, the
    // fp32 logsumexp of b x heads x s/c rows.
    const std::int64_t tokens = kBatch * kSeq / c;
    EXPECT_EQ(buffer_named(t, "model.layers.0.self_attn.out").bytes, static_cast<std::uint64_t>(tokens * kHidden * 2));
    EXPECT_EQ(buffer_named(t, "model.layers.0.self_attn.logsumexp").bytes,
              static_cast<std::uint64_t>(kBatch * 8 * kSeq / c * 4));
    EXPECT_EQ(t.parallel.ranks, c);
  }
}

TEST(ContextParallel, TheKvRingSendsEachBlockOnceForwardAndBlockAndGradientBackward) {
  // A block is this rank's k and v: 2 x b x s/c x kv_heads/tp x head_dim x 2 bytes (bf16).
  // Forward: c - 1 exchanges of a block. Backward: c exchanges, the first of the block, the
  // last of its gradient, the others of both: 2 (c - 1) blocks (TransformerEngine's
  // AttnFuncWithCPAndKVP2P).
  for (const std::uint32_t tp : {1u, 2u})
    for (const std::uint32_t c : {2u, 4u, 8u}) {
      SCOPED_TRACE(fmt::format("tp {} cp {}", tp, c));
      const Trace t = workload(llama(c, fmt::format("  tp: {}\n", tp)));
      const auto block = static_cast<std::uint64_t>(2 * kBatch * (kSeq / c) * (kKvHeads / tp) * kHeadDim * 2);
      const Sent fwd = kv_ring(t, Phase::forward), bwd = kv_ring(t, Phase::backward);
      EXPECT_EQ(fwd.exchanges, static_cast<int>(c - 1));
      EXPECT_EQ(fwd.bytes, (c - 1) * block);
      EXPECT_EQ(bwd.exchanges, static_cast<int>(c));
      EXPECT_EQ(bwd.bytes, 2 * (c - 1) * block);
      const Op& first = op_named(t, "model.layers.0.self_attn.kv_exchange0.backward");
      const Op& last = op_named(t, fmt::format("model.layers.0.self_attn.kv_exchange{}.backward", c - 1));
      EXPECT_EQ(first.message_bytes, block);
      EXPECT_EQ(last.message_bytes, block);
    }
}

TEST(ContextParallel, EachRankComputesOneCpthOfTheAttentionInCEqualSteps) {
  // With the causal mask balanced by the 2c chunks, every step of every rank is the work of
  // FlashAttention over the rank's own tokens, and the c steps are 1/c of the whole
  // sequence's: 4 b s^2 h / 2 / c forward, 2.5 times that backward.
  const double whole = attention_flops(workload(llama(1)), "flash_attention");
  EXPECT_DOUBLE_EQ(whole, 4.0 * kBatch * kSeq * kSeq * kHidden * 0.5);
  for (const std::uint32_t c : {2u, 4u, 8u}) {
    SCOPED_TRACE(c);
    const Trace t = workload(llama(c));
    EXPECT_DOUBLE_EQ(attention_flops(t, "flash_attention") * c, whole);
    EXPECT_DOUBLE_EQ(attention_flops(t, "flash_attention_backward") * c, 2.5 * whole);
    for (std::uint32_t i = 0; i < c; ++i)
      EXPECT_DOUBLE_EQ(op_named(t, fmt::format("model.layers.0.self_attn.step{}", i)).flops, whole / c / c);
  }
}

TEST(ContextParallel, GradientsAreReducedAndShardedOverDpTimesCp) {
  // The weights are replicated over the cp ranks as over the dp ones: with cp 2 and dp 2 the
  // gradients are reduced over the 4 ranks of Megatron's data-parallel group with context
  // parallelism, and ZeRO-1 shards the optimizer state 4 ways.
  const Trace whole = workload(llama(1));
  const Trace t = workload(llama(2, "  dp: 2\n  zero: 1\n"));
  const ProcessGroup* dp = t.find_group("dp");
  ASSERT_NE(dp, nullptr);
  EXPECT_EQ(dp->ranks, Mesh::megatron(1, 2, 1, 1, 2).group("dp", 0));
  EXPECT_EQ(dp->ranks.size(), 4u);
  const std::string state = "model.layers.0.mlp.down_proj.weight.exp_avg";
  EXPECT_EQ(buffer_named(t, state).bytes, (buffer_named(whole, state).bytes + 3) / 4);
  const ProcessGroup* cp = t.find_group("cp");
  ASSERT_NE(cp, nullptr);
  EXPECT_EQ(cp->ranks, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(t.parallel.ranks, 4u);
  // cp alone still reduces the gradients, over its 2 ranks.
  const Trace alone = workload(llama(2));
  ASSERT_NE(alone.find_group("dp"), nullptr);
  EXPECT_EQ(alone.find_group("dp")->ranks, (std::vector<std::uint32_t>{0, 1}));
}

TEST(ContextParallel, BadLayoutsAreRefusedAtTheKey) {
  const std::string materialized = workload_error(llama(2, "", "materialized"));
  EXPECT_NE(materialized.find("w.yaml:"), std::string::npos) << materialized;
  EXPECT_NE(materialized.find("parallel.cp"), std::string::npos) << materialized;
  EXPECT_NE(materialized.find("attention_impl: fused"), std::string::npos) << materialized;
  // 512 tokens do not split into 2 x 3 chunks.
  const std::string uneven = workload_error(llama(3));
  EXPECT_NE(uneven.find("6 chunks divide seq_len 512"), std::string::npos) << uneven;
  const std::string bert = workload_error(
      "model: bert\nseq_len: 128\nbatch: 2\nattention_impl: fused\nparallel:\n  cp: 2\n");
  EXPECT_NE(bert.find("parallel.cp"), std::string::npos) << bert;
  EXPECT_NE(bert.find("encoder"), std::string::npos) << bert;
  const std::string mlp = workload_error("model: mlp\nbatch: 8\nparallel:\n  cp: 2\n");
  EXPECT_NE(mlp.find("does not split its sequences over context-parallel ranks"), std::string::npos) << mlp;
}
