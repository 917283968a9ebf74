// The Mesh (sim/parallel/mesh.h): the one place where ranks, coordinates and process groups
// are worked out, and every group a parallel step defines is one of its groups.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>

#include <fmt/format.h>

#include "sim/parallel/mesh.h"
#include "sim/workload/parallel.h"
#include "sim/workload/trace.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

TEST(Mesh, NumbersRanksAsMegatronDoes) {
  // rank = tp_rank + tp x (cp_rank + cp x (dp_rank + dp x stage)) (Megatron's order
  // tp-cp-ep-dp-pp), a data-parallel rank being ep_rank + ep x edp_rank.
  for (const std::uint32_t cp : {1u, 2u, 3u}) {
    const std::uint32_t tp = 4, dp = 6, ep = 3, pp = 5;
    const Mesh mesh = Mesh::megatron(tp, dp, ep, pp, cp);
    EXPECT_EQ(mesh.size(), tp * cp * dp * pp);
    std::set<std::uint32_t> seen;
    for (std::uint32_t s = 0; s < pp; ++s)
      for (std::uint32_t d = 0; d < dp; ++d)
        for (std::uint32_t c = 0; c < cp; ++c)
          for (std::uint32_t t = 0; t < tp; ++t) {
            const std::uint32_t r = mesh.rank({t, c, d % ep, d / ep, 0, s});
            EXPECT_EQ(r, t + tp * (c + cp * (d + dp * s)));
            EXPECT_EQ(mesh.coords(r), (Mesh::Coords{t, c, d % ep, d / ep, 0, s}));
            EXPECT_EQ(mesh.coord(r, "edp"), d / ep);
            EXPECT_EQ(mesh.coord(r, "cp"), c);
            seen.insert(r);
          }
    EXPECT_EQ(seen.size(), mesh.size());
  }
}

TEST(Mesh, ContextParallelRanksShareTheWeightsOfTheDataParallelOnes) {
  // tp 2, cp 2, dp 2 (ep 1), pp 2: the gradients of a weight are reduced over dp x cp, as
  // Megatron's data-parallel group with context parallelism; the k/v ring runs over cp.
  const Mesh mesh = Mesh::megatron(2, 2, 1, 2, 2);
  EXPECT_EQ(mesh.group("cp", 5), (std::vector<std::uint32_t>{5, 7}));
  EXPECT_EQ(mesh.group("dp", 5), (std::vector<std::uint32_t>{1, 3, 5, 7}));
  EXPECT_EQ(mesh.group("tp", 5), (std::vector<std::uint32_t>{4, 5}));
  EXPECT_EQ(mesh.group("pp", 5), (std::vector<std::uint32_t>{5, 13}));
  EXPECT_EQ(mesh.first(7, Mesh::stage_dims()), 0u);
  EXPECT_EQ(mesh.first(15, Mesh::stage_dims()), 8u);
}

TEST(Mesh, HsdpSplitsTheDataParallelRanksIntoShardGroupsAndTheirReplicas) {
  // tp 2, dp 8 in 2 replicas of 4-rank shard groups, pp 2: a shard group is 4 consecutive
  // data-parallel ranks, the replicas of a shard every 4th; together they are the dp group.
  const Mesh mesh = Mesh::megatron(2, 8, 1, 2, 1, 2);
  EXPECT_EQ(mesh.size(), 32u);
  EXPECT_EQ(mesh.group("dp_shard", 11), (std::vector<std::uint32_t>{9, 11, 13, 15}));
  EXPECT_EQ(mesh.group("dp_replica", 11), (std::vector<std::uint32_t>{3, 11}));
  EXPECT_EQ(mesh.group("dp", 11), (std::vector<std::uint32_t>{1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_EQ(mesh.group("pp", 11), (std::vector<std::uint32_t>{11, 27}));
  EXPECT_EQ(mesh.first(15, Mesh::stage_dims()), 0u);
  EXPECT_THROW(Mesh::megatron(1, 8, 1, 1, 1, 3), std::invalid_argument);
}

TEST(Mesh, GroupsPartitionTheRanksInRingOrder) {
  const Mesh mesh = Mesh::megatron(2, 8, 4, 3);
  for (std::string_view kind : {"tp", "ep", "edp", "dp", "pp"}) {
    const auto dims = Mesh::dims_of(kind);
    std::vector<int> covered(mesh.size(), 0);
    for (const auto& g : mesh.groups(dims)) {
      EXPECT_EQ(g.size(), mesh.size(dims)) << kind;
      for (std::uint32_t r : g) {
        ++covered[r];
        EXPECT_EQ(mesh.group(kind, r), g) << kind << " around " << r;  // the same group from any member
      }
    }
    for (std::uint32_t r = 0; r < mesh.size(); ++r) EXPECT_EQ(covered[r], 1) << kind << " rank " << r;
  }
  // By hand: rank 5 is tp 1, ep 2, edp 0, stage 0.
  EXPECT_EQ(mesh.group("tp", 5), (std::vector<std::uint32_t>{4, 5}));
  EXPECT_EQ(mesh.group("ep", 5), (std::vector<std::uint32_t>{1, 3, 5, 7}));
  EXPECT_EQ(mesh.group("edp", 5), (std::vector<std::uint32_t>{5, 13}));
  EXPECT_EQ(mesh.group("dp", 5), (std::vector<std::uint32_t>{1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_EQ(mesh.group("pp", 5), (std::vector<std::uint32_t>{5, 21, 37}));
  EXPECT_EQ(mesh.with(5, "pp", 2), 37u);
  EXPECT_EQ(mesh.first(13, {"tp", "ep", "edp"}), 0u);
}

TEST(Mesh, BadShapesAreRefused) {
  EXPECT_THROW(Mesh::megatron(2, 6, 4, 1), std::invalid_argument);  // ep must divide dp
  EXPECT_THROW(Mesh({{"tp", 2}, {"tp", 2}}), std::invalid_argument);
  EXPECT_THROW(Mesh({{"tp", 0}}), std::invalid_argument);
  const Mesh mesh = Mesh::megatron(2, 2, 1, 2);
  EXPECT_THROW(mesh.coords(8), std::invalid_argument);
  EXPECT_THROW(mesh.group("xp", 0), std::invalid_argument);
  EXPECT_TRUE(Mesh::dims_of("pp.0-1").empty());
}

namespace {

// A small Mixtral-like model: 4 layers (so 1, 2 or 4 stages), 8 experts.
const std::string kModel =
    "model: llama\nlayers: 4\nhidden: 128\nheads: 4\nnum_kv_heads: 4\nintermediate: 256\nvocab: 512\n"
    "num_experts: 8\ntop_k: 2\nseq_len: 32\nbatch: 1\ndtype: bf16\nattention_impl: fused\n"
    "mixed_precision: true\noptimizer: adamw\n";

// The step as the run places it: a pipeline is placed already; otherwise rank 0's step is
// copied onto every rank (per-rank) or stands for them (symmetric).
Trace placed(const std::string& yaml) {
  Trace t = workload(yaml);
  if (t.parallel.symmetric || !t.parallel.simulated.empty() || t.parallel.ranks <= 1) return t;
  std::vector<Trace> copies(t.parallel.ranks, t);
  std::vector<std::string> names;
  for (std::uint32_t r = 0; r < t.parallel.ranks; ++r) names.push_back(fmt::format("gpu{}", r));
  Trace out = combine_per_device(copies, names);
  place_rank_groups(out);
  return out;
}

}  // namespace

TEST(Mesh, EveryGroupOfEveryLayoutIsAMeshGroup) {
  // Random layouts of tp, dp, ep, pp, schedules, ZeRO and HSDP, symmetric and per-rank: every
  // process group of a mesh kind is the Mesh's group around its first rank (and named by
  // it when placed), and every collective runs on a member of its group.
  std::mt19937 rng(20261203);
  auto pick = [&](std::vector<std::uint32_t> xs) { return xs[rng() % xs.size()]; };
  // Then eight HSDP layouts (zero 3 over dp 4 in two shard groups of 2), each tp, cp and
  // symmetry, which the draws reach too seldom.
  int layouts = 0, hybrid = 0;
  while (layouts < 68) {
    std::uint32_t tp = pick({1, 2, 4}), dp = pick({1, 2, 4}), pp = pick({1, 2, 4});
    std::uint32_t ep = pick({1, 2, 4}), cp = pick({1, 1, 2});
    if (layouts < 60 && (dp % ep != 0 || tp * cp * dp * pp < 2)) continue;
    bool symmetric = rng() % 2 == 0;
    const int drawn = ep > 1 ? static_cast<int>(rng() % 3) : static_cast<int>(rng() % 4);
    int zero = pp > 1 ? 0 : drawn;
    std::uint32_t hsdp = zero == 3 && dp == 4 && rng() % 2 == 0 ? 2 : 0;
    if (layouts >= 60) {
      const int k = layouts - 60;
      tp = k % 2 == 0 ? 1 : 2, cp = (k / 2) % 2 == 0 ? 1 : 2, symmetric = k < 4;
      dp = 4, ep = 1, pp = 1, zero = 3, hsdp = 2;
    }
    const std::string yaml =
        kModel + fmt::format("parallel:\n  tp: {}\n  cp: {}\n  dp: {}\n  ep: {}\n  pp: {}\n  zero: {}\n"
                             "  hsdp: {}\n  micro_batches: {}\n  symmetric: {}\n",
                             tp, cp, dp, ep, pp, zero, hsdp, pp > 1 ? pp : 1, symmetric ? "true" : "false");
    SCOPED_TRACE(yaml);
    const Trace t = placed(yaml);
    ++layouts;
    hybrid += hsdp > 0;
    const Mesh mesh = Mesh::megatron(tp, dp, ep, pp, cp, hsdp > 0 ? dp / hsdp : 1);
    EXPECT_EQ(t.parallel.ranks, mesh.size());
    std::map<std::string, const ProcessGroup*> by_name;
    for (const ProcessGroup& g : t.groups) {
      by_name[g.name] = &g;
      const std::string kind = g.name.substr(0, g.name.find('@'));
      if (Mesh::dims_of(kind).empty()) continue;  // a pipeline's point-to-point pair, a tied weight's group
      EXPECT_EQ(g.ranks, mesh.group(kind, g.ranks.front())) << g.name;
      if (g.name != kind) EXPECT_EQ(g.name, fmt::format("{}@{}", kind, g.ranks.front()));
    }
    for (const Op& op : t.ops) {
      if (op.group.empty()) continue;
      const auto it = by_name.find(op.group);
      ASSERT_NE(it, by_name.end()) << op.name << " names group " << op.group;
      const auto& ranks = it->second->ranks;
      EXPECT_NE(std::find(ranks.begin(), ranks.end(), op.device), ranks.end())
          << op.name << " on rank " << op.device << " runs over " << op.group;
    }
  }
  EXPECT_GE(hybrid, 8);
}
