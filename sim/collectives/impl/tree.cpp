#include <bit>

#include "sim/collectives/collectives.h"

namespace memsim {
namespace {

// NCCL's double binary tree all-reduce: two binary trees, each carrying half the tensor,
// each reducing up to its root and broadcasting back down, pipelined in chunks, so every
// edge of a tree carries S/2 up and S/2 down at once. The second tree is the first over the
// units in reverse order, so most units that are leaves of one are inner units of the other
// and each rank sends and receives about 2S in all, as a ring does. Latency-bound steps:
// the trees' depth up and down, 2 floor(log2 u) over u units, where a ring takes 2(n-1).
//
// A unit is a node when the group spans several nodes with g > 1 ranks on each (as NCCL
// builds its trees between nodes and chains the GPUs within one; the chain adds g - 1 steps
// each way, and the trees enter a node at its first and at its last rank), else one rank.
std::vector<CollectivePhase> tree_phases(std::string_view, std::uint64_t bytes, const GroupTopology& group) {
  const std::uint32_t n = group.size();
  if (n < 2) return {};
  std::vector<std::vector<std::uint32_t>> units;
  if (group.per_node() >= 2) {
    units = group.by_node();
  } else {
    for (std::uint32_t i = 0; i < n; ++i) units.push_back({i});
  }
  const auto u = static_cast<std::uint32_t>(units.size());
  const auto g = static_cast<std::uint32_t>(units.front().size());
  const std::uint64_t half = (bytes + 1) / 2;
  CollectivePhase p;
  p.ranks = n;
  p.steps = 2 * (static_cast<std::uint32_t>(std::bit_width(u)) - 1 + (g - 1));
  auto edge = [&](std::uint32_t a, std::uint32_t b) {
    p.flows.push_back({b, a, half});  // up: reduce
    p.flows.push_back({a, b, half});  // down: broadcast
  };
  for (int tree = 0; tree < 2; ++tree) {
    // The tree's i-th unit and where the tree enters it; within a unit, a chain from there.
    auto unit = [&](std::uint32_t i) -> const std::vector<std::uint32_t>& { return units[tree == 0 ? i : u - 1 - i]; };
    auto entry = [&](std::uint32_t i) { return tree == 0 ? unit(i).front() : unit(i).back(); };
    for (std::uint32_t i = 1; i < u; ++i) edge(entry((i - 1) / 2), entry(i));
    for (std::uint32_t i = 0; i < u; ++i) {
      const auto& m = unit(i);
      for (std::uint32_t j = 0; j + 1 < m.size(); ++j)
        tree == 0 ? edge(m[j], m[j + 1]) : edge(m[m.size() - 1 - j], m[m.size() - 2 - j]);
    }
  }
  return {p};
}

}  // namespace

CollectiveAlgorithm tree_algorithm() {
  return {"tree",
          "NCCL's double binary tree all-reduce: two trees of half the tensor each, 2 log2(units) "
          "latency steps (between nodes, chained within one)",
          {"all_reduce"},
          {},
          tree_phases};
}

}  // namespace memsim
