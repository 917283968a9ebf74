#include "sim/collectives/collectives.h"

namespace memsim {
namespace {

// Hierarchical (two-level) collectives over N nodes of g ranks each: rings within every
// node (fast links) and, between nodes, rings of the ranks at the same place in their nodes
// (rail c: each node's c-th rank), each carrying 1/g of the tensor. Latency-bound steps are
// those of rings of g and of N ranks, where one ring over all n = gN ranks takes n - 1 per
// pass.
//   all_reduce:     reduce-scatter within nodes (g - 1 steps), all-reduce of each rank's
//                   shard S/g along its rail (2(N - 1)), all-gather within nodes (g - 1).
//   all_gather:     along the rails (each rank's S/n; N - 1), then within nodes (S/g; g - 1).
//   reduce_scatter: within nodes (S/g; g - 1), then along the rails (S/n; N - 1).
// Each phase waits for the previous one.
std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// A ring pass over each of `rings`: every rank sends `per_rank` bytes to the next.
CollectivePhase rings_phase(const std::vector<std::vector<std::uint32_t>>& rings, std::uint64_t per_rank,
                            std::uint32_t steps) {
  CollectivePhase p;
  p.steps = steps;
  p.ranks = static_cast<std::uint32_t>(rings.front().size());
  for (const auto& ring : rings)
    for (std::size_t i = 0; i < ring.size(); ++i) p.flows.push_back({ring[i], ring[(i + 1) % ring.size()], per_rank});
  return p;
}

std::vector<CollectivePhase> hierarchical_phases(std::string_view kind, std::uint64_t bytes,
                                                 const GroupTopology& group) {
  const std::uint32_t g = group.per_node();
  if (g < 2) return {};
  const auto nodes = group.by_node();  // the intra-node rings
  const auto N = static_cast<std::uint32_t>(nodes.size());
  std::vector<std::vector<std::uint32_t>> rails(g);
  for (const auto& members : nodes)
    for (std::uint32_t c = 0; c < g; ++c) rails[c].push_back(members[c]);
  const std::uint64_t shard = ceil_div(bytes, g);         // a rank's part within its node
  const std::uint64_t piece = ceil_div(bytes, g * N);     // a rank's part of the whole tensor
  const CollectivePhase within = rings_phase(nodes, (g - 1) * shard, g - 1);
  if (kind == "all_reduce")
    return {within, rings_phase(rails, 2 * (N - 1) * ceil_div(shard, N), 2 * (N - 1)), within};
  const CollectivePhase across = rings_phase(rails, (N - 1) * piece, N - 1);
  if (kind == "all_gather") return {across, within};
  return {within, across};  // reduce_scatter
}

}  // namespace

CollectiveAlgorithm hierarchical_algorithm() {
  return {"hierarchical",
          "rings within each node, then along the rails between nodes (1/g of the tensor each), "
          "then within nodes again: g - 1 and N - 1 steps where one ring takes gN - 1",
          {"all_reduce", "all_gather", "reduce_scatter"},
          [](std::string_view, const GroupTopology& group) { return group.per_node() >= 2; },
          hierarchical_phases};
}

}  // namespace memsim
