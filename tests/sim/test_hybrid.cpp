// hybrid: swap or recompute per stashed buffer (Capuchin's rule), against timelines worked
// out by hand.
#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/run/run.h"
#include "sim/policy/policy.h"

using namespace memsim;

namespace {

// 1 TFLOPS, no launch overhead; host DRAM over a 10 GB/s link with no latency.
PlatformSpec box(const std::string& capacity) {
  return load_platform(ConfigNode::parse_text(R"(
name: box
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    launch_overhead: 0us
    tiers:
      hbm: {role: compute, capacity: )" + capacity + R"(, bandwidth: 1000GB/s}
  host:
    kind: cpu
    tiers:
      dram: {role: offload, capacity: 1TiB, bandwidth: 100GB/s}
links:
  pcie0: {endpoints: [gpu0.hbm, host.dram], bandwidth: 10GB/s, latency: 0us}
)",
                                              "box.yaml"));
}

std::unique_ptr<Policy> hybrid() {
  auto node = ConfigNode::parse_text("{}", "test");
  const PolicyInfo* info = find_policy("hybrid");
  return info->create(Params(node, info->params, "policy hybrid"));
}

Op make_op(const std::string& name, Phase phase, std::vector<BufferId> in, BufferId out,
           double gflops) {
  Op op;
  op.name = name;
  op.kind = "matmul";
  op.phase = phase;
  op.inputs = std::move(in);
  op.outputs = {out};
  op.flops = gflops * 1e9;
  return op;
}

// x (1000 B, persistent) feeds
//   p1 -> a   100 MB,  1 ms   swap 2 x 10 ms > recompute 1 ms:  recompute
//   p2 -> b     1 MB, 10 ms   swap 2 x 0.1 ms < recompute 10 ms: swap
//   big -> c  100 MB, 20 ms   (read by nothing: needs room while it is made)
//   fill -> d  1000 B, 20 ms
//   backward: ub reads b, then ua reads a (1 ms each)
Trace stashed() {
  Trace t;
  t.name = "stashed";
  BufferId x = t.add_buffer("x", 1000, Category::input, true);
  BufferId a = t.add_buffer("a", 100'000'000, Category::activation);
  BufferId b = t.add_buffer("b", 1'000'000, Category::activation);
  BufferId c = t.add_buffer("c", 100'000'000, Category::activation);
  BufferId d = t.add_buffer("d", 1000, Category::activation);
  BufferId e1 = t.add_buffer("e1", 1000, Category::activation_grad);
  BufferId e2 = t.add_buffer("e2", 1000, Category::activation_grad);
  t.add_op(make_op("p1", Phase::forward, {x}, a, 1));
  t.add_op(make_op("p2", Phase::forward, {x}, b, 10));
  t.add_op(make_op("big", Phase::forward, {x}, c, 20));
  t.add_op(make_op("fill", Phase::forward, {x}, d, 20));
  t.add_op(make_op("ub", Phase::backward, {b}, e1, 1));
  t.add_op(make_op("ua", Phase::backward, {a}, e2, 1));
  validate(t, "stashed");
  return t;
}

}  // namespace

TEST(Hybrid, SwapsWhatIsCheapToMoveAndRecomputesWhatIsCheapToMake) {
  // 100.5 MB: p2 needs a gone (x + a + b > cap), big needs b gone too. a is dropped after p1
  // and remade by ua (1 ms); b goes out after p2 (0.1 ms, big waits for it: a 0.1 ms stall),
  // comes back before fill and is there for ub. 1 + 10 + 0.1 + 20 + 20 + 1 + (1 + 1) ms.
  const Trace t = stashed();
  auto p = hybrid();
  Recorder rec;
  Summary s = simulate(box("100500000B"), t, *p, rec);
  ASSERT_EQ(s.status, "ok");
  EXPECT_NE(s.policy.find("swap 1"), std::string::npos) << s.policy;
  EXPECT_NE(s.policy.find("recompute 1"), std::string::npos) << s.policy;
  EXPECT_NEAR(s.recompute_time_s, 1e-3, 1e-12);
  EXPECT_NEAR(s.stall_time_s, 1e-4, 1e-9);
  EXPECT_NEAR(s.iteration_time_s, 54.1e-3, 1e-9);
  EXPECT_EQ(s.swap_out_bytes, 1'000'000u);
  EXPECT_EQ(s.swap_in_bytes, 1'000'000u);
  EXPECT_LE(s.tiers[0].usage.peak_allocated_bytes, 100'500'000u);
  std::vector<std::string> kinds;
  for (const Event& e : rec.events())
    if (e.kind != EventKind::compute && e.kind != EventKind::stall)
      kinds.push_back(e.kind == EventKind::recompute ? "recompute " + t.ops[e.op].name
                                                     : e.kind == EventKind::swap_out ? "out " + t.buffers[e.buffer].name
                                                                                    : "in " + t.buffers[e.buffer].name);
  EXPECT_EQ(kinds, (std::vector<std::string>{"out b", "in b", "recompute p1"}));
}

TEST(Hybrid, WithEnoughMemoryNothingMoves) {
  const Trace t = stashed();
  auto p = hybrid();
  Recorder rec;
  Summary s = simulate(box("1GiB"), t, *p, rec);
  ASSERT_EQ(s.status, "ok");
  EXPECT_NE(s.policy.find("swap 0"), std::string::npos) << s.policy;
  EXPECT_NE(s.policy.find("recompute 0"), std::string::npos) << s.policy;
  EXPECT_NEAR(s.iteration_time_s, 53e-3, 1e-9);
}

TEST(Hybrid, ABudgetNoPlanReachesEndsOomWithTheReason) {
  // p1 alone needs x + a = 100,001,000 B.
  const Trace t = stashed();
  auto p = hybrid();
  Recorder rec;
  Summary s = simulate(box("100000500B"), t, *p, rec);
  EXPECT_EQ(s.status, "oom");
  ASSERT_TRUE(s.oom.has_value());
  EXPECT_NE(s.oom->reason.find("hybrid:"), std::string::npos) << s.oom->reason;
  EXPECT_NE(s.oom->reason.find("its plan still needs 95.4 MiB at op 'p1'"), std::string::npos)
      << s.oom->reason;
}
