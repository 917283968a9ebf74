// Collectives on SimGrid's network, against times worked out by hand. n GPUs hang off one
// switch by links of bandwidth B and latency l each, so a route GPU -> switch -> GPU has
// bandwidth B and latency L = 2l. A ring all-reduce of S bytes then takes
// 2(n-1)/n S/B + 2(n-1) L; an all-gather or a reduce-scatter (n-1)/n S/B + (n-1) L.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "sim/core/config.h"
#include "sim/policy/policy.h"
#include "sim/run/run.h"
#include "tests/sim/two_nodes.h"

using namespace memsim;

namespace {

constexpr double kB = 100e9;     // link bandwidth, B/s
constexpr double kLink = 1e-6;   // one link's latency
constexpr double kL = 2 * kLink; // a route's: two links
constexpr std::uint64_t kS = 1'000'000'000;

// n GPUs on one switch (duplex: full or half). Tier memory is far faster than the links.
std::string star(int n, const std::string& duplex = "full") {
  std::string y = "name: star\ndevices:\n";
  for (int i = 0; i < n; ++i)
    y += "  gpu" + std::to_string(i) +
         ":\n    kind: gpu\n    compute: {fp32: 10TFLOPS}\n    tiers:\n      hbm: {role: compute, "
         "capacity: 80GiB, bandwidth: 100000GB/s}\n";
  y += "switches: [sw]\nlinks:\n";
  for (int i = 0; i < n; ++i)
    y += "  l" + std::to_string(i) + ": {endpoints: [gpu" + std::to_string(i) +
         ".hbm, sw], bandwidth: 100GB/s, latency: 1us, duplex: " + duplex + "}\n";
  return y;
}

PlatformSpec platform(const std::string& yaml) {
  return load_platform(ConfigNode::parse_text(yaml, "platform.yaml"));
}

// One collective per (device, group) listed: each device's op updates a buffer of its own.
struct Call {
  std::uint32_t device;
  std::string group;
};
Trace collectives(const std::string& kind, std::uint64_t bytes, const std::vector<ProcessGroup>& groups,
                  const std::vector<Call>& calls) {
  Trace t;
  t.name = "collectives";
  t.groups = groups;
  for (const Call& c : calls) {
    const BufferId b = t.add_buffer("buf" + std::to_string(c.device), bytes, Category::comm, true);
    t.buffers[b].device = c.device;
    Op op;
    op.name = kind + "@gpu" + std::to_string(c.device);
    op.kind = kind;
    op.phase = Phase::backward;
    op.device = c.device;
    op.updates = {b};
    op.message_bytes = bytes;
    op.group = c.group;
    t.add_op(std::move(op));
  }
  return t;
}

ProcessGroup group(const std::string& name, std::vector<std::uint32_t> ranks) { return {name, std::move(ranks)}; }

std::vector<Call> every(const std::string& g, std::uint32_t n) {
  std::vector<Call> calls;
  for (std::uint32_t d = 0; d < n; ++d) calls.push_back({d, g});
  return calls;
}

Summary simulate_none(const PlatformSpec& p, const Trace& t, Recorder& rec, bool exact = false) {
  auto policy = find_policy("none")->create(Params(ConfigNode::parse_text("{}", "p.yaml"), find_policy("none")->params, "none"));
  return simulate(p, t, *policy, rec, exact);
}

double comm_end(const Recorder& rec) {
  double end = 0;
  for (const Event& e : rec.events())
    if (e.kind == EventKind::comm) end = std::max(end, e.end_s);
  return end;
}

}  // namespace

TEST(Collectives, RingAllReduceTakesTwoNMinusOneOverNTimesSOverBPlusLatencies) {
  const std::uint32_t n = 4;
  Recorder rec;
  const Summary s = simulate_none(platform(star(n)), collectives("all_reduce", kS, {group("g", {0, 1, 2, 3})}, every("g", n)), rec);
  const double expected = 2.0 * (n - 1) / n * kS / kB + 2.0 * (n - 1) * kL;
  EXPECT_NEAR(comm_end(rec), expected, 1e-9);
  EXPECT_NEAR(s.comm_time_s, expected, 1e-9);
  EXPECT_NEAR(s.exposed_comm_time_s, expected, 1e-9);  // nothing computes meanwhile
  ASSERT_EQ(s.collectives.size(), 1u);
  EXPECT_EQ(s.collectives[0].kind, "all_reduce");
  EXPECT_EQ(s.collectives[0].bytes, kS);
  // Each link carries each rank's 2(n-1) chunks of S/n once in each direction.
  ASSERT_EQ(s.links.size(), n);
  EXPECT_EQ(s.links[0].bytes_forward, 2 * (n - 1) * (kS / n));
  EXPECT_EQ(s.links[0].bytes_backward, 2 * (n - 1) * (kS / n));
}

// (One simulation per test: SimGrid's engine is a process singleton.)
class RingSteps : public ::testing::TestWithParam<std::tuple<std::string, std::uint32_t>> {};

TEST_P(RingSteps, AllGatherAndReduceScatterTakeNMinusOneSteps) {
  const auto& [kind, n] = GetParam();
  Recorder rec;
  std::vector<std::uint32_t> ranks;
  for (std::uint32_t r = 0; r < n; ++r) ranks.push_back(r);
  simulate_none(platform(star(static_cast<int>(n))), collectives(kind, kS, {group("g", ranks)}, every("g", n)), rec);
  const double expected = (n - 1.0) / n * kS / kB + (n - 1.0) * kL;
  EXPECT_NEAR(comm_end(rec), expected, 1e-9) << kind << " over " << n;
}

INSTANTIATE_TEST_SUITE_P(Collectives, RingSteps,
                         ::testing::Combine(::testing::Values("all_gather", "reduce_scatter"),
                                            ::testing::Values(2u, 8u)));

TEST(Collectives, HalfDuplexLinksShareTheirBandwidthBetweenBothDirections) {
  // The ring sends up and receives down each GPU's link: full duplex gives each direction B
  // (the first test), half duplex shares B between them, so the bandwidth term doubles.
  const std::uint32_t n = 4;
  Recorder half;
  simulate_none(platform(star(n, "half")), collectives("all_reduce", kS, {group("g", {0, 1, 2, 3})}, every("g", n)), half);
  const double bw = 2.0 * (n - 1) / n * kS / kB, lat = 2.0 * (n - 1) * kL;
  EXPECT_NEAR(comm_end(half), 2 * bw + lat, 1e-9);
}

// gpu0, gpu1 on switch a; gpu2, gpu3 on switch b; a and b joined by one link of B. Groups
// {0, 2} and {1, 3}: each all-reduce crosses a-b in both directions. Route latency: 0.5 + 1 +
// 0.5 us; with n = 2 an all-reduce alone is S/B + 2 L.
PlatformSpec two_switches(const std::string& between = "100GB/s") {
  std::string y = "name: two-switches\ndevices:\n";
  for (int i = 0; i < 4; ++i)
    y += "  gpu" + std::to_string(i) +
         ":\n    kind: gpu\n    compute: {fp32: 10TFLOPS}\n    tiers:\n      hbm: {role: compute, "
         "capacity: 80GiB, bandwidth: 100000GB/s}\n";
  y += "switches: [a, b]\nlinks:\n";
  for (int i = 0; i < 4; ++i)
    y += "  l" + std::to_string(i) + ": {endpoints: [gpu" + std::to_string(i) + ".hbm, " +
         (i < 2 ? "a" : "b") + "], bandwidth: 1000GB/s, latency: 0.5us}\n";
  y += "  ab: {endpoints: [a, b], bandwidth: " + between + ", latency: 1us}\n";
  return platform(y);
}
const std::vector<ProcessGroup> kCrossGroups{{"x", {0, 2}}, {"y", {1, 3}}};

TEST(Collectives, ACollectiveAloneCrossesTheSharedLinkAtItsBandwidth) {
  Recorder one;
  simulate_none(two_switches(), collectives("all_reduce", kS, kCrossGroups, {{0, "x"}, {2, "x"}}), one);
  EXPECT_NEAR(comm_end(one), kS / kB + 2 * 2e-6, 1e-9);
}

TEST(Collectives, TwoCollectivesSharingOneLinkTakeTwiceAsLong) {
  Recorder both;
  simulate_none(two_switches(),
                collectives("all_reduce", kS, kCrossGroups, {{0, "x"}, {2, "x"}, {1, "y"}, {3, "y"}}), both);
  EXPECT_NEAR(comm_end(both), 2 * kS / kB + 2 * 2e-6, 1e-9);
}

TEST(Collectives, AnAllReduceAcrossTwoNodesIsBoundByTheInterNodeLink) {
  // Two nodes of two GPUs: NVLink-like links of 1000 GB/s inside a node, one NIC of 10 GB/s
  // per GPU into a shared switch between them. As NCCL does, the all-reduce runs as two
  // rings (0-1-2-3 and 1-0-3-2), each with half the tensor, each crossing between the nodes
  // on its own NICs: every NIC carries one ring's flow each way, and those hops set the pace.
  const std::string y = test::two_nodes_yaml();
  const PlatformSpec p = platform(y);
  ASSERT_EQ(p.compute_devices().size(), 4u);
  EXPECT_EQ(p.devices[2].name, "gpu2");
  EXPECT_EQ(p.devices[2].node, 1u);
  const std::uint32_t n = 4;
  Recorder rec;
  const Summary s = simulate_none(p, collectives("all_reduce", kS, {group("g", {0, 1, 2, 3})}, every("g", n)), rec);
  for (const LinkSummary& l : s.links)
    if (l.name.rfind("nic", 0) == 0) {
      EXPECT_EQ(l.bytes_forward, 2 * (n - 1) * (kS / 2 / n)) << l.name;
      EXPECT_EQ(l.bytes_backward, 2 * (n - 1) * (kS / 2 / n)) << l.name;
    }
  // Inter-node route: NIC, switch, NIC: 10 GB/s, 10 us; each ring carries S/2.
  const double expected = 2.0 * (n - 1) / n * (kS / 2) / 10e9 + 2.0 * (n - 1) * 10e-6;
  EXPECT_NEAR(comm_end(rec), expected, 1e-9);
}

TEST(Collectives, EveryMemberWaitsForTheLastToArrive) {
  // gpu1 computes 1 ms before its all-reduce; gpu0 reaches it at once and waits.
  const std::uint32_t n = 2;
  Trace t = collectives("all_reduce", kS, {group("g", {0, 1})}, every("g", n));
  // gpu1's compute op writes (in place) the buffer its all-reduce then reduces.
  Trace late;
  late.name = "late";
  late.groups = t.groups;
  for (const Buffer& b : t.buffers) {
    const BufferId id = late.add_buffer(b.name, b.bytes, b.category, true);
    late.buffers[id].device = b.device;
  }
  Op busy;
  busy.name = "busy@gpu1";
  busy.kind = "matmul";
  busy.device = 1;
  busy.updates = {1};
  busy.flops = 1e10;  // 1 ms at 10 TFLOPS
  late.add_op(busy);
  for (Op op : t.ops) late.add_op(std::move(op));
  Recorder rec;
  const Summary s = simulate_none(platform(star(n)), late, rec);
  const double ring = kS / kB + 2 * kL;
  EXPECT_NEAR(comm_end(rec), 1e-3 + ring, 1e-9);
  for (const Event& e : rec.events())
    if (e.kind == EventKind::comm && e.device == 0) EXPECT_NEAR(e.start_s, 0.0, 1e-12);
  // gpu1's all-reduce is exposed only for the ring; gpu0's for its whole wait.
  EXPECT_NEAR(s.comm_time_s, 1e-3 + ring, 1e-9);
}

namespace {

// Each call's collectives `times` over, in order (a device's ops over one group run in turn).
std::vector<Call> repeated(const std::vector<Call>& calls, int times) {
  std::vector<Call> out;
  for (int k = 0; k < times; ++k) out.insert(out.end(), calls.begin(), calls.end());
  return out;
}

// Every comm event ends at a multiple of `each`: the k-th collective of a device at k x each.
void expect_ends_at_multiples(const Recorder& rec, double each, std::size_t per_device) {
  std::map<std::uint32_t, std::size_t> seen;
  std::size_t n = 0;
  for (const Event& e : rec.events())
    if (e.kind == EventKind::comm) {
      const std::size_t k = ++seen[e.device];
      EXPECT_NEAR(e.end_s, static_cast<double>(k) * each, 1e-12) << "device " << e.device << ", collective " << k;
      ++n;
    }
  EXPECT_EQ(n, per_device * seen.size());
}

}  // namespace

// A group whose flows no other flow can slow takes the same time at each collective of one
// kind and size: the first runs as SimGrid's flows and its time is kept, the next sleep it
// (CollectiveRunner::plan_replay). tests/scenarios/test_parallel.cpp checks whole steps
// against --exact, where every collective runs as flows.
TEST(Collectives, AGroupAloneOnItsLinksSleepsItsMeasuredTimeAfterTheFirst) {
  // Group x alone crosses a-b: each of its three all-reduces takes S/B + 2 L.
  const Trace t = collectives("all_reduce", kS, kCrossGroups, repeated({{0, "x"}, {2, "x"}}, 3));
  Recorder rec;
  EXPECT_EQ(simulate_none(two_switches(), t, rec).replayed_phases, 2u);
  expect_ends_at_multiples(rec, kS / kB + 2 * 2e-6, 3);
}

TEST(Collectives, AGroupAloneRunsEveryCollectiveAsFlowsWhenExact) {
  const Trace t = collectives("all_reduce", kS, kCrossGroups, repeated({{0, "x"}, {2, "x"}}, 3));
  Recorder rec;
  EXPECT_EQ(simulate_none(two_switches(), t, rec, true).replayed_phases, 0u);
  expect_ends_at_multiples(rec, kS / kB + 2 * 2e-6, 3);
}

TEST(Collectives, GroupsThatCanFillALinkTheyShareRunAsFlows) {
  // x and y share a-b, which either fills alone: neither is slept, and each of their
  // all-reduces at once takes twice as long.
  const Trace t = collectives("all_reduce", kS, kCrossGroups, repeated({{0, "x"}, {2, "x"}, {1, "y"}, {3, "y"}}, 2));
  Recorder rec;
  EXPECT_EQ(simulate_none(two_switches(), t, rec).replayed_phases, 0u);
  expect_ends_at_multiples(rec, 2 * kS / kB + 2 * 2e-6, 2);
}

TEST(Collectives, GroupsSharingALinkThatNeverFillsAreSlept) {
  // a-b at 10,000 GB/s: both groups' flows at their routes' 1,000 GB/s put 2,000 GB/s each way
  // through it at most, so it limits neither; each group is alone on its GPUs' own links and
  // is slept after its first all-reduce, each taking S / 1,000 GB/s + 2 L.
  const Trace t = collectives("all_reduce", kS, kCrossGroups, repeated({{0, "x"}, {2, "x"}, {1, "y"}, {3, "y"}}, 3));
  Recorder rec;
  EXPECT_EQ(simulate_none(two_switches("10000GB/s"), t, rec).replayed_phases, 4u);
  expect_ends_at_multiples(rec, kS / 1000e9 + 2 * 2e-6, 3);
}

TEST(Collectives, AGroupIsNotSleptWhenACopyMayCrossItsLinks) {
  // gpu0's buffer of x's first all-reduce is made on gpu2 (by an op there), so gpu0's
  // collective copies it in first: a copy may cross any link, and none is slept.
  Trace t = collectives("all_reduce", kS, kCrossGroups, repeated({{0, "x"}, {2, "x"}}, 3));
  t.buffers[t.ops[0].updates[0]].device = 2;
  Op make;
  make.name = "make@gpu2";
  make.kind = "fill";
  make.device = 2;
  Trace u;
  u.name = t.name;
  u.groups = t.groups;
  for (const Buffer& b : t.buffers) {
    const BufferId id = u.add_buffer(b.name, b.bytes, b.category, true);
    u.buffers[id].device = b.device;
  }
  make.updates = {t.ops[0].updates[0]};
  u.add_op(std::move(make));
  for (Op op : t.ops) u.add_op(std::move(op));
  Recorder rec;
  const Summary s = simulate_none(two_switches(), u, rec);
  EXPECT_EQ(s.status, "ok");
  EXPECT_GT(s.swap_in_bytes + s.transfer_time_s, 0.0);  // the copy ran
  EXPECT_EQ(s.replayed_phases, 0u);
}
