// The engine against answers worked out by hand. Each TEST runs in its own process
// (gtest_discover_tests), as SimGrid's engine is a process singleton.
#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/run/run.h"
#include "sim/policy/policy.h"
#include "tests/sim/fixed_plan.h"

using namespace memsim;
using memsim::test::FixedPlan;

namespace {

// One GPU at 1 TFLOPS fp32 with 1 us launch overhead and a 100 GB/s tier; matmul kernels
// reach half of peak, everything else all of it. The host is joined by a 10 GB/s link.
PlatformSpec test_platform(const std::string& capacity = "1GiB", int copy_engines = 2,
                           const std::string& duplex = "full", int streams = 1) {
  return load_platform(ConfigNode::parse_text(R"(
name: testbox
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    launch_overhead: 1us
    streams: )" + std::to_string(streams) + R"(
    copy_engines: )" + std::to_string(copy_engines) + R"(
    efficiency: {default: 1.0, matmul: 0.5}
    tiers:
      hbm: {role: compute, capacity: )" + capacity + R"(, bandwidth: 100GB/s}
  host:
    kind: cpu
    tiers:
      dram: {role: offload, capacity: 64GiB, bandwidth: 50GB/s}
links:
  pcie0: {endpoints: [gpu0.hbm, host.dram], bandwidth: 10GB/s, latency: 5us, duplex: )" + duplex + "}\n",
                                              "test.yaml"));
}

// w (1000 B weight) and x (4000 B input) are resident at the start.
//   op1 "proj"   reads x, w  -> a (2000 B)   2e9 FLOPs, 7000 B moved
//   op2 "act"    reads a     -> b (3000 B)   0 FLOPs, 5000 B moved, 600 B workspace
//   op3 "head"   reads b, x  -> c (3000 B)   1e6 FLOPs (matmul), 10000 B moved
Trace three_op_trace() {
  Trace t;
  t.name = "three";
  BufferId w = t.add_buffer("w", 1000, Category::weight, true);
  BufferId x = t.add_buffer("x", 4000, Category::input);
  BufferId a = t.add_buffer("a", 2000, Category::activation);
  BufferId b = t.add_buffer("b", 3000, Category::activation);
  BufferId c = t.add_buffer("c", 3000, Category::activation);
  Op op1;
  op1.name = "proj";
  op1.kind = "linear";
  op1.inputs = {x, w};
  op1.outputs = {a};
  op1.flops = 2e9;
  op1.bytes_moved = 7000;
  t.add_op(op1);
  Op op2;
  op2.name = "act";
  op2.kind = "relu";
  op2.inputs = {a};
  op2.outputs = {b};
  op2.bytes_moved = 5000;
  op2.workspace_bytes = 600;
  t.add_op(op2);
  Op op3;
  op3.name = "head";
  op3.kind = "matmul";
  op3.inputs = {b, x};
  op3.outputs = {c};
  op3.flops = 1e6;
  op3.bytes_moved = 10000;
  t.add_op(op3);
  validate(t, "three");
  return t;
}

std::unique_ptr<Policy> policy(const std::string& name) {
  auto node = ConfigNode::parse_text("{}", "test");
  return find_policy(name)->create(Params(node, find_policy(name)->params, name));
}

// A plan given by the test: for copy experiments.
}  // namespace

// Roofline by hand:
//   proj: max(2e9 / 1e12, 7000 / 1e11) + 1e-6        = 2.001e-3 s
//   act:  max(0, 5000 / 1e11) + 1e-6                 = 1.05e-6 s
//   head: max(1e6 / 0.5e12, 10000 / 0.5e11) + 1e-6   = 3e-6 s
constexpr double kIteration = 2.001e-3 + 1.05e-6 + 3e-6;

TEST(EngineThreeOps, NoneFreesAtLastUse) {
  // Live bytes: start w+x = 5000; proj +a = 7000; act +b +ws = 10600, then -ws -a = 8000;
  // head +c = 11000 (the peak), then b, x and c (never read) go: 1000.
  Trace t = three_op_trace();
  Recorder rec;
  auto p = policy("none");
  Summary s = simulate(test_platform(), t, *p, rec);
  EXPECT_EQ(s.status, "ok");
  EXPECT_EQ(s.tiers[0].name, "gpu0.hbm");
  EXPECT_EQ(s.tiers[0].usage.peak_allocated_bytes, 11000u);
  EXPECT_EQ(s.tiers[0].usage.allocated_bytes, 1000u);
  EXPECT_NEAR(s.iteration_time_s, kIteration, 1e-15);
  EXPECT_NEAR(s.compute_time_s, kIteration, 1e-15);
  // The peak is reached when head starts, after proj and act.
  EXPECT_NEAR(s.tiers[0].usage.peak_time_s, 2.001e-3 + 1.05e-6, 1e-15);
  const auto& at_peak = s.tiers[0].usage.peak_by_category;
  EXPECT_EQ(at_peak[static_cast<int>(Category::activation)], 6000u);  // b + c
  EXPECT_EQ(at_peak[static_cast<int>(Category::input)], 4000u);
  EXPECT_EQ(at_peak[static_cast<int>(Category::weight)], 1000u);
  ASSERT_EQ(rec.events().size(), 3u);
  EXPECT_NEAR(rec.events()[0].end_s, 2.001e-3, 1e-15);
}

TEST(EngineThreeOps, KeepAllFreesAtTheEnd) {
  // Nothing goes until the end: 5000 + a + b + ws = 10600, ws released = 10000, + c = 13000.
  Trace t = three_op_trace();
  Recorder rec;
  auto p = policy("keep-all");
  Summary s = simulate(test_platform(), t, *p, rec);
  EXPECT_EQ(s.status, "ok");
  EXPECT_EQ(s.tiers[0].usage.peak_allocated_bytes, 13000u);
  EXPECT_EQ(s.tiers[0].usage.allocated_bytes, 1000u);  // the weight persists
  EXPECT_NEAR(s.iteration_time_s, kIteration, 1e-15);
}

TEST(EngineThreeOps, OomNamesOpTierAndBytes) {
  // 12000 B of HBM: keep-all needs 13000, so head's 3000 B output does not fit (10000 live).
  Trace t = three_op_trace();
  Recorder rec;
  auto p = policy("keep-all");
  Summary s = simulate(test_platform("12000B"), t, *p, rec);
  EXPECT_EQ(s.status, "oom");
  ASSERT_TRUE(s.oom.has_value());
  EXPECT_EQ(s.oom->op, "head");
  EXPECT_EQ(s.oom->tier, "gpu0.hbm");
  EXPECT_EQ(s.oom->requested_bytes, 3000u);
  EXPECT_EQ(s.oom->allocated_bytes, 10000u);
  ASSERT_FALSE(s.oom->largest_live.empty());
  EXPECT_EQ(s.oom->largest_live[0].name, "x");  // 4000 B, the largest live buffer
  EXPECT_EQ(s.ops_run, 2u);
}

TEST(EngineThreeOps, NoneFitsWhereKeepAllDoesNot) {
  // The same 12000 B hold the step under none, whose peak is 11000 B.
  Trace t = three_op_trace();
  Recorder rec;
  auto p = policy("none");
  EXPECT_EQ(simulate(test_platform("12000B"), t, *p, rec).status, "ok");
}

TEST(EngineCopies, OneCopyTakesSizeOverBandwidthPlusLatency) {
  // 1 GB over 10 GB/s with 5 us latency: 0.1 s + 5 us.
  Trace t;
  t.name = "copy";
  t.add_buffer("big", 1'000'000'000, Category::activation, true);
  FixedPlan p(Plan{{{StepKind::swap_out, 0, 1}}});
  Recorder rec;
  Summary s = simulate(test_platform("4GiB"), t, p, rec);
  ASSERT_EQ(rec.events().size(), 1u);
  const Event& e = rec.events()[0];
  EXPECT_EQ(e.kind, EventKind::swap_out);
  EXPECT_NEAR(e.end_s - e.start_s, 0.1 + 5e-6, 1e-12);
  EXPECT_EQ(s.swap_out_bytes, 1'000'000'000u);
  // The buffer now lives on the host; the GPU's space was freed when the copy completed.
  EXPECT_EQ(s.tiers[0].usage.allocated_bytes, 0u);
  EXPECT_EQ(s.tiers[1].usage.allocated_bytes, 1'000'000'000u);
}

TEST(EngineCopies, TwoCopiesSharingALinkTakeTwiceAsLong) {
  // Two engines, both copies out over the same direction of pcie0: each gets 5 GB/s, so
  // each takes 2 x 0.1 s (plus the latency once).
  Trace t;
  t.name = "copies";
  t.add_buffer("a", 1'000'000'000, Category::activation, true);
  t.add_buffer("b", 1'000'000'000, Category::activation, true);
  FixedPlan p(Plan{{{StepKind::swap_out, 0, 1}, {StepKind::swap_out, 1, 1}}});
  Recorder rec;
  Summary s = simulate(test_platform("4GiB"), t, p, rec);
  ASSERT_EQ(rec.events().size(), 2u);
  for (const Event& e : rec.events()) EXPECT_NEAR(e.end_s - e.start_s, 0.2 + 5e-6, 1e-12);
  EXPECT_NEAR(s.iteration_time_s, 0.2 + 5e-6, 1e-12);
}

namespace {
// b goes to the host while a 0.2 s op runs; then a goes out and b comes back at once.
Summary out_and_in_together(const std::string& duplex) {
  Trace t;
  t.name = "duplex";
  BufferId a = t.add_buffer("a", 1'000'000'000, Category::activation, true);
  BufferId b = t.add_buffer("b", 1'000'000'000, Category::activation, true);
  Op timer;
  timer.name = "timer";
  timer.kind = "matmul_like";
  timer.flops = 2e11;  // 0.2 s at 1 TFLOPS, + 1 us launch
  t.add_op(timer);
  FixedPlan p(Plan{{{StepKind::swap_out, b, 1},
                    {StepKind::compute, 0, 0},
                    {StepKind::swap_out, a, 1},
                    {StepKind::swap_in, b, 0}}});
  Recorder rec;
  return simulate(test_platform("4GiB", 1, duplex), t, p, rec);
}
}  // namespace

TEST(EngineCopies, OppositeDirectionsOfAFullDuplexLinkDoNotShare) {
  // Full duplex: each direction has its own 10 GB/s, so the last two copies take 0.1 s each.
  EXPECT_NEAR(out_and_in_together("full").iteration_time_s, 0.2 + 1e-6 + 0.1 + 5e-6, 1e-12);
}

TEST(EngineCopies, OppositeDirectionsOfAHalfDuplexLinkShare) {
  // Half duplex: out and in share 10 GB/s, so the last two copies take 0.2 s.
  EXPECT_NEAR(out_and_in_together("half").iteration_time_s, 0.2 + 1e-6 + 0.2 + 5e-6, 1e-12);
}

TEST(EngineCopies, OneCopyEngineSerialisesCopies) {
  // With a single copy engine the second copy waits for the first: 2 x (0.1 s + 5 us).
  Trace t;
  t.name = "serial";
  t.add_buffer("a", 1'000'000'000, Category::activation, true);
  t.add_buffer("b", 1'000'000'000, Category::activation, true);
  FixedPlan p(Plan{{{StepKind::swap_out, 0, 1}, {StepKind::swap_out, 1, 1}}});
  Recorder rec;
  Summary s = simulate(test_platform("4GiB", 1), t, p, rec);
  EXPECT_NEAR(s.iteration_time_s, 2 * (0.1 + 5e-6), 1e-12);
}

TEST(EngineCopies, ReaderStallsForASwapIn) {
  // x is swapped out at the start and read by op1: the stream swaps it back on demand and
  // stalls for both copies (4000 B / 10 GB/s + 5 us each way: out, then in).
  Trace t = three_op_trace();
  FixedPlan p(Plan{{{StepKind::swap_out, 1, 1}, {StepKind::compute, 0, 0}}});
  Recorder rec;
  Summary s = simulate(test_platform(), t, p, rec);
  const double one_way = 4000 / 10e9 + 5e-6;
  EXPECT_NEAR(s.stall_time_s, 2 * one_way, 1e-12);
  EXPECT_NEAR(s.iteration_time_s, 2 * one_way + 2.001e-3, 1e-12);
  EXPECT_EQ(s.swap_out_bytes, 4000u);
  EXPECT_EQ(s.swap_in_bytes, 4000u);
}

namespace {
// Two ops of 1e9 FLOPs (1 ms + 1 us each alone); `dependent` makes the second read the
// first's output.
Trace two_streams(bool dependent) {
  Trace t;
  t.name = "streams";
  BufferId x = t.add_buffer("x", 1000, Category::input);
  BufferId y = t.add_buffer("y", 1000, Category::activation);
  BufferId z = t.add_buffer("z", 1000, Category::activation);
  Op a;
  a.name = "a";
  a.kind = "linear";
  a.inputs = {x};
  a.outputs = {y};
  a.flops = 1e9;
  t.add_op(a);
  Op b;
  b.name = "b";
  b.kind = "linear";
  b.stream = 1;
  b.inputs = {dependent ? y : x};
  b.outputs = {z};
  b.flops = 1e9;
  t.add_op(b);
  validate(t, "streams");
  return t;
}
}  // namespace

TEST(EngineStreams, ASecondStreamWaitsForItsInput) {
  // b on stream 1 reads a's output: it starts when a ends, 2 x 1.001 ms in all.
  Trace t = two_streams(true);
  Recorder rec;
  auto p = policy("none");
  Summary s = simulate(test_platform("1GiB", 1, "full", 2), t, *p, rec);
  EXPECT_NEAR(s.iteration_time_s, 2 * 1.001e-3, 1e-15);
  ASSERT_EQ(rec.events().size(), 2u);
  EXPECT_EQ(rec.events()[1].lane, 1u);
  EXPECT_NEAR(rec.events()[1].start_s, 1.001e-3, 1e-15);
}

TEST(EngineStreams, IndependentStreamsShareTheDevice) {
  // Independent ops on two streams run at once and share the device's rate: each takes
  // twice as long alone, and both end at 2 x 1.001 ms.
  Trace t = two_streams(false);
  Recorder rec;
  auto p = policy("none");
  Summary s = simulate(test_platform("1GiB", 1, "full", 2), t, *p, rec);
  EXPECT_NEAR(s.iteration_time_s, 2 * 1.001e-3, 1e-15);
  for (const Event& e : rec.events()) {
    EXPECT_NEAR(e.start_s, 0.0, 1e-15);
    EXPECT_NEAR(e.end_s, 2 * 1.001e-3, 1e-15);
  }
  // x, y and z are all live at once: 3000 bytes.
  EXPECT_EQ(s.tiers[0].usage.peak_allocated_bytes, 3000u);
}

TEST(EngineFastPath, SummedOpsEndWhereOneByOneWould) {
  // A single stream sums durations instead of running one activity per op; a copy in
  // flight forces one activity per op. Both must give the same times: x is swapped out
  // (and back on demand) first here, so the ops after it run while nothing is in flight.
  Trace t = three_op_trace();
  FixedPlan p(Plan{{{StepKind::compute, 0, 0},
                    {StepKind::swap_out, 0, 1},  // w leaves during act and head
                    {StepKind::compute, 1, 0},
                    {StepKind::compute, 2, 0}}});
  Recorder rec;
  Summary s = simulate(test_platform(), t, p, rec);
  // w (1000 B) goes out at 2.001 ms and takes 1000 / 10 GB/s + 5 us = 5.1 us; act and head
  // need 4.05 us, so they run while it is in flight and finish at the same times.
  EXPECT_NEAR(s.iteration_time_s, std::max(kIteration, 2.001e-3 + 5.1e-6), 1e-15);
  ASSERT_EQ(rec.events().size(), 4u);
  EXPECT_NEAR(rec.events()[2].end_s, kIteration, 1e-15);  // head, the last compute
}
