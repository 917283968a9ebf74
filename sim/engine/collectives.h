#pragma once
// What a collective puts on the network, as NCCL's algorithms do it, without SimGrid: the
// flows between the ranks of a group (who sends how many bytes to whom) and how many
// latency-bound steps the algorithm takes.
//
// Ring (NCCL's choice within a node and, for large messages, across nodes): the ranks in
// group order form a ring; each step every rank sends one S/n chunk to the next. An
// all-reduce is a reduce-scatter then an all-gather, 2(n-1) steps; all-gather and
// reduce-scatter take n-1. Steps are uniform, so the engine runs each rank's steps as one
// flow of all its chunks — the same bandwidth term on a link, and sharing with other traffic
// the same way — and adds the other steps' latency: on links of bandwidth B and latency L an
// all-reduce of S bytes takes 2(n-1)/n S/B + 2(n-1) L, all-gather and reduce-scatter
// (n-1)/n S/B + (n-1) L. Broadcast and reduce are pipelined down a chain (n-1 hops, S over
// each link); all-to-all sends S/n from every rank to every other at once; send/recv is one
// flow. NCCL's tree, NVLS and CollNet/SHARP algorithms are not modelled (docs/parallel.md).
#include <cstdint>
#include <string_view>
#include <vector>

namespace memsim {

/// Communication op kinds (Op::kind) the engine runs over a process group.
bool is_communication_kind(std::string_view kind);

struct Flow {
  std::uint32_t from = 0, to = 0;  // positions in the group (ring order)
  std::uint64_t bytes = 0;
};

struct CollectivePattern {
  std::vector<Flow> flows;  // all start together
  /// Latency-bound steps in all: the flows' own route latency counts once, the engine waits
  /// the other steps - 1 times the longest route latency after they land.
  std::uint32_t steps = 0;
};

/// The flows of collective `kind` over a group of `ranks` ranks on a tensor of `bytes` (the
/// whole tensor: see Op::message_bytes). One rank or zero bytes of a kind that moves none:
/// no flows, no steps.
CollectivePattern collective_pattern(std::string_view kind, std::uint64_t bytes, std::uint32_t ranks);

}  // namespace memsim
