#include "sim/collectives/collectives.h"

namespace memsim {
namespace {

// NCCL's ring: the ranks in ring order; each step every rank sends one chunk of S/n to the
// next. An all-reduce is a reduce-scatter then an all-gather, 2(n-1) steps; all-gather and
// reduce-scatter take n-1; a barrier is an all-reduce of nothing (latency only). On links of
// bandwidth B and route latency L an all-reduce of S bytes takes 2(n-1)/n S/B + 2(n-1) L.
//
// Within a node there is one ring, in group order. A group spanning several nodes with g > 1
// ranks on each runs g rings, ring c entering every node at its c-th rank, each with 1/g of
// the tensor: each ring crosses between nodes on its own GPU's NIC (rail), as NCCL's
// channels use one NIC each on a DGX.
//
// Broadcast and reduce run down (from rank 0) or up (to rank 0) a chain in group order,
// pipelined in chunks: every link of the chain carries S once, n-1 steps.
bool ring_kind(std::string_view kind) {
  return kind == "all_reduce" || kind == "all_gather" || kind == "reduce_scatter" || kind == "barrier";
}

std::vector<std::vector<std::uint32_t>> rings_of(const GroupTopology& group) {
  const std::uint32_t n = group.size(), g = group.per_node();
  std::vector<std::vector<std::uint32_t>> rings;
  if (g < 2) {
    rings.emplace_back();
    for (std::uint32_t i = 0; i < n; ++i) rings.back().push_back(i);
    return rings;
  }
  const auto nodes = group.by_node();
  for (std::uint32_t c = 0; c < g; ++c) {
    rings.emplace_back();
    for (const auto& members : nodes)
      for (std::size_t j = 0; j < members.size(); ++j) rings.back().push_back(members[(j + c) % members.size()]);
  }
  return rings;
}

std::vector<CollectivePhase> ring_phases(std::string_view kind, std::uint64_t bytes, const GroupTopology& group) {
  const std::uint32_t n = group.size();
  CollectivePhase p;
  p.ranks = n;
  if (n < 2) return {};
  if (ring_kind(kind)) {
    const auto rings = rings_of(group);
    // Each ring's share and each chunk rounded up: every rank moves whole chunks.
    const std::uint64_t per_ring = (bytes + rings.size() - 1) / rings.size();
    const std::uint64_t chunk = (per_ring + n - 1) / n;
    p.steps = kind == "all_reduce" || kind == "barrier" ? 2 * (n - 1) : n - 1;
    for (const auto& order : rings)
      for (std::uint32_t r = 0; r < n; ++r) p.flows.push_back({order[r], order[(r + 1) % n], p.steps * chunk});
  } else {
    for (std::uint32_t r = 0; r + 1 < n; ++r)
      p.flows.push_back(kind == "broadcast" ? Flow{r, r + 1, bytes} : Flow{r + 1, r, bytes});
    p.steps = n - 1;
  }
  return {p};
}

}  // namespace

CollectiveAlgorithm ring_algorithm() {
  return {"ring",
          "NCCL's ring (one per node's rank across nodes, each on its own NIC); broadcast and reduce "
          "down a chain. Every ring collective's default",
          {"all_reduce", "all_gather", "reduce_scatter", "barrier", "broadcast", "reduce"},
          {},
          ring_phases};
}

}  // namespace memsim
