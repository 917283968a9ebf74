// The swapping policies against timelines worked out by hand.
#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/exec/replay.h"
#include "sim/run/run.h"
#include "sim/policy/policy.h"
#include "sim/workload/models/models.h"

using namespace memsim;

namespace {

// 1 TFLOPS, no launch overhead, efficiency 1: an op of 1e9 FLOPs takes exactly 1 ms. One
// copy engine per direction over a full-duplex link of `link` with no latency.
PlatformSpec box(const std::string& capacity, const std::string& link,
                 const std::string& compute = "1TFLOPS") {
  return load_platform(ConfigNode::parse_text(R"(
name: box
devices:
  gpu0:
    kind: gpu
    compute: {fp32: )" + compute + R"(}
    tiers:
      hbm: {role: compute, capacity: )" + capacity + R"(, bandwidth: 100TB/s}
  host:
    kind: cpu
    tiers:
      dram: {role: offload, capacity: 64GiB, bandwidth: 100TB/s}
links:
  pcie: {endpoints: [gpu0.hbm, host.dram], bandwidth: )" + link + "}\n",
                                              "box.yaml"));
}

std::unique_ptr<Policy> make(std::string name, const std::string& params = "{}") {
  for (char& c : name)
    if (c == '_') c = '-';
  auto node = ConfigNode::parse_text(params, "test");
  const PolicyInfo* info = find_policy(name);
  return info->create(Params(node, info->params, name));
}

Op op(const std::string& name, Phase phase, std::vector<BufferId> in, std::vector<BufferId> out,
      double ms) {
  Op o;
  o.name = name;
  o.kind = "matmul";
  o.phase = phase;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  o.flops = ms * 1e9;
  return o;
}

// Three layers and a loss, then their backward:
//   f1: x -> a   f2: a -> b   f3: b -> c   loss (3 ms): c -> d
//   g3: d -> gc   g2: gc, a -> ga   g1: ga, x -> gx
// x and a (2.5 MB each) are feature maps the backward needs again; the rest are 1000 B.
// 1 ms per op but the loss.
Trace three_layers(std::uint64_t c_bytes = 1000) {
  Trace t;
  t.name = "three-layers";
  BufferId x = t.add_buffer("x", 2'500'000, Category::input);
  BufferId a = t.add_buffer("a", 2'500'000, Category::activation);
  BufferId b = t.add_buffer("b", 1000, Category::activation);
  BufferId c = t.add_buffer("c", c_bytes, Category::activation);
  BufferId d = t.add_buffer("d", 1000, Category::activation);
  BufferId gc = t.add_buffer("gc", 1000, Category::activation_grad);
  BufferId ga = t.add_buffer("ga", 1000, Category::activation_grad);
  BufferId gx = t.add_buffer("gx", 1000, Category::activation_grad);
  t.add_op(op("f1", Phase::forward, {x}, {a}, 1));
  t.add_op(op("f2", Phase::forward, {a}, {b}, 1));
  t.add_op(op("f3", Phase::forward, {b}, {c}, 1));
  t.add_op(op("loss", Phase::forward, {c}, {d}, 3));
  t.add_op(op("g3", Phase::backward, {d}, {gc}, 1));
  t.add_op(op("g2", Phase::backward, {gc, a}, {ga}, 1));
  t.add_op(op("g1", Phase::backward, {ga, x}, {gx}, 1));
  validate(t, "three-layers");
  return t;
}

double stall_of(const Recorder& rec) {
  double s = 0;
  for (const Event& e : rec.events())
    if (e.kind == EventKind::stall) s += e.end_s - e.start_s;
  return s;
}

}  // namespace

TEST(SwapVdnn, PrefetchHidesTheCopyFully) {
  // 10 GB/s: each 2.5 MB copy takes 0.25 ms. x goes out after f1 ([1, 1.25] ms), a after f2
  // ([2, 2.25]). Backward: a is prefetched as g3 starts (6 ms) and lands at 6.25, before g2
  // at 7; x is prefetched as g2 starts and lands at 7.25, before g1 at 8. No stall: 9 ms.
  Trace t = three_layers();
  auto p = make("vdnn");
  Recorder rec;
  Summary s = simulate(box("1GiB", "10GB/s"), t, *p, rec);
  EXPECT_EQ(s.status, "ok");
  EXPECT_NEAR(s.iteration_time_s, 9e-3, 1e-12);
  EXPECT_NEAR(s.stall_time_s, 0.0, 1e-15);
  EXPECT_EQ(s.swap_out_bytes, 5'000'000u);
  EXPECT_EQ(s.swap_in_bytes, 5'000'000u);
  for (const Event& e : rec.events())
    if (e.kind == EventKind::swap_in) {
      const std::string& name = t.buffers[e.buffer].name;
      EXPECT_NEAR(e.start_s, name == "a" ? 6e-3 : 7e-3, 1e-12) << name;
      EXPECT_NEAR(e.end_s - e.start_s, 0.25e-3, 1e-12) << name;
    }
}

TEST(SwapVdnn, ASlowLinkStallsByTheShortfall) {
  // 2 GB/s: each copy takes 1.25 ms, 0.25 ms more than the 1 ms op it hides behind. a's
  // prefetch runs [6, 7.25]: g2 waits 0.25 ms. x's prefetch was issued at 7 (before g2's
  // wait) but the one engine for host-to-device copies is busy until 7.25, so it runs
  // [7.25, 8.5]; g2 runs [7.25, 8.25], and g1 waits 0.25 ms. Stall = 2 x 0.25 ms.
  Trace t = three_layers();
  auto p = make("vdnn");
  Recorder rec;
  Summary s = simulate(box("1GiB", "2GB/s"), t, *p, rec);
  EXPECT_NEAR(s.stall_time_s, 0.5e-3, 1e-12);
  EXPECT_NEAR(s.iteration_time_s, 9.5e-3, 1e-12);
}

TEST(SwapVdnn, ConvModeOffloadsOnlyConvolutionInputs) {
  Trace t = three_layers();
  t.ops[1].kind = "conv2d";  // f2 reads a: only a qualifies
  auto p = make("vdnn", "{mode: conv}");
  Recorder rec;
  Summary s = simulate(box("1GiB", "10GB/s"), t, *p, rec);
  EXPECT_EQ(s.swap_out_bytes, 2'500'000u);
  EXPECT_EQ(s.policy, "vdnn(conv)");
}

TEST(SwapVdnn, APrefetchNeverGoesBeforeItsSwapOut) {
  // Phases interleave as in an imported trace: a backward-phase op (w.grad) runs before f1.
  // vDNN prefetches a one later-phase op ahead of its reader g: that op is w.grad, before a
  // exists. The prefetch goes to g itself instead (an on-demand copy), after a's swap-out.
  Trace t;
  t.name = "interleaved";
  const BufferId x = t.add_buffer("x", 1000, Category::input);
  const BufferId w = t.add_buffer("w", 1000, Category::activation_grad);
  const BufferId a = t.add_buffer("a", 2'000'000, Category::activation);
  const BufferId b = t.add_buffer("b", 1000, Category::activation);
  const BufferId gw = t.add_buffer("gw", 1000, Category::gradient);
  const BufferId gx = t.add_buffer("gx", 1000, Category::activation_grad);
  t.add_op(op("w.grad", Phase::backward, {w}, {gw}, 1));
  t.add_op(op("f1", Phase::forward, {x}, {a}, 1));
  t.add_op(op("f2", Phase::forward, {a}, {b}, 1));
  t.add_op(op("g", Phase::backward, {a, b}, {gx}, 1));
  validate(t, "interleaved");
  auto p = make("vdnn");
  Recorder rec;
  Summary s = simulate(box("1GiB", "10GB/s"), t, *p, rec);
  ASSERT_EQ(s.status, "ok");
  EXPECT_EQ(s.swap_out_bytes, 2'000'000u);
  EXPECT_EQ(s.swap_in_bytes, 2'000'000u);
  double out_end = -1, in_start = -1;
  for (const Event& e : rec.events()) {
    if (e.kind == EventKind::swap_out && e.buffer == a) out_end = e.end_s;
    if (e.kind == EventKind::swap_in && e.buffer == a) in_start = e.start_s;
  }
  EXPECT_GE(in_start, out_end);
}

TEST(SwapLru, EvictsTheLeastRecentlyUsedBufferTheOpDoesNotNeed) {
  // 6 MB of HBM, c is 2.5 MB. At f3, x (last used by f1) and a (by f2) are resident with b:
  // 5,001,000 B; c does not fit. f3 needs b and c; of x and a, x was used longest ago: it is
  // the victim. f3 waits for the swap-out (0.25 ms at 10 GB/s); later g1 brings x back on
  // demand (another 0.25 ms).
  Trace t = three_layers(2'500'000);
  auto p = make("swap-lru", "{prefetch_lookahead: 0}");
  Recorder rec;
  Summary s = simulate(box("6000000B", "10GB/s"), t, *p, rec);
  ASSERT_EQ(s.status, "ok");
  std::vector<std::string> out, in;
  for (const Event& e : rec.events()) {
    if (e.kind == EventKind::swap_out) out.push_back(t.buffers[e.buffer].name);
    if (e.kind == EventKind::swap_in) in.push_back(t.buffers[e.buffer].name);
  }
  EXPECT_EQ(out, std::vector<std::string>{"x"});
  EXPECT_EQ(in, std::vector<std::string>{"x"});
  EXPECT_NEAR(s.stall_time_s, 0.5e-3, 1e-12);
  EXPECT_NEAR(stall_of(rec), 0.5e-3, 1e-12);
}

TEST(SwapLru, ResidentStateBeyondTheCapStartsOnTheHost) {
  // Three layers with a 4 MB weight w that only g3 reads, under 6 MB: x and w (6.5 MB) do
  // not fit together at the start, so w, used last, starts in host memory (it used to end
  // the run oom before the first op). Then on demand: at g3 (6 ms) w needs 4 MB with x, a
  // and d resident: x and a go out ([6, 6.25], [6.25, 6.5]), w comes in ([6.5, 6.9]); g3
  // runs [6.9, 7.9]. g2 needs a back: w goes out ([7.9, 8.3]), a comes in ([8.3, 8.55]); g2
  // runs [8.55, 9.55]. g1 needs x back ([9.55, 9.8]) and runs [9.8, 10.8]. The reader of a
  // demand copy stalls for the room and the copy together, counted once: 1.8 ms.
  Trace t = three_layers();
  const BufferId w = t.add_buffer("w", 4'000'000, Category::weight, true);
  t.ops[4].inputs.push_back(w);
  validate(t, "three-layers");
  auto p = make("swap-lru", "{prefetch_lookahead: 0}");
  Recorder rec;
  Summary s = simulate(box("6000000B", "10GB/s"), t, *p, rec);
  ASSERT_EQ(s.status, "ok") << (s.oom ? s.oom->op : "");
  std::vector<std::string> out, in;
  for (const Event& e : rec.events()) {
    if (e.kind == EventKind::swap_out) out.push_back(t.buffers[e.buffer].name);
    if (e.kind == EventKind::swap_in) in.push_back(t.buffers[e.buffer].name);
  }
  EXPECT_EQ(out, (std::vector<std::string>{"x", "a", "w"}));
  EXPECT_EQ(in, (std::vector<std::string>{"w", "a", "x"}));
  EXPECT_NEAR(s.iteration_time_s, 10.8e-3, 1e-12);
  EXPECT_NEAR(s.stall_time_s, 1.8e-3, 1e-12);
  EXPECT_NEAR(stall_of(rec), 1.8e-3, 1e-12);
}

TEST(SwapLru, APrefetchWithNoRoomWaitsForItsReader) {
  // x and y (2.5 MB each) are resident in 5.5 MB. f1 (x -> a) evicts y, the only buffer it
  // does not need. Before f2 (x, a -> b) the lookahead asks y back for f3, but x and a are
  // f2's and fill the room: the prefetch is dropped (it used to end the run oom). x and a
  // die at f2; f3 fetches y on demand.
  Trace t;
  t.name = "prefetch";
  BufferId x = t.add_buffer("x", 2'500'000, Category::input);
  BufferId y = t.add_buffer("y", 2'500'000, Category::input);
  BufferId a = t.add_buffer("a", 2'500'000, Category::activation);
  BufferId b = t.add_buffer("b", 1000, Category::activation);
  BufferId c = t.add_buffer("c", 1000, Category::activation);
  t.add_op(op("f1", Phase::forward, {x}, {a}, 1));
  t.add_op(op("f2", Phase::forward, {x, a}, {b}, 1));
  t.add_op(op("f3", Phase::forward, {y, b}, {c}, 1));
  validate(t, "prefetch");
  auto p = make("swap-lru", "{prefetch_lookahead: 2}");
  Recorder rec;
  Summary s = simulate(box("5500000B", "10GB/s"), t, *p, rec);
  ASSERT_EQ(s.status, "ok") << (s.oom ? s.oom->op : "");
  EXPECT_EQ(s.swap_out_bytes, 2'500'000u);
  EXPECT_EQ(s.swap_in_bytes, 2'500'000u);
}

TEST(SwapCapuchin, RemovesTheStallSwapLruHad) {
  // The same 6 MB: capuchin plans from expected access times. x's free time (f1 ends at
  // 1 ms, g1 starts at 8) hides its 0.5 ms round trip, and swapping it alone brings the
  // estimated peak under 6 MB: x leaves after f1 ([1, 1.25]) — before f3 needs the room at
  // 2 ms — and comes back ahead of g1. No stall, where swap-lru stalled 0.5 ms.
  Trace t = three_layers(2'500'000);
  auto p = make("capuchin");
  Recorder rec;
  Summary s = simulate(box("6000000B", "10GB/s"), t, *p, rec);
  ASSERT_EQ(s.status, "ok");
  EXPECT_NEAR(s.stall_time_s, 0.0, 1e-15);
  EXPECT_NEAR(s.iteration_time_s, 9e-3, 1e-12);
  EXPECT_EQ(s.swap_out_bytes, 2'500'000u);
  EXPECT_EQ(s.policy, "capuchin(swapped 1 buffers)");
}

TEST(SwapCapuchin, FallsBackToEvictingWhatIsNextUsedFurthestAhead) {
  // The same 6 MB over 0.5 GB/s: no round trip (10 ms for 2.5 MB) hides in any free time
  // (x's is 7 ms), so the plan swaps nothing. At f3 (2 ms) c does not fit; the fallback
  // evicts x, next used furthest ahead (by g1; a is next used by g2): out [2, 7], f3 [7, 8],
  // loss [8, 11]. As g3 starts, g1 is two ops ahead: x is asked back [11, 16] while g3 and
  // g2 run [11, 13]; g1 waits for it and runs [16, 17]. Stall: 5 + 3 ms. Before the
  // fallback the run ended oom at f3; without its prefetch g1 fetched x on demand, at 19 ms.
  Trace t = three_layers(2'500'000);
  auto p = make("capuchin");
  Recorder rec;
  Summary s = simulate(box("6000000B", "0.5GB/s"), t, *p, rec);
  ASSERT_EQ(s.status, "ok") << (s.oom ? s.oom->op : "");
  EXPECT_EQ(s.policy, "capuchin(swapped 0 buffers)");
  std::vector<std::string> out;
  for (const Event& e : rec.events())
    if (e.kind == EventKind::swap_out) out.push_back(t.buffers[e.buffer].name);
  EXPECT_EQ(out, std::vector<std::string>{"x"});
  EXPECT_NEAR(s.iteration_time_s, 17e-3, 1e-12);
  EXPECT_NEAR(s.stall_time_s, 8e-3, 1e-12);
  std::vector<double> in_start;
  for (const Event& e : rec.events())
    if (e.kind == EventKind::swap_in) in_start.push_back(e.start_s);
  ASSERT_EQ(in_start.size(), 1u);
  EXPECT_NEAR(in_start[0], 11e-3, 1e-12);
}

TEST(SwapCapuchin, SwapsOnlyWhatTheLinkCanCarry) {
  // ResNet-18 at 70% of its peak on a 14 TFLOPS device over 12 GB/s: the link, not the
  // compute, limits what can leave during the forward. The planner follows its copies on the
  // expected timeline (queued swap-outs free their space when they land, swap-ins hold it
  // from their issue), so it swaps little more than the overshoot (459 MB; it moves 522 MB),
  // and stalls less than carrying the overshoot out and back with nothing hidden would
  // (77 ms; it stalls 58). It once moved 1.30 GB with 198 ms of stall: swap-ins made late by
  // the queued swap-outs were moved earlier and earlier, until they were issued before their
  // swap-outs landed, so the estimate saw nothing freed and swapped ever more.
  const ModelInfo* info = find_model("resnet");
  auto node = ConfigNode::parse_text("{model: resnet, depth: 18, batch: 64}", "w.yaml");
  Trace t = info->generate(Params(node, info->params, "model resnet", {"model"}));
  const std::uint64_t peak = exec::baseline_peak_bytes(t);
  const std::uint64_t cap = peak * 7 / 10;
  const std::uint64_t overshoot = peak - cap;
  auto p = make("capuchin");
  Recorder rec;
  Summary s = simulate(box(std::to_string(cap) + "B", "12GB/s", "14TFLOPS"), t, *p, rec);
  ASSERT_EQ(s.status, "ok") << (s.oom ? s.oom->op : "");
  EXPECT_GT(s.swap_out_bytes, 0u);
  EXPECT_LE(s.swap_out_bytes, overshoot * 3 / 2);
  EXPECT_LT(s.stall_time_s, 2 * static_cast<double>(overshoot) / 12e9);
}

// One simulation per process: a test per policy.
class SwapPolicies : public ::testing::TestWithParam<const char*> {};

TEST_P(SwapPolicies, WhatCannotFitEvenWithSwappingEndsOom) {
  // 3 MB of HBM: f1 needs x and a (5 MB) at once; nothing can be swapped while f1 runs.
  const char* name = GetParam();
  Trace t = three_layers();
  auto p = make(name);
  Recorder rec;
  Summary s = simulate(box("3000000B", "10GB/s"), t, *p, rec);
  EXPECT_EQ(s.status, "oom");
  ASSERT_TRUE(s.oom);
  EXPECT_EQ(s.oom->op, "f1");
  EXPECT_EQ(s.oom->requested_bytes, 2'500'000u);
}

INSTANTIATE_TEST_SUITE_P(Each, SwapPolicies, ::testing::Values("vdnn", "swap_lru", "capuchin"),
                         [](const auto& info) { return std::string(info.param); });

// An allocation that waits for swap-outs to land is stamped when it succeeds, not when it
// was first tried: memory samples never go back in time (they did once, with swap-lru).
class SwapClock : public ::testing::TestWithParam<const char*> {};

TEST_P(SwapClock, MemorySamplesNeverGoBackInTime) {
  const ModelInfo* info = find_model("resnet");
  auto node = ConfigNode::parse_text("{model: resnet, depth: 18, batch: 64}", "w.yaml");
  Trace t = info->generate(Params(node, info->params, "model resnet", {"model"}));
  const std::uint64_t cap = exec::baseline_peak_bytes(t) * 9 / 10;  // vdnn's floor is ~82%
  auto p = make(GetParam());
  Recorder rec;
  Summary s = simulate(box(std::to_string(cap) + "B", "12GB/s"), t, *p, rec);
  EXPECT_EQ(s.status, "ok") << (s.oom ? s.oom->op + " " + std::to_string(s.oom->requested_bytes) : "");
  EXPECT_GT(s.swap_out_bytes, 0u);
  ASSERT_FALSE(rec.samples().empty());
  double last = 0;
  std::size_t backwards = 0;
  for (const auto& m : rec.samples()) {
    if (m.time_s < last) ++backwards;
    last = std::max(last, m.time_s);
  }
  EXPECT_EQ(backwards, 0u);
}

INSTANTIATE_TEST_SUITE_P(Each, SwapClock, ::testing::Values("vdnn", "swap_lru", "capuchin"),
                         [](const auto& info) { return std::string(info.param); });
