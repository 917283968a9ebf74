// Expert parallelism (parallel.ep): a mixture of experts' experts split over ranks of the
// data-parallel group, tokens sent to their experts and back by all-to-all.
#include <gtest/gtest.h>

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

// A small Mixtral: 8 experts, top 2, 128 tokens, bf16.
const std::string kMoe =
    "model: llama\nlayers: 2\nhidden: 256\nheads: 4\nnum_kv_heads: 2\nintermediate: 512\nvocab: 1000\n"
    "num_experts: 8\ntop_k: 2\nseq_len: 128\nbatch: 1\ndtype: bf16\nattention_impl: fused\n";

}  // namespace

TEST(ExpertParallel, EachRankHoldsItsExpertsAndExchangesTokensByAllToAll) {
  const Trace one = workload(kMoe + "parallel:\n  dp: 8\n");
  const Trace ep = workload(kMoe + "parallel:\n  dp: 8\n  ep: 4\n");
  const std::string expert = "model.layers.1.block_sparse_moe.experts.";
  // Experts 0 and 1 of 8 on rank 0; the router is whole.
  for (int e : {0, 1}) EXPECT_NE(find_buffer(ep, expert + std::to_string(e) + ".w1.weight"), nullptr) << e;
  for (int e : {2, 7}) EXPECT_EQ(find_buffer(ep, expert + std::to_string(e) + ".w1.weight"), nullptr) << e;
  EXPECT_EQ(buffer_named(ep, "model.layers.1.block_sparse_moe.gate.weight").bytes,
            buffer_named(one, "model.layers.1.block_sparse_moe.gate.weight").bytes);
  // Per layer, a dispatch and a combine all-to-all forward and again backward, each of every
  // routed token slot: capacity ceil(128 x 2 / 8) = 32 tokens for each of the 8 experts.
  std::map<Phase, int> a2a;
  for (const Op& op : ep.ops)
    if (op.kind == "all_to_all") {
      ++a2a[op.phase];
      EXPECT_EQ(op.group, "ep");
      EXPECT_EQ(op.message_bytes, 32u * 8 * 256 * 2) << op.name;
    }
  EXPECT_EQ(a2a[Phase::forward], 4);
  EXPECT_EQ(a2a[Phase::backward], 4);
  // Each local expert computes its capacity from each of the 4 ranks.
  EXPECT_EQ(buffer_named(ep, expert + "0.dispatch.out").bytes, 32u * 4 * 256 * 2);
  ASSERT_NE(ep.find_group("ep"), nullptr);
  EXPECT_EQ(ep.find_group("ep")->ranks, (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_LT(ep.parameters, one.parameters);
}

TEST(ExpertParallel, AnExpertsStateIsShardedOverTheRanksThatHoldIt) {
  // ZeRO-1 over dp 8 with ep 4: dense state in 8 shards, an expert's over the 2 ranks that
  // hold the same experts (Megatron's expert data-parallel group); with ep = dp, none.
  const std::string mixed = kMoe + "mixed_precision: true\noptimizer: adamw\n";
  const Trace full = workload(mixed);
  const Trace half = workload(mixed + "parallel:\n  dp: 8\n  ep: 4\n  zero: 1\n");
  const Trace whole = workload(mixed + "parallel:\n  dp: 8\n  ep: 8\n  zero: 1\n");
  const std::string expert = "model.layers.0.block_sparse_moe.experts.0.w2.weight.exp_avg";
  const std::string dense = "model.layers.0.self_attn.q_proj.weight.exp_avg";
  EXPECT_EQ(buffer_named(half, dense).bytes * 8, buffer_named(full, dense).bytes);
  EXPECT_EQ(buffer_named(half, expert).bytes * 2, buffer_named(full, expert).bytes);
  EXPECT_EQ(buffer_named(whole, expert).bytes, buffer_named(full, expert).bytes);
  // Their gradients are reduce-scattered over that group, or not at all.
  ASSERT_NE(half.find_group("edp"), nullptr);
  EXPECT_EQ(half.find_group("edp")->ranks, (std::vector<std::uint32_t>{0, 4}));
  bool expert_rs = false;
  for (const Op& op : half.ops) expert_rs |= op.kind == "reduce_scatter" && op.group == "edp";
  EXPECT_TRUE(expert_rs);
  for (const Op& op : whole.ops) EXPECT_NE(op.group, "edp") << op.name;
}

TEST(ExpertParallel, SplitsThatCannotBeAreLocatedErrors) {
  EXPECT_NE(workload_error(kMoe + "parallel:\n  dp: 8\n  ep: 3\n").find("a divisor of dp (8)"), std::string::npos);
  EXPECT_NE(workload_error(kMoe + "parallel:\n  dp: 16\n  ep: 16\n").find("a divisor of the 8 experts"),
            std::string::npos);
  const std::string dense = "model: llama\nlayers: 2\nhidden: 256\nheads: 4\nintermediate: 512\nvocab: 1000\n"
                            "seq_len: 64\nbatch: 1\nparallel:\n  dp: 2\n  ep: 2\n";
  // At the value that asks for it (it was a message without a file, line or key).
  EXPECT_EQ(workload_error(dense), "w.yaml:11:7: parallel.ep: model llama has no experts to split over "
                                   "expert-parallel ranks");
}
