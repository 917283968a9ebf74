#include <algorithm>
#include <map>

#include "sim/collectives/collectives.h"
#include "sim/core/registry.h"

namespace memsim {

const std::vector<std::string>& communication_kinds() {
  static const std::vector<std::string> kinds{"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                              "broadcast",  "reduce",     "gather",         "scatter",
                                              "barrier",    "send",       "recv",           "ring_exchange"};
  return kinds;
}

bool is_communication_kind(std::string_view kind) {
  for (const std::string& k : communication_kinds())
    if (k == kind) return true;
  return false;
}

std::vector<std::vector<std::uint32_t>> GroupTopology::by_node() const {
  std::vector<std::vector<std::uint32_t>> out;
  std::map<std::uint32_t, std::size_t> index;
  for (std::uint32_t i = 0; i < size(); ++i) {
    auto [it, fresh] = index.try_emplace(nodes[i], out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(i);
  }
  return out;
}

std::uint32_t GroupTopology::per_node() const {
  const auto groups = by_node();
  if (groups.size() < 2) return 0;
  for (const auto& g : groups)
    if (g.size() != groups.front().size()) return 0;
  return static_cast<std::uint32_t>(groups.front().size());
}

bool CollectiveAlgorithm::runs(std::string_view kind) const {
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

bool CollectiveAlgorithm::can_run(std::string_view kind, const GroupTopology& group) const {
  return runs(kind) && group.size() >= 2 && (!supports || supports(kind, group));
}

const std::vector<CollectiveAlgorithm>& builtin_collective_algorithms() {
  static const std::vector<CollectiveAlgorithm> algorithms{
      ring_algorithm(),
      tree_algorithm(),
      nvls_algorithm(),
      hierarchical_algorithm(),
      direct_algorithm(),
  };
  return algorithms;
}

const CollectiveAlgorithm* find_collective_algorithm(std::string_view name) {
  return find_by_name(builtin_collective_algorithms(), name);
}

std::vector<std::string> collective_algorithm_names() { return names_of(builtin_collective_algorithms()); }

const CollectiveAlgorithm& default_collective_algorithm(std::string_view kind) {
  static const CollectiveAlgorithm& ring = *find_collective_algorithm("ring");
  static const CollectiveAlgorithm& direct = *find_collective_algorithm("direct");
  return ring.runs(kind) ? ring : direct;
}

}  // namespace memsim
