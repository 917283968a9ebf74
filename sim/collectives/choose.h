#pragma once
// Which algorithm runs a collective: the platform's `collectives: algorithms:` rules, as
// NCCL's tuner picks by kind and message size (CollectiveModel::algorithms).
#include <functional>
#include <string_view>
#include <vector>

#include "sim/collectives/collectives.h"
#include "sim/platform/platform.h"

namespace memsim {

/// Predicted time of an algorithm's phases for the message at hand, on idle links.
using CollectivePredictor = std::function<double(const CollectiveAlgorithm&)>;

/// The algorithm `kind` runs on a message of `bytes` over `group`: the first of the kind's
/// rules whose `below` the message is under and whose algorithm runs on the group; for
/// "auto", of the registered algorithms that run on it the one `predict` finds fastest (the
/// first in `memsim list` order on a tie). No such rule: default_collective_algorithm.
const CollectiveAlgorithm& choose_collective_algorithm(const CollectiveModel& model, std::string_view kind,
                                                       std::uint64_t bytes, const GroupTopology& group,
                                                       const CollectivePredictor& predict);

/// Every algorithm the rules may choose for `kind` on `group`, the default first.
std::vector<const CollectiveAlgorithm*> candidate_collective_algorithms(const CollectiveModel& model,
                                                                       std::string_view kind,
                                                                       const GroupTopology& group);

}  // namespace memsim
