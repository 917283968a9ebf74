// The examples of docs/extending.md, compiled from the page itself (CMakeLists.txt cuts them
// out): the budgeted recompute policy runs through run() and meets its budget; the
// power-of-two allocator rounds as the page says; the one-shot all-reduce sends what the
// page says it sends; the compressed-gradients scheme shrinks the data-parallel reductions
// and nothing else.
#include <gtest/gtest.h>

#include "sim/collectives/collectives.h"
#include "sim/core/config.h"
#include "sim/exec/replay.h"
#include "sim/memory/allocator.h"
#include "sim/parallel/scheme.h"
#include "sim/platform/platform.h"
#include "sim/run/run.h"
#include "sim/workload/models/models.h"
#include "tests/model_helpers.h"

namespace memsim {
PolicyInfo cheap_recompute_policy();
AllocatorInfo power_of_two_allocator();
CollectiveAlgorithm one_shot_algorithm();
ParallelScheme compressed_gradients_scheme();
}  // namespace memsim

using namespace memsim;
using namespace memsim::test;

namespace {

std::unique_ptr<Policy> cheap_recompute(const std::string& yaml) {
  const PolicyInfo info = cheap_recompute_policy();
  return info.create(Params(ConfigNode::parse_text(yaml, "p.yaml"), info.params, info.name));
}

PlatformSpec gpu() {
  return load_platform(ConfigNode::parse_text(R"(
name: gpu
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 10TFLOPS}
    tiers:
      hbm: {role: compute, capacity: 16GiB, bandwidth: 1TB/s}
)", "gpu.yaml"));
}

RunResult run_with(const std::string& yaml, const Trace& trace) {
  static std::unique_ptr<Policy> policy;  // outlives the run
  policy = cheap_recompute(yaml);
  RunInputs in;
  in.platform = gpu();
  in.workloads = {trace};
  in.policy = policy.get();
  return run(in);
}

const Trace& resnet() {
  static const Trace t = generate("{model: resnet, depth: 18, batch: 8}");
  return t;
}

}  // namespace

TEST(Extending, TheRecomputePolicyMeetsItsBudgetByRecomputing) {
  const std::uint64_t baseline = exec::baseline_peak_bytes(resnet());
  RunResult r = run_with("{budget: 0.9}", resnet());
  ASSERT_EQ(r.summary.status, "ok") << (r.summary.oom ? r.summary.oom->reason : "");
  const TierUsage& hbm = r.summary.tiers[0].usage;
  EXPECT_EQ(hbm.budget_bytes, static_cast<std::uint64_t>(0.9 * static_cast<double>(baseline)));
  EXPECT_LE(hbm.peak_allocated_bytes, hbm.budget_bytes);
  EXPECT_GT(r.summary.recompute_time_s, 0);
  EXPECT_NE(r.summary.policy.find("cheap-recompute("), std::string::npos);
  EXPECT_TRUE(r.notes.empty());
}

TEST(Extending, TheRecomputePolicyRecomputesNothingWithoutABudget) {
  RunResult r = run_with("{}", resnet());
  ASSERT_EQ(r.summary.status, "ok");
  EXPECT_EQ(r.summary.policy, "cheap-recompute(0 ops)");
  EXPECT_EQ(r.summary.recompute_time_s, 0);
  EXPECT_EQ(r.summary.tiers[0].usage.peak_allocated_bytes, exec::baseline_peak_bytes(resnet()));
}

TEST(Extending, TheRecomputePolicySaysWhyABudgetCannotBeMet) {
  RunResult r = run_with("{budget: 0.2}", resnet());
  EXPECT_EQ(r.summary.status, "oom");
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0].rfind("cheap-recompute: recomputing all ", 0), 0u) << r.notes[0];
  ASSERT_TRUE(r.summary.oom.has_value());
  EXPECT_NE(r.summary.oom->reason.find(r.notes[0]), std::string::npos) << r.summary.oom->reason;
}

TEST(Extending, ThePowerOfTwoAllocatorRoundsUp) {
  const AllocatorInfo info = power_of_two_allocator();
  const Params params(ConfigNode::parse_text("{}", "tier.yaml"), info.params, info.name);
  // A 4000-byte tier under a 2000-byte budget: blocks of 512 B at least, powers of two.
  auto a = info.create(params, 4000, 2000);
  EXPECT_EQ(a->capacity_bytes(), 2000u);
  const auto small = a->allocate(100);
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->bytes, 512u);
  const auto big = a->allocate(600);
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->bytes, 1024u);
  EXPECT_EQ(a->allocated_bytes(), 1536u);
  EXPECT_EQ(a->largest_free_block(), 256u);  // 464 B left: the largest power of two in it
  EXPECT_FALSE(a->allocate(300).has_value());
  a->release(*big);
  EXPECT_EQ(a->allocated_bytes(), 512u);
  EXPECT_TRUE(a->allocate(1000).has_value());
}

TEST(Extending, TheOneShotAllReduceSendsTheWholeTensorToEveryPeerInOneStep) {
  const CollectiveAlgorithm a = one_shot_algorithm();
  const GroupTopology one_node{{0, 0, 0, 0}, false};
  ASSERT_TRUE(a.can_run("all_reduce", one_node));
  EXPECT_FALSE(a.can_run("all_gather", one_node));
  EXPECT_FALSE(a.can_run("all_reduce", GroupTopology{{0, 0, 1, 1}, false}));
  const auto phases = a.phases("all_reduce", 1000, one_node);
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_EQ(phases[0].steps, 1u);
  ASSERT_EQ(phases[0].flows.size(), 12u);
  std::vector<std::uint64_t> out(4, 0), in(4, 0);
  for (const Flow& f : phases[0].flows) out[f.from] += f.bytes, in[f.to] += f.bytes;
  for (std::uint32_t r = 0; r < 4; ++r) EXPECT_EQ(out[r], 3000u) << r;  // (n - 1) S each way: 3S/B on a link
  EXPECT_EQ(out, in);
  EXPECT_EQ(find_collective_algorithm("one-shot"), nullptr);  // the page's, not registered
}

namespace {

// A 2-layer GPT's step under `parallel` (a parallel: section), as generate_workload makes it
// with the page's scheme registered after the built-in ones.
Trace with_compression(const std::string& parallel) {
  std::vector<ParallelScheme> schemes = builtin_parallel_schemes();
  schemes.push_back(compressed_gradients_scheme());
  std::vector<ParamSpec> keys = parallel_param_specs();
  keys.insert(keys.end(), schemes.back().params.begin(), schemes.back().params.end());
  const Params section(ConfigNode::parse_text(parallel, "w.yaml"), keys, "parallel");
  static const Trace step = generate(
      "{model: gpt, layers: 2, hidden: 64, heads: 4, vocab: 100, max_positions: 128, seq_len: 128, batch: 2}");
  return apply_parallel_schemes(step, read_parallel_settings(section, 2), section, schemes);
}

// Every op of `compressed` as in `plain` but the data-parallel gradient reductions, which send
// 1/4 of the bytes (rounded up); returns how many there were.
int expect_quarter_reductions(const Trace& plain, const Trace& compressed) {
  EXPECT_EQ(plain.ops.size(), compressed.ops.size());
  int reductions = 0;
  for (std::size_t i = 0; i < std::min(plain.ops.size(), compressed.ops.size()); ++i) {
    const Op &a = plain.ops[i], &b = compressed.ops[i];
    EXPECT_EQ(a.name, b.name);
    const bool dp = a.group == "dp" || a.group.starts_with("dp@");
    if (dp && (a.kind == "all_reduce" || a.kind == "reduce_scatter")) {
      ++reductions;
      EXPECT_EQ(b.message_bytes, (a.message_bytes + 3) / 4) << a.name;
    } else {
      EXPECT_EQ(b.message_bytes, a.message_bytes) << a.name;
    }
  }
  return reductions;
}

}  // namespace

TEST(Extending, TheCompressedGradientsSchemeShrinksTheDataParallelReductionsOnly) {
  const Trace plain = with_compression("{dp: 4}");
  EXPECT_EQ(plain.ops.size(), workload("{model: gpt, layers: 2, hidden: 64, heads: 4, vocab: 100, max_positions: 128, "
                                       "seq_len: 128, batch: 2, parallel: {dp: 4}}")
                                  .ops.size());  // the registry's built-in schemes ran as generate_workload runs them
  EXPECT_GT(expect_quarter_reductions(plain, with_compression("{dp: 4, grad_compression: 4}")), 0);
  // Over a pipeline's stages, whose groups are instances of dp ("dp@..." or rank 0's "dp").
  const Trace stages = with_compression("{dp: 2, pp: 2, micro_batches: 2}");
  EXPECT_GT(expect_quarter_reductions(stages, with_compression("{dp: 2, pp: 2, micro_batches: 2, grad_compression: 4}")),
            0);
  // ZeRO-2's reduce-scatters are gradients' too.
  EXPECT_GT(expect_quarter_reductions(with_compression("{dp: 4, zero: 2}"),
                                      with_compression("{dp: 4, zero: 2, grad_compression: 4}")),
            0);
  EXPECT_EQ(find_parallel_scheme("compressed_gradients"), nullptr);  // the page's, not registered
}

TEST(Extending, TheCompressedGradientsSchemeNamesABadRatioAtItsKey) {
  try {
    with_compression("{dp: 4, grad_compression: 0.5}");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("w.yaml:1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("grad_compression: expected a ratio from 1 to 1024, got '0.5'"),
              std::string::npos)
        << e.what();
  }
}
