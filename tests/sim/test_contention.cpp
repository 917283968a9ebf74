// Replicas that swap with vdnn on dgx-a100 contend for the PCIe switches' uplinks: two GPUs
// share each switch, so while both copy each gets half the uplink. The slowdown a replica
// sees is worked out here from the preset's link bandwidths. (These caught SimGrid 3.32's
// lazy bandwidth updates letting some swap-ins run at host-memory speed; the engine now
// configures network/optim:Full.)
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/core/config.h"
#include "sim/run/run.h"
#include "sim/policy/policy.h"
#include "tests/platform_helpers.h"

using namespace memsim;

namespace {

constexpr std::uint64_t kMapBytes = 630'000'000;  // 20 ms at 31.5 GB/s

// The copies' sharing of the PCIe tree is what these check: no host issuing the ops (its
// per-step and per-op times, docs/time-model.md, would add a few ms to every step).
PlatformSpec dgx() { return test::without_host_overhead(test::preset_platform("dgx-a100")); }

double link_bandwidth(const PlatformSpec& p, const std::string& name) {
  for (const LinkSpec& l : p.links)
    if (l.name == name) return l.bandwidth_Bps;
  ADD_FAILURE() << "no link " << name;
  return 0;
}

// A copy-bound step: f1 makes a 630 MB feature map A that only f2 and g2 read; the ops take
// next to nothing (1 MFLOP + 5 us launch). vdnn swaps A out after f2; its prefetch before
// g3 finds the swap-out still under way, so g2 waits for it and brings A back on demand:
// the step is two copies of A, end to end, plus a few tens of microseconds.
Trace copy_bound() {
  Trace t;
  t.name = "copy-bound";
  BufferId x = t.add_buffer("x", 1000, Category::input);
  BufferId a = t.add_buffer("A", kMapBytes, Category::activation);
  BufferId b = t.add_buffer("B", 1000, Category::activation);
  BufferId c = t.add_buffer("C", 1000, Category::activation);
  BufferId gb = t.add_buffer("gB", 1000, Category::activation_grad);
  BufferId ga = t.add_buffer("gA", 1000, Category::activation_grad);
  auto add = [&](const char* name, Phase phase, std::vector<BufferId> in, BufferId out) {
    Op o;
    o.name = name;
    o.kind = "matmul";
    o.phase = phase;
    o.inputs = std::move(in);
    o.outputs = {out};
    o.flops = 1e6;
    t.add_op(std::move(o));
  };
  add("f1", Phase::forward, {x}, a);
  add("f2", Phase::forward, {a}, b);
  add("f3", Phase::forward, {b}, c);
  add("g3", Phase::backward, {c}, gb);
  add("g2", Phase::backward, {gb, a}, ga);
  return t;
}

// Each GPU's step: the end of its last compute or copy (GPUs come first in dgx-a100, so a
// compute slot and a platform device index agree for them).
std::vector<double> step_per_gpu(const Recorder& rec) {
  std::vector<double> end(8, 0.0);
  for (const Event& e : rec.events())
    if (e.device < 8) end[e.device] = std::max(end[e.device], e.end_s);
  return end;
}

Summary run_vdnn(const PlatformSpec& p, const std::vector<Trace>& per_gpu, Recorder& rec) {
  std::vector<std::string> names;
  for (int i = 0; i < 8; ++i) names.push_back("gpu" + std::to_string(i));
  Trace t = combine_per_device(per_gpu, names);
  auto node = ConfigNode::parse_text("{mode: all}", "p.yaml");
  auto policy = find_policy("vdnn")->create(Params(node, find_policy("vdnn")->params, "vdnn"));
  return simulate(p, t, *policy, rec);
}

}  // namespace

TEST(Contention, EightVdnnReplicasRunAtHalfTheUplink) {
  // Alone, a GPU copies at min(its link, the uplink) = 31.5 GB/s: 2 x 20 ms. Eight replicas
  // copy at the same moments, two per switch: min(31.5, 31.5 / 2) = 15.75 GB/s, 2 x 40 ms.
  const PlatformSpec p = dgx();
  const double own = link_bandwidth(p, "pcie-gpu0");
  const double uplink = link_bandwidth(p, "pcie-up0");
  const double alone = 2 * kMapBytes / std::min(own, uplink);
  const double shared = 2 * kMapBytes / std::min(own, uplink / 2);
  Recorder rec;
  Summary s = run_vdnn(p, std::vector<Trace>(8, copy_bound()), rec);
  ASSERT_EQ(s.status, "ok");
  EXPECT_EQ(s.swap_out_bytes, 8 * kMapBytes);
  EXPECT_EQ(s.swap_in_bytes, 8 * kMapBytes);
  for (double step : step_per_gpu(rec)) {
    EXPECT_NEAR(step, shared, 100e-6);  // launches and link latencies: tens of microseconds
    EXPECT_NEAR(step / alone, std::min(own, uplink) / std::min(own, uplink / 2), 0.01);
  }
}

TEST(Contention, AGpuWhosePartnerIsIdleRunsAtTheFullUplink) {
  // One simulation, both cases: gpu1 has no work, so gpu0 has switch 0 to itself; gpu2..7
  // share theirs in pairs. gpu0 is the replica alone; the others are slower by the ratio of
  // the bandwidths (host memory, 409.6 GB/s, is not the limit: 31.5 + 6 x 15.75 GB/s).
  const PlatformSpec p = dgx();
  const double own = link_bandwidth(p, "pcie-gpu2");
  const double uplink = link_bandwidth(p, "pcie-up1");
  std::vector<Trace> per_gpu(8, copy_bound());
  per_gpu[1] = Trace{};
  per_gpu[1].name = "idle";
  Recorder rec;
  Summary s = run_vdnn(p, per_gpu, rec);
  ASSERT_EQ(s.status, "ok");
  const auto step = step_per_gpu(rec);
  EXPECT_NEAR(step[0], 2 * kMapBytes / std::min(own, uplink), 100e-6);
  EXPECT_EQ(step[1], 0.0);
  for (int g = 2; g < 8; ++g) {
    EXPECT_NEAR(step[g] / step[0], std::min(own, uplink) / std::min(own, uplink / 2), 0.01) << g;
    EXPECT_NEAR(step[g], step[2], 1e-12) << g;
  }
}
