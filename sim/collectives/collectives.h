#pragma once
// Collective algorithms as components: how a communication library turns a collective over
// a process group into phases of flows (who sends how many bytes to whom), without SimGrid.
// One file per algorithm under impl/, registered in builtin.cpp; a platform's `collectives:`
// section chooses one per kind and message size (choose.h); the engine runs the phases.
//
// A phase's flows start together and are pipelined: each rank's chunks to one peer travel
// as one flow of all of them, with the same bandwidth term on a link and sharing other
// traffic the same way. The phase ends when its flows have landed and its other
// latency-bound steps have passed: on links of bandwidth B and route latency L, a phase of
// `steps` steps whose busiest link carries D bytes takes D/B + steps x L when idle.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace memsim {

/// Communication op kinds (Op::kind) the engine runs over a process group.
bool is_communication_kind(std::string_view kind);
/// Every communication kind, in a fixed order (for messages that list them).
const std::vector<std::string>& communication_kinds();

struct Flow {
  std::uint32_t from = 0, to = 0;  // positions in the group
  std::uint64_t bytes = 0;
};

struct CollectivePhase {
  std::vector<Flow> flows;  // all start together
  /// Latency-bound steps in all: the flows' own route latency counts once, the engine waits
  /// the other steps - 1 times the longest route latency after they land.
  std::uint32_t steps = 0;
  /// Ranks in each ring or tree of the phase: what NCCL's protocol model fills
  /// (CollectiveModel::ring_fill loses ring_fill / ranks of the bandwidth).
  std::uint32_t ranks = 0;
};

/// What an algorithm knows of the group it runs on: where each rank is.
struct GroupTopology {
  std::vector<std::uint32_t> nodes;  // per position in the group: the rank's node
  /// Every rank's compute tier has a link to one switch marked `reduces: true` (NVLS).
  bool reducing_switch = false;

  std::uint32_t size() const { return static_cast<std::uint32_t>(nodes.size()); }
  /// The positions on each node: nodes in order of first appearance, positions in group order.
  std::vector<std::vector<std::uint32_t>> by_node() const;
  /// Ranks per node when the group spans several nodes with the same number on each; 0
  /// otherwise (one node, or uneven).
  std::uint32_t per_node() const;
};

struct CollectiveAlgorithm {
  std::string name;
  std::string description;  // a line for `memsim list`
  std::vector<std::string> kinds;  // the kinds it can run
  /// What the algorithm needs of a group for one of its kinds (NVLS a reducing switch;
  /// hierarchical several nodes, evenly filled); empty: any group of 2 ranks or more.
  std::function<bool(std::string_view kind, const GroupTopology& group)> supports;
  /// The phases of `kind` on a tensor of `bytes` (the whole tensor, Op::message_bytes) over
  /// `group` (at least 2 ranks, supported), run one after another.
  std::function<std::vector<CollectivePhase>(std::string_view kind, std::uint64_t bytes,
                                             const GroupTopology& group)>
      phases;

  /// One of `kinds`.
  bool runs(std::string_view kind) const;
  /// One of `kinds`, on a group of 2 ranks or more that it supports.
  bool can_run(std::string_view kind, const GroupTopology& group) const;
};

/// The registered algorithms, in the order `memsim list` shows them.
const std::vector<CollectiveAlgorithm>& builtin_collective_algorithms();
const CollectiveAlgorithm* find_collective_algorithm(std::string_view name);
/// Their names, for messages.
std::vector<std::string> collective_algorithm_names();
/// What a kind runs when the platform chooses nothing: ring where it runs the kind (the
/// ring collectives, broadcast and reduce down a chain), else direct.
const CollectiveAlgorithm& default_collective_algorithm(std::string_view kind);

// The built-in algorithms (impl/*.cpp).
CollectiveAlgorithm ring_algorithm();
CollectiveAlgorithm tree_algorithm();
CollectiveAlgorithm nvls_algorithm();
CollectiveAlgorithm hierarchical_algorithm();
CollectiveAlgorithm direct_algorithm();

}  // namespace memsim
