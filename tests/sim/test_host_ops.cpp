// Ops that run on the host CPU, buffers that start outside the compute tier, and readers on
// one stream waiting for in-place updates on another: the engine features offloading
// policies build on, against timelines worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/core/config.h"
#include "sim/run/run.h"
#include "sim/policy/policy.h"
#include "tests/sim/fixed_plan.h"

using namespace memsim;
using memsim::test::FixedPlan;

namespace {

// GPU 1 TFLOPS, host CPU 0.5 TFLOPS (a 1e9-FLOP op: 1 ms and 2 ms); PCIe 1 GB/s each way
// (1 MB in 1 ms), no latency, memories too fast to matter.
PlatformSpec box(bool host_computes = true) {
  return load_platform(ConfigNode::parse_text(std::string(R"(
name: box
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    tiers:
      hbm: {role: compute, capacity: 1GiB, bandwidth: 100TB/s}
  host:
    kind: cpu
)") + (host_computes ? "    compute: {fp32: 0.5TFLOPS}\n" : "") + R"(    tiers:
      dram: {role: offload, capacity: 64GiB, bandwidth: 100TB/s}
links:
  pcie: {endpoints: [gpu0.hbm, host.dram], bandwidth: 1GB/s}
)",
                                              "box.yaml"));
}

Op op(const std::string& name, std::uint32_t device, std::vector<BufferId> in,
      std::vector<BufferId> out, std::vector<BufferId> updates = {}) {
  Op o;
  o.name = name;
  o.kind = "matmul";
  o.device = device;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  o.updates = std::move(updates);
  o.flops = 1e9;
  return o;
}

const Event* find(const Recorder& rec, EventKind kind, std::uint32_t op_or_buffer) {
  for (const Event& e : rec.events())
    if (e.kind == kind && (kind == EventKind::compute ? e.op : e.buffer) == op_or_buffer) return &e;
  return nullptr;
}

}  // namespace

TEST(HostOps, HostsComeAfterTheComputeDevicesAndComputeInTheirFirstTier) {
  const PlatformSpec p = box();
  EXPECT_EQ(p.compute_devices(), std::vector<std::size_t>{0});
  EXPECT_EQ(p.op_devices(), (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(p.devices[1].operand_tier(), p.find_tier("host.dram"));
  // A host without compute rates runs nothing.
  EXPECT_EQ(box(false).op_devices(), std::vector<std::size_t>{0});
  EXPECT_FALSE(box(false).devices[1].operand_tier());
}

TEST(HostOps, AHostOpRunsAtTheHostRateOnOperandsInHostMemory) {
  // p (1 MB) starts in host DRAM (the plan places it there): `make` on the GPU swaps it in
  // on demand [0,1] and runs [1,2], making g (1 MB). `update` runs on the host (op device
  // 1): g is copied out on demand when it is ready [2,3], then 1e9 FLOPs at 0.5 TFLOPS
  // take [3,5].
  Trace t;
  t.name = "host-op";
  BufferId p = t.add_buffer("p", 1'000'000, Category::weight, true);
  BufferId g = t.add_buffer("g", 1'000'000, Category::gradient);
  t.add_op(op("make", 0, {p}, {g}));
  t.add_op(op("update", 1, {g}, {}));
  validate(t, "host-op");
  const PlatformSpec platform = box();
  const auto dram = static_cast<std::uint32_t>(*platform.find_tier("host.dram"));
  Plan plan;
  plan.placements.push_back({p, dram});
  plan.steps = {{StepKind::compute, 0, 0}, {StepKind::compute, 1, 0}};
  FixedPlan fixed(plan);
  Recorder rec;
  Summary s = simulate(platform, t, fixed, rec);
  ASSERT_EQ(s.status, "ok");
  EXPECT_NEAR(s.iteration_time_s, 5e-3, 1e-12);
  const Event* in = find(rec, EventKind::swap_in, p);
  const Event* out = find(rec, EventKind::swap_out, g);
  const Event* update = find(rec, EventKind::compute, 1);
  ASSERT_TRUE(in && out && update);
  EXPECT_NEAR(in->start_s, 0.0, 1e-12);
  EXPECT_NEAR(in->end_s, 1e-3, 1e-12);
  EXPECT_NEAR(out->start_s, 2e-3, 1e-12);
  EXPECT_NEAR(out->end_s, 3e-3, 1e-12);
  EXPECT_NEAR(update->start_s, 3e-3, 1e-12);
  EXPECT_NEAR(update->end_s, 5e-3, 1e-12);
  EXPECT_EQ(update->device, 1u);
  // The host's wait counts as a stall only from when g exists: before, it waits for the
  // GPU's work, not for memory.
  double host_stall = 0;
  for (const Event& e : rec.events())
    if (e.kind == EventKind::stall && e.device == 1) {
      EXPECT_NEAR(e.start_s, 2e-3, 1e-12);
      host_stall += e.end_s - e.start_s;
    }
  EXPECT_NEAR(host_stall, 1e-3, 1e-12);
  // The GPU computed 1 ms and waited 1 ms for p; the host computed 2 ms.
  EXPECT_NEAR(s.compute_time_s, 1e-3, 1e-12);
  EXPECT_NEAR(s.stall_time_s, 1e-3, 1e-12);
  EXPECT_NEAR(s.host_compute_time_s, 2e-3, 1e-12);
  ASSERT_EQ(s.traffic.size(), 2u);
  EXPECT_EQ(s.traffic[0].from, "gpu0.hbm");
  EXPECT_EQ(s.traffic[0].bytes, 1'000'000u);
  EXPECT_EQ(s.traffic[1].from, "host.dram");
  EXPECT_EQ(s.traffic[1].bytes, 1'000'000u);
}

TEST(HostOps, AReaderWaitsForInPlaceUpdatesIssuedBeforeItOnAnotherStream) {
  // g is made [0,1] and accumulated in place [1,2] on the GPU; the host reads it. It must
  // see the accumulated g: one copy after `accumulate` [2,3], then the host op [3,5] — not
  // a copy as soon as g exists, chased back by the GPU's update.
  Trace t;
  t.name = "update-order";
  BufferId x = t.add_buffer("x", 1000, Category::input);
  BufferId g = t.add_buffer("g", 1'000'000, Category::gradient);
  t.add_op(op("make", 0, {x}, {g}));
  t.add_op(op("accumulate", 0, {x}, {}, {g}));
  t.add_op(op("read", 1, {g}, {}));
  validate(t, "update-order");
  Plan plan;
  for (OpId o = 0; o < 3; ++o) plan.steps.push_back({StepKind::compute, o, 0});
  FixedPlan fixed(plan);
  Recorder rec;
  Summary s = simulate(box(), t, fixed, rec);
  ASSERT_EQ(s.status, "ok");
  EXPECT_NEAR(s.iteration_time_s, 5e-3, 1e-12);
  EXPECT_EQ(s.swap_out_bytes, 1'000'000u);
  EXPECT_EQ(s.swap_in_bytes, 0u);
  const Event* read = find(rec, EventKind::compute, 2);
  ASSERT_TRUE(read);
  EXPECT_NEAR(read->start_s, 3e-3, 1e-12);
}

TEST(HostOps, AnEvictedBufferIsReleasedWithoutACopyAndReadAgainFromItsHome) {
  // p (1 MB) lives in host DRAM. f reads it: swapped in on demand [0,1], f [1,2]; the evict
  // step releases the GPU copy at 2 with no copy back (DRAM holds p again at once); g reads
  // it: in again [2,3], g [3,4].
  Trace t;
  t.name = "evict";
  BufferId p = t.add_buffer("p", 1'000'000, Category::weight, true);
  BufferId a = t.add_buffer("a", 1000, Category::activation);
  BufferId b = t.add_buffer("b", 1000, Category::activation);
  t.add_op(op("f", 0, {p}, {a}));
  t.add_op(op("g", 0, {p, a}, {b}));
  validate(t, "evict");
  const PlatformSpec platform = box();
  const auto dram = static_cast<std::uint32_t>(*platform.find_tier("host.dram"));
  Plan plan;
  plan.placements.push_back({p, dram});
  plan.steps = {{StepKind::compute, 0, 0}, {StepKind::evict, p, dram}, {StepKind::compute, 1, 0}};
  FixedPlan fixed(plan);
  Recorder rec;
  Summary s = simulate(platform, t, fixed, rec);
  ASSERT_EQ(s.status, "ok");
  EXPECT_NEAR(s.iteration_time_s, 4e-3, 1e-12);
  EXPECT_EQ(s.swap_in_bytes, 2'000'000u);
  EXPECT_EQ(s.swap_out_bytes, 0u);
  // DRAM held p at the start, not while it was on the GPU, and again from the eviction on.
  std::vector<std::pair<double, std::uint64_t>> dram_curve;
  for (const MemorySample& m : rec.samples())
    if (m.tier == dram) dram_curve.emplace_back(m.time_s, m.allocated_bytes);
  ASSERT_GE(dram_curve.size(), 4u);
  EXPECT_EQ(dram_curve.back().second, 0u);  // in the GPU again at the end
  bool back_at_2ms = false;
  for (const auto& [time, bytes] : dram_curve) back_at_2ms |= std::abs(time - 2e-3) < 1e-12 && bytes == 1'000'000;
  EXPECT_TRUE(back_at_2ms);
}
