#include "sim/plan/path_bound.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/collectives/collectives.h"
#include "sim/core/error.h"
#include "sim/cost/cost_model.h"
#include "sim/platform/routes.h"

namespace memsim {

double host_time_at_least(const HostOverhead& host, std::string_view kind) {
  if (auto it = host.per_kind_s.find(std::string(kind)); it != host.per_kind_s.end()) return it->second;
  double t = host.per_op_s;
  for (const auto& [pattern, seconds] : host.per_kind_s)
    if (pattern.size() > 1 && pattern.front() == '*' && kind.ends_with(std::string_view(pattern).substr(1)))
      t = std::min(t, seconds);
  return t;
}

namespace {

// The bytes a rank must send and receive in a collective of `kind` on a tensor of `bytes` over
// n ranks, whatever the algorithm (its flows run between the group's ranks only).
std::pair<double, double> bytes_out_in(std::string_view kind, double bytes, std::size_t n) {
  const double share = bytes * static_cast<double>(n - 1) / static_cast<double>(n);
  if (kind == "all_gather") return {0, share};
  if (kind == "reduce_scatter") return {share, 0};
  if (kind == "all_reduce") return {share, share};
  if (kind == "send") return {bytes, 0};
  if (kind == "recv") return {0, bytes};
  return {0, 0};
}

}  // namespace

std::optional<double> longest_path_s(const Trace& trace, const PlatformSpec& platform) {
  const std::vector<std::size_t> devices = platform.op_devices();
  const std::size_t accelerators = platform.compute_devices().size();
  std::vector<double> durations;
  try {
    durations = op_durations(trace, platform);
  } catch (const InputError&) {
    return std::nullopt;
  }
  const std::size_t n_ops = trace.ops.size();
  if (n_ops == 0) return 0.0;

  // The groups the engine runs over the network (CollectiveRunner): defined, of two ranks or
  // more, every rank a compute device.
  std::unordered_map<std::string_view, std::uint32_t> group_of;
  std::vector<const ProcessGroup*> groups;
  for (const ProcessGroup& g : trace.groups) {
    bool placed = g.ranks.size() >= 2;
    for (std::uint32_t r : g.ranks) placed = placed && r < accelerators && platform.devices[devices[r]].compute_tier;
    if (!placed) continue;
    group_of.emplace(g.name, static_cast<std::uint32_t>(groups.size()));
    groups.push_back(&g);
  }
  constexpr std::uint32_t kNone = ~0u;
  std::vector<std::uint32_t> collective(n_ops, kNone);
  for (const Op& op : trace.ops) {
    if (op.group.empty() || !is_communication_kind(op.kind)) continue;
    if (auto it = group_of.find(std::string_view(op.group)); it != group_of.end()) collective[op.id] = it->second;
  }

  // Per (device, group) of a collective: the bandwidth of the links its flows leave by and
  // arrive by, from the routes to and from the group's other ranks; and where the group spans
  // nodes, of the links by which data leaves and enters the device's node.
  auto tier_of = [&](std::uint32_t rank) { return *platform.devices[devices[rank]].compute_tier; };
  auto node_of = [&](std::uint32_t rank) { return platform.devices[devices[rank]].node; };
  std::set<std::pair<std::uint32_t, std::uint32_t>> pairs;  // (device, group)
  for (const Op& op : trace.ops)
    if (collective[op.id] != kNone) pairs.emplace(op.device, collective[op.id]);
  std::vector<std::vector<std::size_t>> wanted(platform.tiers.size());
  for (const auto& [d, g] : pairs)
    for (std::uint32_t r : groups[g]->ranks) {
      if (r != d) {
        wanted[tier_of(d)].push_back(tier_of(r));
        wanted[tier_of(r)].push_back(tier_of(d));
      }
      if (node_of(r) != node_of(d))
        for (std::uint32_t a : groups[g]->ranks)
          if (node_of(a) == node_of(d)) {
            wanted[tier_of(a)].push_back(tier_of(r));
            wanted[tier_of(r)].push_back(tier_of(a));
          }
    }
  for (auto& w : wanted) {
    std::sort(w.begin(), w.end());
    w.erase(std::unique(w.begin(), w.end()), w.end());
  }
  const RouteTable routes = compute_routes(platform, &wanted);
  struct Reach {
    double out = 0, in = 0;            // the device's own links, B/s
    double node_out = 0, node_in = 0;  // its node's links to and from the group's other nodes (0: none)
    double remote = 0;                 // the share of the group's ranks on other nodes
  };
  auto sum_bandwidth = [&](const std::set<std::size_t>& links) {
    double bw = 0;
    for (std::size_t l : links) bw += platform.links[l].bandwidth_Bps;
    return bw;
  };
  std::map<std::pair<std::uint32_t, std::uint32_t>, Reach> reach;
  for (const auto& [d, g] : pairs) {
    const std::vector<std::uint32_t>& ranks = groups[g]->ranks;
    std::set<std::size_t> out_links, in_links;
    for (std::uint32_t r : ranks) {
      if (r == d || tier_of(r) == tier_of(d)) continue;
      if (const Route* to = routes.find(tier_of(d), tier_of(r)))
        for (const RouteElement& e : to->elements)
          if (e.kind == RouteElement::Kind::link) {
            out_links.insert(e.index);
            break;
          }
      if (const Route* from = routes.find(tier_of(r), tier_of(d)))
        for (auto e = from->elements.rbegin(); e != from->elements.rend(); ++e)
          if (e->kind == RouteElement::Kind::link) {
            in_links.insert(e->index);
            break;
          }
    }
    Reach& x = reach[{d, g}];
    x.out = sum_bandwidth(out_links);
    x.in = sum_bandwidth(in_links);
    // Data a rank of another node sends to this node crosses the first link of its route that
    // belongs to this node (a link of the node, or a fabric link with an end in it), and data
    // leaving crosses the last: what the group's ranks here exchange with the others goes
    // through those links, whichever of them relays it.
    const std::uint32_t here = node_of(d);
    std::size_t away = 0;
    for (std::uint32_t r : ranks) away += node_of(r) != here;
    if (away == 0) continue;
    std::set<std::size_t> exits, entries;
    bool known = true;
    for (std::uint32_t a : ranks) {
      if (node_of(a) != here) continue;
      for (std::uint32_t r : ranks) {
        if (node_of(r) == here) continue;
        const Route* out = routes.find(tier_of(a), tier_of(r));
        const Route* in = routes.find(tier_of(r), tier_of(a));
        std::optional<std::size_t> exit, entry;
        if (out)
          for (const RouteElement& e : out->elements)
            if (e.kind == RouteElement::Kind::link && platform.links[e.index].node == here) exit = e.index;
        if (in)
          for (const RouteElement& e : in->elements)
            if (e.kind == RouteElement::Kind::link && platform.links[e.index].node == here) {
              entry = e.index;
              break;
            }
        if (!exit || !entry) known = false;  // a route this cannot place: no bound from the node
        if (exit) exits.insert(*exit);
        if (entry) entries.insert(*entry);
      }
    }
    if (!known) continue;
    x.node_out = sum_bandwidth(exits);
    x.node_in = sum_bandwidth(entries);
    x.remote = static_cast<double>(away) / static_cast<double>(ranks.size());
  }

  // NCCL's protocols (CollectiveModel): a phase's bytes go at no more than the best protocol's
  // efficiency x (1 - ring_fill / ranks) of the link, the ranks of a ring at most the group's,
  // then wait at least the least protocol latency; no collective is under one step's floor.
  const CollectiveModel& nccl = platform.collectives;
  double efficiency = 1, latency = 0;
  if (nccl.on()) {
    efficiency = 0;
    latency = std::numeric_limits<double>::infinity();
    for (const auto& p : nccl.protocols) {
      efficiency = std::max(efficiency, p.efficiency);
      latency = std::min(latency, p.latency_s);
    }
  }

  // Nodes: an op, or one collective for all its simulated members (the k-th op of a group on
  // each device is its k-th collective, as NCCL orders them).
  std::vector<std::uint32_t> node(n_ops);
  std::vector<double> duration, ready;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> occurrence_node;  // (group, k)
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> seen;  // (device, group) -> collectives so far
  for (const Op& op : trace.ops) {
    double d = durations[op.id];
    std::uint32_t id = static_cast<std::uint32_t>(duration.size());
    if (const std::uint32_t g = collective[op.id]; g != kNone) {
      const std::uint32_t k = seen[{op.device, g}]++;
      auto [it, fresh] = occurrence_node.try_emplace({g, k}, id);
      id = it->second;
      const auto [out_bytes, in_bytes] =
          bytes_out_in(op.kind, static_cast<double>(op.message_bytes), groups[g]->ranks.size());
      const Reach& x = reach.at({op.device, g});
      const std::size_t n = groups[g]->ranks.size();
      const double rate = nccl.on() ? efficiency * (1.0 - nccl.ring_fill / static_cast<double>(std::max<std::size_t>(n, 2)))
                                    : 1.0;
      d = 0;
      if (out_bytes > 0 && x.out > 0) d = std::max(d, out_bytes / (x.out * rate));
      if (in_bytes > 0 && x.in > 0) d = std::max(d, in_bytes / (x.in * rate));
      // The node's share: the other nodes' part of the tensor enters it (all-gather,
      // all-reduce) or its ranks' part for them leaves it (reduce-scatter, all-reduce) at least
      // once. Sends and receives are the rank's own bound already.
      const double across = x.remote * static_cast<double>(op.message_bytes);
      const bool leaves = op.kind == "reduce_scatter" || op.kind == "all_reduce";
      const bool enters = op.kind == "all_gather" || op.kind == "all_reduce";
      if (leaves && across > 0 && x.node_out > 0) d = std::max(d, across / (x.node_out * rate));
      if (enters && across > 0 && x.node_in > 0) d = std::max(d, across / (x.node_in * rate));
      if (nccl.on() && (out_bytes > 0 || in_bytes > 0)) d = std::max(d + latency, nccl.floor_per_step_s);
      if (!fresh) {
        duration[id] = std::max(duration[id], d);
        node[op.id] = id;
        continue;
      }
    }
    node[op.id] = id;
    duration.push_back(d);
    ready.push_back(0.0);
  }
  const std::size_t n_nodes = duration.size();

  // The host's issue times: per device, the per-step time, then each op's host time in
  // program order (the later ops of a synchronizing call take none).
  std::vector<double> host_sum(devices.size(), 0.0);
  std::vector<bool> in_call(devices.size(), false);
  for (const Op& op : trace.ops) {
    const HostOverhead& host = platform.devices[devices[op.device]].host;
    if (!host.any()) continue;
    const bool syncs = host.syncs_after(op.kind);
    if (!(syncs && in_call[op.device])) host_sum[op.device] += host_time_at_least(host, op.kind);
    in_call[op.device] = syncs;
    ready[node[op.id]] = std::max(ready[node[op.id]], host.per_step_s + host_sum[op.device]);
  }

  // Edges: from each stream's previous op, and from the makers of what an op reads.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  edges.reserve(3 * n_ops);
  std::map<std::pair<std::uint32_t, std::uint64_t>, OpId> last_on;  // (device, stream) -> op
  std::vector<OpId> last_update(trace.buffers.size(), kNoOp);         // per buffer, so far
  for (const Op& op : trace.ops) {
    const std::uint32_t to = node[op.id];
    const std::uint64_t stream =
        collective[op.id] != kNone ? (std::uint64_t{1} << 32) | collective[op.id] : std::uint64_t{op.stream};
    auto [it, fresh] = last_on.try_emplace({op.device, stream}, op.id);
    if (!fresh) {
      if (node[it->second] != to) edges.emplace_back(node[it->second], to);
      it->second = op.id;
    }
    for (BufferId b : op.reads()) {
      const OpId p = trace.buffers[b].producer;
      if (p != kNoOp && p < n_ops && node[p] != to) edges.emplace_back(node[p], to);
      // And after the in-place updates issued before it (the engine's reads wait for them
      // whenever it runs more than one stream; with one, the stream's order has them first).
      // The latest is enough: it read b after the ones before it.
      if (const OpId u = last_update[b]; u != kNoOp && node[u] != to) edges.emplace_back(node[u], to);
    }
    for (BufferId b : op.updates) last_update[b] = op.id;
  }
  std::vector<std::uint32_t> first(n_nodes + 1, 0), next(edges.size()), waiting(n_nodes, 0);
  for (const auto& [from, to] : edges) {
    ++first[from + 1];
    ++waiting[to];
  }
  for (std::size_t i = 1; i <= n_nodes; ++i) first[i] += first[i - 1];
  {
    std::vector<std::uint32_t> at(first.begin(), first.end() - 1);
    for (const auto& [from, to] : edges) next[at[from]++] = to;
  }
  std::vector<std::uint32_t> queue;
  queue.reserve(n_nodes);
  for (std::uint32_t n = 0; n < n_nodes; ++n)
    if (waiting[n] == 0) queue.push_back(n);
  double longest = 0;
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const std::uint32_t n = queue[q];
    const double end = ready[n] + duration[n];
    longest = std::max(longest, end);
    for (std::uint32_t e = first[n]; e < first[n + 1]; ++e) {
      const std::uint32_t s = next[e];
      ready[s] = std::max(ready[s], end);
      if (--waiting[s] == 0) queue.push_back(s);
    }
  }
  if (queue.size() != n_nodes) return std::nullopt;  // a cycle: the matching is not the engine's
  return longest;
}

}  // namespace memsim
