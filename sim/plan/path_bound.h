#pragma once
// A lower bound on a laid-out step's time from its longest path (docs/plan.md, "The bounds"),
// for the plan to skip a layout without simulating it: the step as `memsim run` builds it
// (every micro-batch, every stage, the pipeline's sends and receives, the data-parallel
// collectives), each op timed at no more than the engine can take for it, scheduled as early
// as the constraints the engine always keeps allow:
//
//   - an op starts after the ops that make what it reads, and the in-place updates of it issued
//     before it, have ended;
//   - the ops of one stream run one after another in program order (a collective's stream is
//     its process group's on its device, as CollectiveRunner::stream gives it);
//   - the host issues a device's ops in program order, each after its host time
//     (`host_overhead:`, the per-step time first; a synchronizing call's later ops free);
//   - a collective ends for all its simulated members together, after the last has reached it;
//   - a compute op takes its cost-model duration (the engine's, before any slowdown);
//   - a collective takes at least the bytes its rank must move over the links its flows can
//     use: an all-gather receives (n - 1) / n of the tensor, a reduce-scatter sends that much,
//     an all-reduce both, a send its message, a receive the same; over the distinct first
//     links of the routes to its peers (sending) or last links of theirs to it (receiving),
//     at those links' bandwidths summed. A group across nodes also moves the other nodes'
//     share of the tensor into the rank's node (all-gather, all-reduce) or the node's share
//     out (reduce-scatter, all-reduce) at least once, through the first (last) links of the
//     routes from (to) the other nodes' ranks that belong to the node. Either at NCCL's best
//     protocol efficiency x (1 - ring_fill / n) of the links, then the least protocol latency,
//     and no less than one step's floor (CollectiveModel). Other kinds: no time.
//
// Everything else the engine adds — route latencies, contention on links, the SMs a
// collective holds, the host's waits for synchronizing calls, memory stalls, `waits_for`
// events — only delays ops, so the longest path is at most the simulated step.
#include <optional>
#include <string_view>

#include "sim/platform/platform.h"
#include "sim/workload/trace.h"

namespace memsim {

/// No more than the host time the engine gives an op of `kind` (its entry, else the longest
/// "*SUFFIX" entry it ends with, else the default): the entry when there is one, else the
/// least of the default and every suffix entry it ends with.
double host_time_at_least(const HostOverhead& host, std::string_view kind);

/// The longest path of `trace` (placed on the platform's op devices as `memsim run` places it)
/// under the rules above; nullopt when it cannot be worked out (an op on a device the platform
/// lacks, or constraints that close a cycle), so that nothing is pruned by it.
std::optional<double> longest_path_s(const Trace& trace, const PlatformSpec& platform);

}  // namespace memsim
