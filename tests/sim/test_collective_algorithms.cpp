// The collective algorithms of sim/collectives/ on SimGrid's network, against times worked
// out by hand from each algorithm's flows. n GPUs hang off one switch by links of bandwidth
// B and latency l, so a route GPU -> switch -> GPU has bandwidth B and latency L = 2l.
#include <gtest/gtest.h>

#include <string>

#include "sim/core/config.h"
#include "sim/policy/policy.h"
#include "sim/run/run.h"
#include "tests/sim/all_reduces.h"
#include "tests/sim/two_nodes.h"

using namespace memsim;

namespace {

constexpr double kB = 100e9;     // link bandwidth, B/s
constexpr double kL = 2e-6;      // a route's latency: two links of 1 us
constexpr std::uint64_t kS = 1'000'000'000;

// n GPUs on one switch; `switch_entry` is how the switch is listed (a name, or a map that
// marks it reducing); `collectives` is the platform's section, if any.
std::string star(int n, const std::string& switch_entry = "sw", const std::string& collectives = "") {
  std::string y = "name: star\ndevices:\n";
  for (int i = 0; i < n; ++i)
    y += "  gpu" + std::to_string(i) +
         ":\n    kind: gpu\n    compute: {fp32: 10TFLOPS}\n    tiers:\n      hbm: {role: compute, "
         "capacity: 80GiB, bandwidth: 100000GB/s}\n";
  y += "switches: [" + switch_entry + "]\nlinks:\n";
  for (int i = 0; i < n; ++i)
    y += "  l" + std::to_string(i) + ": {endpoints: [gpu" + std::to_string(i) + ".hbm, sw], bandwidth: 100GB/s, latency: 1us}\n";
  if (!collectives.empty()) y += "collectives: " + collectives + "\n";
  return y;
}

PlatformSpec platform(const std::string& yaml) { return load_platform(ConfigNode::parse_text(yaml, "platform.yaml")); }

// One all-reduce per size on ranks 0..n-1, one after another (persistent buffers).
Trace all_reduces(const std::vector<std::uint64_t>& sizes, std::uint32_t n) {
  return test::all_reduces(sizes, n, true);
}

// How long each all-reduce took on gpu0, in issue order.
std::vector<double> durations(const PlatformSpec& p, const Trace& t) {
  Recorder rec;
  auto none = find_policy("none")->create(Params(ConfigNode::parse_text("{}", "p.yaml"), find_policy("none")->params, "none"));
  simulate(p, t, *none, rec);
  std::vector<double> out;
  for (const Event& e : rec.events())
    if (e.kind == EventKind::comm && e.device == 0) out.push_back(e.end_s - e.start_s);
  return out;
}

double ring_all_reduce(double n, double s) { return 2 * (n - 1) / n * s / kB + 2 * (n - 1) * kL; }

}  // namespace

TEST(CollectiveAlgorithms, TreeAllReduceTakesTheTreesDepthUpAndDownInLatency) {
  // Four ranks: tree one is 0 over 1 and 2, 1 over 3; tree two (the units reversed) 3 over 2
  // and 1, 2 over 0. Each edge carries S/2 each way, so every link carries one flow of S/2
  // and one of S (two edges between the same pair) each way: 3S/2 in all, as a ring's
  // 2(n-1)/n S. The two flows share the link (S/2 lands at S/B), then the larger one has
  // it alone: 3S/2 / B. Latency: 2 floor(log2 4) = 4 steps where the ring takes 6.
  const auto took = durations(platform(star(4, "sw", "{algorithms: {all_reduce: tree}}")), all_reduces({kS}, 4));
  ASSERT_EQ(took.size(), 1u);
  EXPECT_NEAR(took[0], 1.5 * kS / kB + 4 * kL, 1e-9);
  EXPECT_LT(took[0], ring_all_reduce(4, kS));
}

TEST(CollectiveAlgorithms, NvlsAllReduceSendsAndReceivesSOnceInOneStep) {
  // The switch reduces: every GPU's link carries S up and S down, one step.
  const auto took = durations(platform(star(4, "{name: sw, reduces: true}", "{algorithms: {all_reduce: nvls}}")),
                              all_reduces({kS}, 4));
  ASSERT_EQ(took.size(), 1u);
  EXPECT_NEAR(took[0], kS / kB + kL, 1e-9);
}

TEST(CollectiveAlgorithms, NvlsOnASwitchThatDoesNotReduceFallsBackToTheRing) {
  const auto took = durations(platform(star(4, "sw", "{algorithms: {all_reduce: nvls}}")), all_reduces({kS}, 4));
  ASSERT_EQ(took.size(), 1u);
  EXPECT_NEAR(took[0], ring_all_reduce(4, kS), 1e-9);
}

TEST(CollectiveAlgorithms, RulesPickTheTreeBelowTheirSizeAndTheRingAbove) {
  const std::uint64_t small = 512 * 1024, large = 4 * 1024 * 1024;
  const auto took = durations(platform(star(4, "sw", "{algorithms: {all_reduce: [{below: 1MiB, use: tree}, {use: ring}]}}")),
                              all_reduces({small, large, small}, 4));
  ASSERT_EQ(took.size(), 3u);
  EXPECT_NEAR(took[0], 1.5 * small / kB + 4 * kL, 1e-12);
  EXPECT_NEAR(took[1], ring_all_reduce(4, large), 1e-12);
  EXPECT_NEAR(took[2], 1.5 * small / kB + 4 * kL, 1e-12);
}

TEST(CollectiveAlgorithms, AutoPicksTheFastestOnIdleLinks) {
  // Without a reducing switch the tree (the ring's bandwidth, fewer steps); with one, NVLS.
  const auto tree = durations(platform(star(4, "sw", "{algorithms: {all_reduce: auto}}")), all_reduces({kS}, 4));
  ASSERT_EQ(tree.size(), 1u);
  EXPECT_NEAR(tree[0], 1.5 * kS / kB + 4 * kL, 1e-9);
}

TEST(CollectiveAlgorithms, AutoPicksNvlsWhereTheSwitchReduces) {
  const auto nvls = durations(platform(star(4, "{name: sw, reduces: true}", "{algorithms: {all_reduce: auto}}")),
                              all_reduces({kS}, 4));
  ASSERT_EQ(nvls.size(), 1u);
  EXPECT_NEAR(nvls[0], kS / kB + kL, 1e-9);
}

TEST(CollectiveAlgorithms, HierarchicalAllReduceAcrossTwoNodes) {
  // Two nodes of two GPUs: links of 1000 GB/s and 1 us to the node's switch, a NIC of
  // 10 GB/s and 5 us per GPU to the fabric's. Within a node a route is 1000 GB/s and 2 us;
  // between nodes 10 GB/s and 10 us. The all-reduce of S over ranks 0-3:
  //   reduce-scatter within each node: each rank sends S/2 to its peer, 1 step;
  //   all-reduce along the rails {0, 2} and {1, 3}: each rank's shard S/2 as a ring of 2,
  //     2(2-1)/2 S/2 = S/2 over the NIC, 2 steps;
  //   all-gather within each node: as the reduce-scatter.
  // The rings the default runs (0-1-2-3, 1-0-3-2, S/2 each) put 3/4 S on each NIC, 6 steps.
  const std::string y = test::two_nodes_yaml("collectives:\n  algorithms: {all_reduce: hierarchical}\n");
  const auto took = durations(platform(y), all_reduces({kS}, 4));
  ASSERT_EQ(took.size(), 1u);
  const double within = (kS / 2.0) / 1000e9 + 2e-6;
  const double across = (kS / 2.0) / 10e9 + 2 * 10e-6;
  EXPECT_NEAR(took[0], within + across + within, 1e-9);
  EXPECT_LT(took[0], 0.75 * kS / 10e9 + 6 * 10e-6);
}

TEST(CollectiveAlgorithms, RingExchangeSendsSToTheNextRankInOneStep) {
  // Context parallelism's k/v ring (ring_exchange, run by direct): every rank sends S to the
  // next one and receives S from the one before, all at once. Each GPU's link carries S up
  // and S down: S/B + L, where an all-gather of the same blocks (n S in all) would take
  // (n - 1) steps.
  Trace t = all_reduces({kS}, 4);
  for (Op& op : t.ops) op.kind = "ring_exchange";
  const auto took = durations(platform(star(4)), t);
  ASSERT_EQ(took.size(), 1u);
  EXPECT_NEAR(took[0], kS / kB + kL, 1e-9);
}
