#include "sim/collectives/choose.h"

#include <algorithm>

namespace memsim {
namespace {

const std::vector<CollectiveModel::Rule>* rules_for(const CollectiveModel& model, std::string_view kind) {
  const auto it = model.algorithms.find(std::string(kind));
  return it == model.algorithms.end() ? nullptr : &it->second;
}

}  // namespace

const CollectiveAlgorithm& choose_collective_algorithm(const CollectiveModel& model, std::string_view kind,
                                                       std::uint64_t bytes, const GroupTopology& group,
                                                       const CollectivePredictor& predict) {
  if (const auto* rules = rules_for(model, kind))
    for (const CollectiveModel::Rule& rule : *rules) {
      if (rule.below != 0 && bytes >= rule.below) continue;
      if (rule.use != "auto") {
        const CollectiveAlgorithm* a = find_collective_algorithm(rule.use);
        if (a && a->can_run(kind, group)) return *a;
        continue;
      }
      const CollectiveAlgorithm* best = nullptr;
      double best_s = 0;
      for (const CollectiveAlgorithm& a : builtin_collective_algorithms()) {
        if (!a.can_run(kind, group)) continue;
        const double t = predict(a);
        if (!best || t < best_s) best = &a, best_s = t;
      }
      if (best) return *best;
    }
  return default_collective_algorithm(kind);
}

std::vector<const CollectiveAlgorithm*> candidate_collective_algorithms(const CollectiveModel& model,
                                                                       std::string_view kind,
                                                                       const GroupTopology& group) {
  std::vector<const CollectiveAlgorithm*> out{&default_collective_algorithm(kind)};
  auto add = [&](const CollectiveAlgorithm* a) {
    if (a && a->can_run(kind, group) && std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  };
  if (const auto* rules = rules_for(model, kind))
    for (const CollectiveModel::Rule& rule : *rules) {
      if (rule.use != "auto") {
        add(find_collective_algorithm(rule.use));
      } else {
        for (const CollectiveAlgorithm& a : builtin_collective_algorithms()) add(&a);
      }
    }
  return out;
}

}  // namespace memsim
