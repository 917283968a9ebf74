// The memory hierarchy in the engine: routes over several links, shared switches, scratch
// tiers, bulk-synchronous devices and tiled memory, against answers worked out by hand.
#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/core/presets.h"
#include "sim/run/run.h"
#include "sim/policy/policy.h"
#include "tests/sim/fixed_plan.h"
#include "tests/platform_helpers.h"

using namespace memsim;
using memsim::test::FixedPlan;

namespace {

PlatformSpec platform(const std::string& yaml) {
  return load_platform(ConfigNode::parse_text(yaml, "test.yaml"));
}

Trace one_buffer(std::uint64_t bytes) {
  Trace t;
  t.name = "one";
  t.add_buffer("big", bytes, Category::activation, true);
  return t;
}

std::unique_ptr<Policy> none() {
  auto node = ConfigNode::parse_text("{}", "test");
  return find_policy("none")->create(Params(node, {}, "none"));
}

}  // namespace

TEST(HierarchyRoutes, ACopyOverTwoLinksTakesTheNarrowerAndBothLatencies) {
  // gpu0.hbm -(10 GB/s, 5 us)- sw -(20 GB/s, 3 us)- host.dram: 1 GB takes 1e9/10e9 + 8 us.
  auto p = platform(R"(
name: two-links
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    tiers:
      hbm: {role: compute, capacity: 4GiB, bandwidth: 1000GB/s}
  host:
    kind: cpu
    tiers:
      dram: {role: offload, capacity: 64GiB, bandwidth: 100GB/s}
switches: [sw]
links:
  up: {endpoints: [gpu0.hbm, sw], bandwidth: 10GB/s, latency: 5us}
  down: {endpoints: [sw, host.dram], bandwidth: 20GB/s, latency: 3us}
)");
  Trace t = one_buffer(1'000'000'000);
  FixedPlan plan(Plan{{{StepKind::swap_out, 0, 1}}});
  Recorder rec;
  Summary s = simulate(p, t, plan, rec);
  ASSERT_EQ(rec.events().size(), 1u);
  EXPECT_NEAR(rec.events()[0].end_s - rec.events()[0].start_s, 0.1 + 8e-6, 1e-12);
  EXPECT_EQ(s.swap_out_bytes, 1'000'000'000u);
}

TEST(HierarchyRoutes, ThroughHostMemoryToNvme) {
  // GPU -> switch -> host DRAM -> NVMe: three links (30, 20 and 5 GB/s; 1 + 1 + 20 us); the
  // 5 GB/s drive link decides: 1 GB in 0.2 s + 22 us.
  auto p = platform(R"(
name: to-nvme
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    tiers:
      hbm: {role: compute, capacity: 4GiB, bandwidth: 1000GB/s}
  host:
    kind: cpu
    tiers:
      dram: {role: offload, capacity: 64GiB, bandwidth: 100GB/s}
      nvme: {role: offload, capacity: 1TiB, bandwidth: 7GB/s}
switches: [sw]
links:
  a: {endpoints: [gpu0.hbm, sw], bandwidth: 30GB/s, latency: 1us}
  b: {endpoints: [sw, host.dram], bandwidth: 20GB/s, latency: 1us}
  c: {endpoints: [host.dram, host.nvme], bandwidth: 5GB/s, latency: 20us}
)");
  Trace t = one_buffer(1'000'000'000);
  FixedPlan plan(Plan{{{StepKind::swap_out, 0, 2}}});
  Recorder rec;
  Summary s = simulate(p, t, plan, rec);
  ASSERT_EQ(rec.events().size(), 1u);
  EXPECT_NEAR(rec.events()[0].end_s, 0.2 + 22e-6, 1e-12);
  EXPECT_EQ(s.tiers[2].name, "host.nvme");
  EXPECT_EQ(s.tiers[2].usage.allocated_bytes, 1'000'000'000u);
}

TEST(HierarchyRoutes, SpaceIsFreedOnlyWhenTheSwapOutEnds) {
  // 1 GB over 10 GB/s: the GPU holds the buffer until 0.1 s + 5 us, the host from 0.
  auto p = platform(R"(
name: one-link
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    tiers:
      hbm: {role: compute, capacity: 4GiB, bandwidth: 1000GB/s}
  host:
    kind: cpu
    tiers:
      dram: {role: offload, capacity: 64GiB, bandwidth: 100GB/s}
links:
  pcie: {endpoints: [gpu0.hbm, host.dram], bandwidth: 10GB/s, latency: 5us}
)");
  Trace t = one_buffer(1'000'000'000);
  FixedPlan plan(Plan{{{StepKind::swap_out, 0, 1}}});
  Recorder rec;
  simulate(p, t, plan, rec);
  // Samples: gpu takes it at 0; host reserves at 0; gpu releases at the end.
  const auto m = rec.samples_vector();
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].tier, 0u);
  EXPECT_EQ(m[0].allocated_bytes, 1'000'000'000u);
  EXPECT_EQ(m[1].tier, 1u);
  EXPECT_EQ(m[1].time_s, 0.0);
  EXPECT_EQ(m[1].allocated_bytes, 1'000'000'000u);
  EXPECT_EQ(m[2].tier, 0u);
  EXPECT_NEAR(m[2].time_s, 0.1 + 5e-6, 1e-12);
  EXPECT_EQ(m[2].allocated_bytes, 0u);
}

TEST(HierarchyRoutes, GpusPreferNvlinkToPcie) {
  // Two GPUs behind one PCIe switch and joined by NVLink: a peer copy takes the wide path.
  auto p = platform(R"(
name: pair
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    tiers:
      hbm: {role: compute, capacity: 4GiB, bandwidth: 2000GB/s}
  gpu1:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    tiers:
      hbm: {role: compute, capacity: 4GiB, bandwidth: 2000GB/s}
switches: [sw]
links:
  p0: {endpoints: [gpu0.hbm, sw], bandwidth: 30GB/s, latency: 1us}
  p1: {endpoints: [gpu1.hbm, sw], bandwidth: 30GB/s, latency: 1us}
  nvlink: {endpoints: [gpu0.hbm, gpu1.hbm], bandwidth: 300GB/s, latency: 2us}
)");
  Trace t = one_buffer(3'000'000'000);
  FixedPlan plan(Plan{{{StepKind::swap_out, 0, 1}}});
  Recorder rec;
  simulate(p, t, plan, rec);
  ASSERT_EQ(rec.events().size(), 1u);
  EXPECT_NEAR(rec.events()[0].end_s, 0.01 + 2e-6, 1e-12);
}

TEST(HierarchyMultiDevice, EightA100ReplicasSwapThroughFourSharedSwitches) {
  // dgx-a100: each GPU's own link is 31.5 GB/s, but two GPUs share each switch's 31.5 GB/s
  // uplink, so eight simultaneous 1 GB swap-outs each get 15.75 GB/s (host memory, 409.6
  // GB/s, is not the limit: 8 x 15.75 = 126 GB/s). Each takes 1e9 / 15.75e9 + 2 x 1 us.
  auto p = test::preset_platform("dgx-a100");
  std::vector<Trace> replicas(8, one_buffer(1'000'000'000));
  std::vector<std::string> names;
  for (int i = 0; i < 8; ++i) names.push_back("gpu" + std::to_string(i));
  Trace t = combine_per_device(replicas, names);
  const auto dram = static_cast<std::uint32_t>(*p.find_tier("host.dram"));
  Plan plan;
  for (BufferId b = 0; b < 8; ++b) plan.steps.push_back({StepKind::swap_out, b, dram});
  FixedPlan fixed(plan);
  Recorder rec;
  Summary s = simulate(p, t, fixed, rec);
  ASSERT_EQ(rec.events().size(), 8u);
  for (const Event& e : rec.events()) EXPECT_NEAR(e.end_s - e.start_s, 1e9 / 15.75e9 + 2e-6, 1e-12);
  EXPECT_EQ(s.swap_out_bytes, 8'000'000'000u);
  // Alone, one GPU's swap-out runs at its own link's 31.5 GB/s.
}

TEST(HierarchyMultiDevice, ReplicasKeepTheirOwnMemory) {
  auto p = test::preset_platform("box4-v100-shared-pcie");
  Trace one;
  one.name = "op";
  BufferId x = one.add_buffer("x", 1000, Category::input);
  BufferId y = one.add_buffer("y", 3000, Category::activation);
  Op op;
  op.name = "f";
  op.kind = "relu";
  op.inputs = {x};
  op.outputs = {y};
  op.bytes_moved = 4000;
  one.add_op(op);
  Trace t = combine_per_device(std::vector<Trace>(4, one), {"gpu0", "gpu1", "gpu2", "gpu3"});
  auto pol = none();
  Recorder rec;
  Summary s = simulate(p, t, *pol, rec);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(s.tiers[d].usage.peak_allocated_bytes, 4000u) << d;
  // The four run at once: the step takes one op's time (4000 B / 720 GB/s + 5 us).
  EXPECT_NEAR(s.iteration_time_s, 4000 / (900e9 * 0.8) + 5e-6, 1e-15);
}

TEST(HierarchyScratch, WorkspaceGoesToScratchWhenItFits) {
  // A 1 MiB scratch tier: a 512 KiB workspace lands there, a 2 MiB one in HBM.
  auto p = platform(R"(
name: tpu-like
devices:
  tpu0:
    kind: tpu
    compute: {bf16: 100TFLOPS}
    tiers:
      hbm: {role: compute, capacity: 1GiB, bandwidth: 1000GB/s}
      vmem: {role: scratch, capacity: 1MiB, bandwidth: 8000GB/s}
)");
  Trace t;
  t.name = "ws";
  BufferId x = t.add_buffer("x", 1000, Category::input);
  BufferId y = t.add_buffer("y", 1000, Category::activation);
  BufferId z = t.add_buffer("z", 1000, Category::activation);
  Op small;
  small.name = "small";
  small.kind = "matmul";
  small.dtype = DType::bf16;
  small.inputs = {x};
  small.outputs = {y};
  small.workspace_bytes = 512 * 1024;
  t.add_op(small);
  Op big = small;
  big.name = "big";
  big.inputs = {y};
  big.outputs = {z};
  big.workspace_bytes = 2 * 1024 * 1024;
  t.add_op(big);
  auto pol = none();
  Recorder rec;
  Summary s = simulate(p, t, *pol, rec);
  EXPECT_EQ(s.tiers[1].usage.peak_allocated_bytes, 512u * 1024);             // vmem
  // hbm: x dies after small, so big holds y and z and its 2 MiB workspace.
  EXPECT_EQ(s.tiers[0].usage.peak_allocated_bytes, 2000u + 2 * 1024 * 1024);
}

TEST(HierarchyBsp, ExchangeAndSyncAddToEachOp) {
  // 1e9 FLOPs at 1 TFLOPS = 1 ms, + 1 us launch, + 0.5 us sync, + 8e6 B of input at 8 TB/s
  // (1 us) = 1.0025 ms.
  auto p = platform(R"(
name: bsp
devices:
  ipu0:
    kind: ipu
    compute: {fp32: 1TFLOPS}
    launch_overhead: 1us
    exchange: {bandwidth: 8TB/s, sync: 0.5us}
    tiers:
      sram: {role: compute, allocator: tiled, tiles: 16, tile_capacity: 4MiB, bandwidth: 100TB/s}
)");
  Trace t;
  t.name = "bsp";
  BufferId x = t.add_buffer("x", 8'000'000, Category::input);
  BufferId y = t.add_buffer("y", 1000, Category::activation);
  Op op;
  op.name = "f";
  op.kind = "matmul";
  op.inputs = {x};
  op.outputs = {y};
  op.flops = 1e9;
  t.add_op(op);
  auto pol = none();
  Recorder rec;
  Summary s = simulate(p, t, *pol, rec);
  EXPECT_NEAR(s.iteration_time_s, 1e-3 + 1e-6 + 0.5e-6 + 1e-6, 1e-15);
}

TEST(HierarchyTiles, FitsByTotalBytesButNotPerTileIsAnOomNamingTheTile) {
  // 4 tiles of 1000 B, grain 1000 B. w (900 B) takes tile 0, x (900 B) tile 1, y (1500 B)
  // tiles 2-3 (750 each); z (300 B) would go to the next tile, wrapping to tile 0, which has
  // only 100 B left: 3600 B of 4000 B would be in use, but tile 0 is full.
  auto p = platform(R"(
name: tiles
devices:
  ipu0:
    kind: ipu
    compute: {fp32: 1TFLOPS}
    tiers:
      sram: {role: compute, allocator: tiled, tiles: 4, tile_capacity: 1000B, grain: 1000B, bandwidth: 100TB/s}
)");
  Trace t;
  t.name = "tiles";
  BufferId w = t.add_buffer("w", 900, Category::weight, true);
  BufferId x = t.add_buffer("x", 900, Category::input);
  BufferId y = t.add_buffer("y", 1500, Category::activation);
  BufferId z = t.add_buffer("z", 300, Category::activation);
  Op f;
  f.name = "f";
  f.kind = "matmul";
  f.inputs = {x, w};
  f.outputs = {y};
  t.add_op(f);
  Op g;
  g.name = "g";
  g.kind = "relu";
  g.inputs = {y, x};
  g.outputs = {z};
  t.add_op(g);
  auto pol = none();
  Recorder rec;
  Summary s = simulate(p, t, *pol, rec);
  EXPECT_EQ(s.status, "oom");
  ASSERT_TRUE(s.oom);
  EXPECT_EQ(s.oom->op, "g");
  EXPECT_EQ(s.oom->allocated_bytes, 3300u);
  EXPECT_NE(s.oom->reason.find("tile 0"), std::string::npos) << s.oom->reason;
  ASSERT_EQ(s.tiers[0].tile_peaks.size(), 4u);
  EXPECT_EQ(s.tiers[0].tile_peaks[0], 900u);
  EXPECT_EQ(s.tiers[0].tile_peaks[2], 750u);
}

namespace {
PlatformSpec small_gpu(const std::string& capacity, const std::string& allocator) {
  return platform(R"(
name: small
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    tiers:
      hbm: {role: compute, capacity: )" + capacity + ", bandwidth: 1000GB/s, allocator: " +
                  allocator + "}\n");
}
}  // namespace

TEST(HierarchyAllocators, BestFitFragmentationIsAnOomThatSaysSo) {
  // 100 B of HBM. p, q, r, s (25 B each) are resident at addresses 0, 25, 50, 75; f reads q
  // and s for the last time, leaving holes at 25 and 75: 50 B free, but g's 40 B output
  // fits in no hole.
  Trace t;
  t.name = "frag";
  BufferId p = t.add_buffer("p", 25, Category::weight, true);
  BufferId q = t.add_buffer("q", 25, Category::input);
  BufferId r = t.add_buffer("r", 25, Category::input);
  BufferId s = t.add_buffer("s", 25, Category::input);
  BufferId e = t.add_buffer("e", 40, Category::activation);
  Op f;
  f.name = "f";
  f.kind = "relu";
  f.inputs = {q, s};
  t.add_op(f);
  Op g;
  g.name = "g";
  g.kind = "relu";
  g.inputs = {p, r};
  g.outputs = {e};
  t.add_op(g);
  auto pol = none();
  Recorder rec;
  Summary sum = simulate(small_gpu("100B", "best_fit"), t, *pol, rec);
  ASSERT_EQ(sum.status, "oom");
  EXPECT_EQ(sum.oom->op, "g");
  EXPECT_EQ(sum.oom->allocated_bytes, 50u);
  EXPECT_EQ(sum.oom->largest_free_block, 25u);
  EXPECT_EQ(sum.oom->reason, "fragmentation: 50 B free in total but the largest hole is 25 B");
}

TEST(HierarchyAllocators, CachingReservesWholeSegments) {
  // Three 1000 B buffers under the caching allocator: each rounds to 1024 B, all from one
  // 2 MiB small-pool segment. Allocated peaks at 3 x 1024; reserved is the segment.
  Trace t;
  t.name = "cache";
  BufferId x = t.add_buffer("x", 1000, Category::input);
  BufferId y = t.add_buffer("y", 1000, Category::activation);
  BufferId z = t.add_buffer("z", 1000, Category::activation);
  Op f;
  f.name = "f";
  f.kind = "relu";
  f.inputs = {x};
  f.outputs = {y};
  t.add_op(f);
  Op g;
  g.name = "g";
  g.kind = "relu";
  g.inputs = {y, x};
  g.outputs = {z};
  t.add_op(g);
  auto pol = none();
  Recorder rec;
  Summary sum = simulate(small_gpu("1GiB", "caching"), t, *pol, rec);
  EXPECT_EQ(sum.status, "ok");
  EXPECT_EQ(sum.tiers[0].usage.peak_allocated_bytes, 3u * 1024);
  EXPECT_EQ(sum.tiers[0].usage.peak_reserved_bytes, 2u * 1024 * 1024);
  EXPECT_EQ(sum.tiers[0].usage.reserved_bytes, 2u * 1024 * 1024);  // cached after the frees
  EXPECT_EQ(sum.tiers[0].usage.allocated_bytes, 0u);
  // At the peak the segment's remainder was the largest free block in the small pool, and a
  // new segment could still be taken: the largest request that fitted was what 1 GiB minus
  // the 2 MiB segment allows.
  EXPECT_GT(sum.tiers[0].usage.largest_free_at_peak_bytes, 0u);
}
