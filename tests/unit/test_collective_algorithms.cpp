// The collective algorithms' flows (sim/collectives/), the tuner's rules, and the platform's
// `collectives: algorithms:` and reducing switches as loaded; no SimGrid.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sim/collectives/choose.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/platform/platform.h"

using namespace memsim;

namespace {

GroupTopology nodes_of(std::vector<std::uint32_t> nodes, bool reducing = false) { return {std::move(nodes), reducing}; }

std::vector<CollectivePhase> phases(std::string_view algorithm, std::string_view kind, std::uint64_t bytes,
                                    const GroupTopology& g) {
  return find_collective_algorithm(algorithm)->phases(kind, bytes, g);
}

// Bytes each position sends and receives in a phase.
std::map<std::uint32_t, std::uint64_t> sent(const CollectivePhase& p) {
  std::map<std::uint32_t, std::uint64_t> out;
  for (const Flow& f : p.flows) out[f.from] += f.bytes;
  return out;
}
std::map<std::uint32_t, std::uint64_t> received(const CollectivePhase& p) {
  std::map<std::uint32_t, std::uint64_t> out;
  for (const Flow& f : p.flows) out[f.to] += f.bytes;
  return out;
}

std::string error_of(const std::string& yaml) {
  try {
    load_platform(ConfigNode::parse_text(yaml, "p.yaml"));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::string kPlatform = R"(name: p
devices:
  gpu0: {kind: gpu, compute: {fp32: 10TFLOPS}, tiers: {hbm: {role: compute, capacity: 1GiB, bandwidth: 1TB/s}}}
  gpu1: {kind: gpu, compute: {fp32: 10TFLOPS}, tiers: {hbm: {role: compute, capacity: 1GiB, bandwidth: 1TB/s}}}
switches: [{name: nvs, reduces: true}, pcie]
links:
  a: {endpoints: [gpu0.hbm, nvs], bandwidth: 100GB/s}
  b: {endpoints: [gpu1.hbm, nvs], bandwidth: 100GB/s}
)";

}  // namespace

TEST(CollectiveAlgorithms, EveryBuiltinIsFoundByNameAndTheDefaultsAreRingAndDirect) {
  for (const auto& a : builtin_collective_algorithms()) {
    EXPECT_EQ(find_collective_algorithm(a.name), &a);
    EXPECT_FALSE(a.description.empty());
    for (const auto& k : a.kinds) EXPECT_TRUE(is_communication_kind(k)) << a.name << ": " << k;
  }
  EXPECT_EQ(collective_algorithm_names(), (std::vector<std::string>{"ring", "tree", "nvls", "hierarchical", "direct"}));
  for (const auto& k : communication_kinds()) {
    const CollectiveAlgorithm& d = default_collective_algorithm(k);
    EXPECT_TRUE(d.runs(k)) << k;
    const bool direct =
        k == "all_to_all" || k == "scatter" || k == "gather" || k == "send" || k == "recv" || k == "ring_exchange";
    EXPECT_EQ(d.name, direct ? "direct" : "ring") << k;
  }
}

TEST(CollectiveAlgorithms, RingsAcrossNodesEnterEachNodeAtItsCthRank) {
  // Two nodes of two: rings 0-1-2-3 and 1-0-3-2, each with half the tensor.
  const auto p = phases("ring", "all_gather", 800, nodes_of({0, 0, 1, 1}));
  ASSERT_EQ(p.size(), 1u);
  ASSERT_EQ(p[0].flows.size(), 8u);
  EXPECT_EQ(p[0].steps, 3u);
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> expected{{0, 1}, {1, 2}, {2, 3}, {3, 0},
                                                                      {1, 0}, {0, 3}, {3, 2}, {2, 1}};
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(std::pair(p[0].flows[i].from, p[0].flows[i].to), expected[i]) << i;
    EXPECT_EQ(p[0].flows[i].bytes, 3u * 100u);  // 3 chunks of (800 / 2) / 4
  }
}

TEST(CollectiveAlgorithms, TreeRanksSendAndReceiveTwiceTheTensorAtMostInTwoLog2Steps) {
  for (std::uint32_t n : {2u, 4u, 8u, 16u, 5u}) {
    const auto p = phases("tree", "all_reduce", 1000, nodes_of(std::vector<std::uint32_t>(n, 0)));
    ASSERT_EQ(p.size(), 1u);
    std::uint32_t depth = 0;
    while ((2u << depth) <= n) ++depth;
    EXPECT_EQ(p[0].steps, 2 * depth) << n;
    // Each of 2(n-1) edges carries S/2 each way.
    std::uint64_t total = 0;
    for (const Flow& f : p[0].flows) total += f.bytes;
    EXPECT_EQ(total, 2u * (n - 1) * 2 * 500) << n;
    for (const auto& [rank, bytes] : sent(p[0])) EXPECT_LE(bytes, 2 * 1000u) << n << " rank " << rank;
    EXPECT_EQ(sent(p[0]), received(p[0])) << n;
  }
  // Across 4 nodes of 2: trees over the nodes (depth 2), chains of 2 within them.
  const auto p = phases("tree", "all_reduce", 1000, nodes_of({0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(p[0].steps, 2u * (2 + 1));
}

TEST(CollectiveAlgorithms, NvlsNeedsAReducingSwitchAndMovesSOnceEachWay) {
  const CollectiveAlgorithm& nvls = *find_collective_algorithm("nvls");
  EXPECT_FALSE(nvls.can_run("all_reduce", nodes_of({0, 0, 0, 0})));
  EXPECT_TRUE(nvls.can_run("all_reduce", nodes_of({0, 0, 0, 0}, true)));
  EXPECT_FALSE(nvls.can_run("all_gather", nodes_of({0, 0, 0, 0}, true)));
  const auto p = nvls.phases("all_reduce", 1000, nodes_of({0, 0, 0, 0}, true));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].steps, 1u);
  for (std::uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(sent(p[0])[r], 1000u);
    EXPECT_EQ(received(p[0])[r], 1000u);
  }
}

TEST(CollectiveAlgorithms, HierarchicalRunsWithinNodesThenAlongTheRails) {
  const CollectiveAlgorithm& h = *find_collective_algorithm("hierarchical");
  EXPECT_FALSE(h.can_run("all_reduce", nodes_of({0, 0, 0, 0})));     // one node
  EXPECT_FALSE(h.can_run("all_reduce", nodes_of({0, 1, 2, 3})));     // one rank per node
  EXPECT_FALSE(h.can_run("all_reduce", nodes_of({0, 0, 0, 1, 1})));  // uneven
  const GroupTopology g = nodes_of({0, 0, 0, 0, 1, 1, 1, 1});       // g = 4, N = 2
  ASSERT_TRUE(h.can_run("all_reduce", g));
  const auto ar = h.phases("all_reduce", 8000, g);
  ASSERT_EQ(ar.size(), 3u);
  EXPECT_EQ(ar[0].steps, 3u);
  EXPECT_EQ(ar[0].flows[0].bytes, 3u * 2000u);  // (g-1) chunks of S/g
  EXPECT_EQ(ar[1].steps, 2u);
  EXPECT_EQ(ar[1].flows[0].bytes, 2u * 1000u);  // 2(N-1) chunks of (S/g)/N
  EXPECT_EQ(std::pair(ar[1].flows[0].from, ar[1].flows[0].to), std::pair(0u, 4u));  // rail 0: the nodes' first ranks
  EXPECT_EQ(ar[2].flows[0].bytes, ar[0].flows[0].bytes);
  const auto ag = h.phases("all_gather", 8000, g);
  ASSERT_EQ(ag.size(), 2u);
  EXPECT_EQ(ag[0].steps, 1u);                  // along the rails first
  EXPECT_EQ(ag[0].flows[0].bytes, 1000u);      // each rank's S/n
  EXPECT_EQ(ag[1].flows[0].bytes, 3u * 2000u);
  const auto rs = h.phases("reduce_scatter", 8000, g);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].steps, 3u);  // within nodes first
}

TEST(CollectiveAlgorithms, RulesChooseBySizeSkipWhatCannotRunAndFallBackToTheDefault) {
  CollectiveModel m;
  m.algorithms["all_reduce"] = {{1 << 20, "nvls"}, {64 << 20, "tree"}, {0, "hierarchical"}};
  const GroupTopology one_node = nodes_of({0, 0, 0, 0});
  auto pick = [&](std::uint64_t bytes, const GroupTopology& g) {
    return choose_collective_algorithm(m, "all_reduce", bytes, g, [](const CollectiveAlgorithm&) { return 0.0; }).name;
  };
  EXPECT_EQ(pick(1000, one_node), "tree");  // nvls needs a reducing switch
  EXPECT_EQ(pick(1000, nodes_of({0, 0, 0, 0}, true)), "nvls");
  EXPECT_EQ(pick(64 << 20, one_node), "ring");  // hierarchical needs nodes
  EXPECT_EQ(pick(64 << 20, nodes_of({0, 0, 1, 1})), "hierarchical");
  EXPECT_EQ(choose_collective_algorithm(m, "all_gather", 1000, one_node, {}).name, "ring");
  m.algorithms["all_reduce"] = {{0, "auto"}};
  const auto fastest = [](const CollectiveAlgorithm& a) { return a.name == "tree" ? 1.0 : 2.0; };
  EXPECT_EQ(choose_collective_algorithm(m, "all_reduce", 1000, one_node, fastest).name, "tree");
  const auto candidates = candidate_collective_algorithms(m, "all_reduce", one_node);
  ASSERT_EQ(candidates.size(), 2u);  // ring (the default), tree: nvls and hierarchical cannot run here
  EXPECT_EQ(candidates[1]->name, "tree");
}

TEST(CollectiveAlgorithms, APlatformMarksReducingSwitchesAndChoosesAlgorithms) {
  const PlatformSpec p = load_platform(ConfigNode::parse_text(
      kPlatform + "collectives:\n  algorithms: {all_reduce: [{below: 64MiB, use: tree}, {use: auto}], all_to_all: direct}\n",
      "p.yaml"));
  EXPECT_EQ(p.switches, (std::vector<std::string>{"nvs", "pcie"}));
  EXPECT_EQ(p.reducing_switches, (std::vector<std::string>{"nvs"}));
  EXPECT_FALSE(p.collectives.on());  // no protocols: the plain model
  ASSERT_EQ(p.collectives.algorithms.at("all_reduce").size(), 2u);
  EXPECT_EQ(p.collectives.algorithms.at("all_reduce")[0].below, 64u << 20);
  EXPECT_EQ(p.collectives.algorithms.at("all_reduce")[1].use, "auto");
  EXPECT_EQ(p.collectives.algorithms.at("all_to_all")[0].use, "direct");
}

TEST(CollectiveAlgorithms, BadAlgorithmRulesAreLocatedErrors) {
  EXPECT_EQ(error_of(kPlatform + "collectives:\n  algorithms: {all_reduce: trees}\n"),
            "p.yaml:10:28: collectives.algorithms.all_reduce: no collective algorithm 'trees': expected one of ring, "
            "tree, nvls, hierarchical, direct, auto; did you mean 'tree'?");
  EXPECT_EQ(error_of(kPlatform + "collectives:\n  algorithms: {allreduce: tree}\n"),
            "p.yaml:10:16: collectives.algorithms.allreduce: 'allreduce' is not a communication kind: expected one of "
            "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, gather, scatter, barrier, send, "
            "recv, ring_exchange; did you mean 'all_reduce'?");
  EXPECT_EQ(error_of(kPlatform + "collectives:\n  algorithms: {all_gather: nvls}\n"),
            "p.yaml:10:28: collectives.algorithms.all_gather: algorithm 'nvls' does not run all_gather: it runs all_reduce");
  EXPECT_EQ(error_of(kPlatform + "collectives:\n  algorithms: {all_reduce: [{use: ring}, {below: 1MiB, use: tree}]}\n"),
            "p.yaml:10:42: collectives.algorithms.all_reduce[1]: this rule is never used: the rule before it has no "
            "'below' and takes every size");
  EXPECT_NE(error_of(kPlatform + "collectives:\n  algorithms: {all_reduce: [{below: 0, use: tree}]}\n"), "");
}
