#include "sim/engine/collective_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <unordered_map>

#include <fmt/format.h>
#include <simgrid/s4u.hpp>

#include "sim/collectives/choose.h"
#include "sim/core/error.h"

namespace sg4 = simgrid::s4u;

namespace memsim {

CollectiveRunner::CollectiveRunner(const PlatformSpec& platform, const Trace& trace,
                                   const std::vector<std::size_t>& compute_devices, std::size_t accelerators,
                                   double horizon_s)
    : horizon_s_(horizon_s), platform_(platform), trace_(trace), compute_devices_(compute_devices) {
  collective_.assign(trace.ops.size(), kNone);
  std::map<std::string, std::uint32_t> index;
  // Per switch that reduces (NVLS): the tiers with a link to it.
  std::vector<std::set<std::size_t>> reducing(platform.reducing_switches.size());
  if (!reducing.empty()) {
    std::unordered_map<std::string, std::size_t> switch_index, tier_index;
    for (std::size_t i = 0; i < platform.reducing_switches.size(); ++i) switch_index.emplace(platform.reducing_switches[i], i);
    for (std::size_t t = 0; t < platform.tiers.size(); ++t) tier_index.emplace(platform.tiers[t].name, t);
    for (const LinkSpec& l : platform.links)
      for (const auto& [sw, other] : {std::pair{&l.from, &l.to}, std::pair{&l.to, &l.from}}) {
        const auto s = switch_index.find(sw->str());
        const auto t = tier_index.find(other->str());
        if (s != switch_index.end() && t != tier_index.end()) reducing[s->second].insert(t->second);
      }
  }
  for (const ProcessGroup& g : trace.groups) {
    Group group;
    bool placed = g.ranks.size() >= 2;
    for (std::uint32_t r : g.ranks) {
      if (r >= accelerators) {
        placed = false;
        break;
      }
      group.tiers.push_back(*platform.devices[compute_devices[r]].compute_tier);
    }
    if (!placed) continue;
    for (std::uint32_t r : g.ranks) group.topology.nodes.push_back(platform.devices[compute_devices[r]].node);
    for (const auto& linked : reducing) {
      bool all = true;
      for (std::size_t t : group.tiers) all = all && linked.count(t) > 0;
      group.topology.reducing_switch = group.topology.reducing_switch || all;
    }
    index.emplace(g.name, static_cast<std::uint32_t>(groups_.size()));
    groups_.push_back(std::move(group));
  }
  std::vector<std::vector<bool>> member(groups_.size(), std::vector<bool>(accelerators, false));
  std::map<std::uint32_t, std::uint32_t> channels_per_device;
  for (const Op& op : trace.ops) {
    if (op.group.empty() || !is_communication_kind(op.kind)) continue;
    auto it = index.find(op.group);
    if (it == index.end()) continue;
    collective_[op.id] = it->second;
    std::uint32_t& used = channels_per_device[op.device];
    if (channel_.try_emplace({op.device, it->second}, used).second) ++used;
    if (op.device < accelerators && !member[it->second][op.device]) {
      member[it->second][op.device] = true;
      ++groups_[it->second].simulated;
    }
  }
}

std::uint32_t CollectiveRunner::stream(const Op& op) const {
  const auto base = static_cast<std::uint32_t>(platform_.devices[compute_devices_[op.device]].streams);
  const auto it = channel_.find({op.device, collective_[op.id]});
  return base + (it == channel_.end() ? 0 : it->second);
}

void CollectiveRunner::add_wanted_routes(std::vector<std::vector<std::size_t>>& want) const {
  auto both = [&](std::size_t a, std::size_t b) {
    if (a == b) return;
    want[a].push_back(b);
    want[b].push_back(a);
  };
  bool all_to_all = false;
  std::vector<std::set<std::string>> kinds(groups_.size());  // per group: the kinds run over it
  for (const Op& op : trace_.ops)
    if (runs(op.id)) {
      all_to_all |= op.kind == "all_to_all";
      kinds[collective_[op.id]].insert(op.kind);
    }
  const CollectiveAlgorithm& ring = *find_collective_algorithm("ring");
  for (std::size_t k = 0; k < groups_.size(); ++k) {
    const Group& g = groups_[k];
    auto pairs_of = [&](const CollectiveAlgorithm& a, std::string_view kind) {
      for (const CollectivePhase& phase : a.phases(kind, std::uint64_t{1} << 20, g.topology))
        for (const Flow& f : phase.flows) both(g.tiers[f.from], g.tiers[f.to]);
    };
    pairs_of(ring, "all_reduce");  // the rings' neighbours; reduce and broadcast run the chain back
    for (std::size_t i = 1; i < g.tiers.size(); ++i) both(g.tiers[0], g.tiers[i]);  // scatter, gather, send
    if (all_to_all)
      for (std::size_t a : g.tiers)
        for (std::size_t b : g.tiers)
          if (a != b) want[a].push_back(b);
    // What the platform's algorithms may choose besides (a tree's edges, the rails).
    for (const std::string& kind : kinds[k])
      for (const CollectiveAlgorithm* a : candidate_collective_algorithms(platform_.collectives, kind, g.topology))
        pairs_of(*a, kind);
  }
}

void CollectiveRunner::mark_running(std::uint32_t device, bool running) {
  if (running_.empty()) running_.assign(compute_devices_.size(), 0);
  running_[device] = static_cast<std::uint32_t>(static_cast<int>(running_[device]) + (running ? 1 : -1));
}

std::vector<CollectiveRunner::Prepared>& CollectiveRunner::prepare(const Op& op, std::uint32_t g,
                                                                       const SgPlatform& sg) {
  const PreparedKey key{g, reinterpret_cast<std::uintptr_t>(op.kind.c_str()), op.message_bytes};
  if (const auto it = prepared_.find(key); it != prepared_.end()) return it->second;
  const Group& group = groups_[g];
  const CollectiveModel& model = platform_.collectives;
  const CollectiveAlgorithm& algorithm =
      choose_collective_algorithm(model, op.kind, op.message_bytes, group.topology, [&](const CollectiveAlgorithm& a) {
        return predict_s(group, a.phases(op.kind, op.message_bytes, group.topology), sg.routes);
      });
  std::vector<Prepared> out;
  for (const CollectivePhase& phase : algorithm.phases(op.kind, op.message_bytes, group.topology)) {
    const TierFlows flows = tier_flows(group, phase);
    Prepared& p = out.emplace_back();
    p.steps = phase.steps;
    for (const auto& [pair, bytes] : flows) {
      const auto [from, to] = pair;
      const Route* route = sg.routes.find(from, to);
      if (!route)
        throw InputError(fmt::format("platform '{}' has no link from {} to {}, needed by {} '{}' over "
                                     "group '{}'",
                                     platform_.name, platform_.tiers[from].name,
                                     platform_.tiers[to].name, op.kind, op.name, op.group));
      p.latency_s = std::max(p.latency_s, route->latency_s);
      p.most = std::max(p.most, static_cast<double>(bytes));
    }
    p.nccl = nccl_cost(flows, sg.routes, phase.ranks, phase.steps);
    for (const auto& [pair, bytes] : flows)
      // On the wire at the protocol's efficiency: its bytes take 1 / efficiency of the time.
      p.flows.push_back({pair.first, pair.second, bytes,
                         static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) / p.nccl.efficiency))});
  }
  return prepared_.emplace(key, std::move(out)).first->second;
}

void CollectiveRunner::plan_replay(const SgPlatform& sg, bool copies_possible) {
  replay_.assign(groups_.size(), false);
  if (copies_possible) return;
  // Each group's phases, as run() will prepare them: every kind and size the trace runs over it.
  std::vector<bool> valid(groups_.size(), true);
  std::set<PreparedKey> keys;
  for (const Op& op : trace_.ops) {
    if (!runs(op.id)) continue;
    const std::uint32_t g = collective_[op.id];
    if (!valid[g] || !keys.insert({g, reinterpret_cast<std::uintptr_t>(op.kind.c_str()), op.message_bytes}).second)
      continue;
    try {
      prepare(op, g, sg);
    } catch (const std::exception&) {
      valid[g] = false;  // the error is the op's, when it runs
    }
  }
  // A resource of the network: a tier's memory, or a link (each way of a full-duplex one).
  auto resource = [&](const RouteElement& e) -> std::uint64_t {
    const std::uint64_t way = e.kind == RouteElement::Kind::tier       ? 3
                              : !platform_.links[e.index].full_duplex ? 0
                              : e.forward                             ? 1
                                                                      : 2;
    return static_cast<std::uint64_t>(e.index) * 4 + way;
  };
  auto bandwidth = [&](std::uint64_t r) {
    return r % 4 == 3 ? platform_.tiers[r / 4].bandwidth_Bps : platform_.links[r / 4].bandwidth_Bps;
  };
  // Per group, per resource its flows cross: the most one of its phases puts through it (a
  // group runs one phase at a time: its members' collectives over it are one stream each, and
  // the next starts when the last member has arrived from the one before).
  std::vector<std::map<std::uint64_t, double>> most(groups_.size());
  for (const auto& [key, phases] : prepared_) {
    const std::uint32_t g = std::get<0>(key);
    for (const Prepared& phase : phases) {
      std::map<std::uint64_t, double> through;
      for (const Prepared::Flow& f : phase.flows) {
        const Route* route = sg.routes.find(f.from, f.to);
        for (const RouteElement& e : route->elements) through[resource(e)] += route->bottleneck_Bps;
      }
      for (const auto& [r, rate] : through) most[g][r] = std::max(most[g][r], rate);
    }
  }
  std::map<std::uint64_t, double> demand;          // per resource: the most all groups put through it at once
  std::map<std::uint64_t, std::uint32_t> sharing;  // per resource: the groups whose flows cross it
  for (const auto& m : most)
    for (const auto& [r, rate] : m) {
      demand[r] += rate;
      ++sharing[r];
    }
  // A resource is taken as able to fill from 99% of its bandwidth: rounding in the sums
  // above must not call a full one free.
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    bool alone = valid[g] && !most[g].empty();
    for (const auto& [r, rate] : most[g])
      alone = alone && (sharing[r] == 1 || demand[r] < 0.99 * bandwidth(r));
    replay_[g] = alone;
  }
}

double CollectiveRunner::run(const Op& op, const SgPlatform& sg, Driver& driver) {
  driver.flush();
  const std::uint32_t g = collective_[op.id];
  const Group& group = groups_[g];
  const std::uint64_t k = issued_[{g, op.device}]++;
  Rendezvous& rv = rendezvous_[{g, k}];
  const double t0 = driver.now_s();
  // NCCL's kernel holds its SMs from its launch, also while it waits for its peers; a send's
  // or a receive's few channels are not the collectives' share.
  const bool holds = platform_.collectives.sm_share > 0 && op.kind != "send" && op.kind != "recv";
  if (holds) mark_running(op.device, true);
  if (++rv.arrived < group.simulated) {
    // The others run it when the last member arrives: NCCL's kernel waits for its peers.
    while (!rv.done && !driver.stopped()) driver.wait_until([&] { return rv.done; });
  } else {
    std::vector<sg4::CommPtr> comms;
    const bool replay = g < replay_.size() && replay_[g];
    for (Prepared& phase : prepare(op, g, sg)) {
      const double flows_start = driver.now_s();
      // Checked before SimGrid sees them: a protocol's time past the horizon (a latency of
      // years, an efficiency of a millionth) is an input error, not a flow of 1e20 bytes.
      const double longest = flows_start + phase.nccl.latency_s + phase.nccl.floor_s;
      if (!(longest <= horizon_s_) || !(phase.most / phase.nccl.efficiency < 1e18))
        driver.past_horizon(2 * horizon_s_, op.id);
      for (const Prepared::Flow& f : phase.flows) driver.count_route(f.from, f.to, f.bytes);
      double flows_end = flows_start + phase.alone_s;
      if (replay && phase.alone_s >= 0) {
        ++replayed_phases_;
      } else {
        comms.clear();
        for (const Prepared::Flow& f : phase.flows)
          comms.push_back(sg4::Comm::sendto_async(sg.tier_hosts[f.from], sg.tier_hosts[f.to], f.wire));
        if (!comms.empty()) sg4::Comm::wait_all(comms);
        flows_end = sg4::Engine::get_clock();
        if (replay) phase.alone_s = flows_end - flows_start;
      }
      // The phase's other latency-bound steps (see sim/collectives/collectives.h), the
      // protocol's latency, and the protocol's floor from the flows' start: one wait.
      double end = flows_end;
      if (phase.steps > 1) end += (phase.steps - 1) * phase.latency_s;
      if (phase.nccl.latency_s > 0) end += phase.nccl.latency_s;
      if (end - flows_start < phase.nccl.floor_s) end = flows_start + phase.nccl.floor_s;
      if (end > sg4::Engine::get_clock()) driver.sleep_until(end);
    }
    rv.done = true;
    driver.notify();
  }
  if (holds) mark_running(op.device, false);
  if (++rv.left == group.simulated) rendezvous_.erase({g, k});
  return t0;
}

CollectiveRunner::TierFlows CollectiveRunner::tier_flows(const Group& group, const CollectivePhase& phase) {
  // Flows between the same two tiers travel as one flow of their sum (NCCL's channels between
  // two GPUs share that path): fewer SimGrid activities, whose cost grows faster than their
  // number.
  TierFlows flows;
  for (const Flow& f : phase.flows) flows[{group.tiers[f.from], group.tiers[f.to]}] += f.bytes;
  return flows;
}

double CollectiveRunner::predict_s(const Group& group, const std::vector<CollectivePhase>& phases,
                                   const RouteTable& routes) const {
  double total = 0;
  for (const CollectivePhase& phase : phases) {
    const TierFlows flows = tier_flows(group, phase);
    // Bytes per link direction (a half-duplex link: both ways on one) and per tier memory.
    std::map<std::pair<std::size_t, int>, double> link_bytes;
    std::map<std::size_t, double> tier_bytes;
    double latency = 0;
    for (const auto& [pair, bytes] : flows) {
      const Route* route = routes.find(pair.first, pair.second);
      if (!route) return std::numeric_limits<double>::infinity();
      latency = std::max(latency, route->latency_s);
      for (const RouteElement& e : route->elements) {
        if (e.kind == RouteElement::Kind::tier) {
          tier_bytes[e.index] += static_cast<double>(bytes);
        } else {
          const int way = platform_.links[e.index].full_duplex ? (e.forward ? 1 : 2) : 0;
          link_bytes[{e.index, way}] += static_cast<double>(bytes);
        }
      }
    }
    double busiest = 0;  // seconds
    for (const auto& [link, bytes] : link_bytes)
      busiest = std::max(busiest, bytes / platform_.links[link.first].bandwidth_Bps);
    for (const auto& [tier, bytes] : tier_bytes) busiest = std::max(busiest, bytes / platform_.tiers[tier].bandwidth_Bps);
    const NcclCost nccl = nccl_cost(flows, routes, phase.ranks, phase.steps);
    const double t = busiest / nccl.efficiency + phase.steps * latency + nccl.latency_s;
    total += std::max(t, nccl.floor_s);
  }
  return total;
}

CollectiveRunner::NcclCost CollectiveRunner::nccl_cost(const TierFlows& flows, const RouteTable& routes, std::uint32_t n,
                                                       std::uint32_t steps) const {
  const CollectiveModel& model = platform_.collectives;
  NcclCost cost;
  if (!model.on() || flows.empty()) return cost;
  // The protocol NCCL would pick: the fastest for this message on an idle route.
  double narrowest = std::numeric_limits<double>::infinity();
  std::uint64_t most = 0;
  for (const auto& [pair, bytes] : flows) {
    narrowest = std::min(narrowest, routes.find(pair.first, pair.second)->bottleneck_Bps);
    most = std::max(most, bytes);
  }
  const double fill = 1.0 - model.ring_fill / std::max<std::uint32_t>(n, 2);
  double best = std::numeric_limits<double>::infinity();
  for (const auto& p : model.protocols) {
    const double latency = p.latency_s + steps * p.per_step_s;
    const double t = latency + static_cast<double>(most) / (narrowest * p.efficiency * fill);
    if (t < best) {
      best = t;
      cost.latency_s = latency;
      cost.efficiency = p.efficiency * fill;
    }
  }
  cost.floor_s = model.floor_per_step_s * steps;
  return cost;
}

}  // namespace memsim
