#include "sim/engine/sg_platform.h"

#include <algorithm>

#include "sim/platform/routes.h"

namespace sg4 = simgrid::s4u;

namespace memsim {

namespace {
constexpr std::size_t kMostFullZoneHosts = 1024;
}  // namespace

SgPlatform build_sg_platform(const PlatformSpec& platform,
                             const std::vector<std::vector<std::size_t>>* wanted,
                             const std::vector<bool>* running) {
  SgPlatform sg;
  sg.routes = compute_routes(platform, wanted);
  const RouteTable& routes = sg.routes;
  const std::size_t n_tiers = platform.tiers.size();
  // Only what the run's routes and streams touch becomes SimGrid's: a 16,384-GPU platform
  // has 40,000 devices and tiers where a run uses a few hundred.
  std::vector<bool> tier_used(n_tiers, false);
  for (std::size_t src = 0; src < n_tiers; ++src)
    for (const auto& [dst, route] : routes.from(src)) tier_used[src] = tier_used[dst] = true;
  std::vector<bool> device_used(platform.devices.size(), false);
  for (std::size_t d = 0; d < platform.devices.size(); ++d) {
    device_used[d] = running == nullptr || (d < running->size() && (*running)[d]);
    for (std::size_t t : platform.devices[d].tiers) device_used[d] = device_used[d] || tier_used[t];
    if (device_used[d])
      for (std::size_t t : platform.devices[d].tiers) tier_used[t] = true;  // its memory is placed
  }

  // A full zone keeps a route slot for every pair of its hosts and finds a route in one
  // look-up; past kMostFullZoneHosts hosts (8 MiB of slots) the routes are instead SimGrid's
  // bypass routes of a zone with no routing of its own, a map of the pairs the run uses
  // (2,060 hosts on a 16,384-GPU data-parallel ring: 34 MB of empty slots), whose look-up
  // for each transfer is a search of that map (4% of GPT-3 175B's run on 1,024 A100s, 300
  // hosts). Floyd's zone keeps three such tables, a cached Dijkstra zone one row per sending
  // host. Both give every transfer the same links.
  std::size_t hosts = static_cast<std::size_t>(std::count(tier_used.begin(), tier_used.end(), true));
  for (std::size_t d = 0; d < platform.devices.size(); ++d)
    if (device_used[d] && platform.devices[d].tiers.empty()) ++hosts;  // else its first tier's
  const std::string zone_name = platform.name.empty() ? "platform" : platform.name;
  const bool full = hosts <= kMostFullZoneHosts;
  auto* zone = full ? sg4::create_full_zone(zone_name) : sg4::create_empty_zone(zone_name);
  sg.device_hosts.assign(platform.devices.size(), nullptr);
  sg.tier_hosts.assign(n_tiers, nullptr);
  // A device and its first tier are one SimGrid host: its streams' actors run there and the
  // tier's copies start or end there (a host's speed is taken by executions alone, and only
  // the streams execute), one host fewer per device.
  for (std::size_t d = 0; d < platform.devices.size(); ++d)
    if (device_used[d]) {
      sg.device_hosts[d] = zone->create_host(platform.devices[d].name, kHostSpeed);
      if (!platform.devices[d].tiers.empty()) sg.tier_hosts[platform.devices[d].tiers.front()] = sg.device_hosts[d];
    }
  for (std::size_t t = 0; t < n_tiers; ++t)
    if (tier_used[t] && !sg.tier_hosts[t]) sg.tier_hosts[t] = zone->create_host(platform.tiers[t].name, 1.0);

  // Links, and each tier's own memory as a shared resource: a copy reads its source and
  // writes its destination at no more than their bandwidths, and copies into one host memory
  // share it. Routes (platform/routes.h) say which of them each copy crosses; a link or a
  // memory no route crosses is not made.
  std::vector<sg4::Link*> links(platform.links.size(), nullptr);
  auto link = [&](std::size_t l) {
    if (!links[l]) {
      const LinkSpec& spec = platform.links[l];
      links[l] = spec.full_duplex ? zone->create_split_duplex_link(spec.name, spec.bandwidth_Bps)
                                  : zone->create_link(spec.name, spec.bandwidth_Bps);
      links[l]->set_latency(spec.latency_s);
    }
    return links[l];
  };
  std::vector<sg4::Link*> memory_ports(n_tiers, nullptr);
  auto memory_port = [&](std::size_t t) {
    if (!memory_ports[t]) {
      memory_ports[t] = zone->create_link(platform.tiers[t].name + ".memory", platform.tiers[t].bandwidth_Bps);
      memory_ports[t]->set_latency(platform.tiers[t].latency_s);
    }
    return memory_ports[t];
  };
  for (std::size_t src = 0; src < n_tiers; ++src)
    for (const auto& [dst, r] : routes.from(src)) {
      std::vector<sg4::LinkInRoute> route;
      for (const RouteElement& e : r.elements) {
        if (e.kind == RouteElement::Kind::tier) {
          route.emplace_back(memory_port(e.index));
        } else if (platform.links[e.index].full_duplex) {
          route.emplace_back(link(e.index), e.forward ? sg4::LinkInRoute::Direction::UP
                                                      : sg4::LinkInRoute::Direction::DOWN);
        } else {
          route.emplace_back(link(e.index));
        }
      }
      if (full)
        zone->add_route(sg.tier_hosts[src]->get_netpoint(), sg.tier_hosts[dst]->get_netpoint(), nullptr, nullptr,
                        route, false);
      else  // never empty: a route crosses its two tiers' memories
        zone->add_bypass_route(sg.tier_hosts[src]->get_netpoint(), sg.tier_hosts[dst]->get_netpoint(), nullptr,
                               nullptr, route);
    }
  zone->seal();
  // Copy engines: made by the engine at a device's first copy (a semaphore is half a
  // kilobyte; 16,384 GPUs' were 19 MB for a run that copies on none of them, and the 2,056
  // devices a symmetric run's routes reach still 2 MB).
  sg.copy_slots.assign(2 * platform.devices.size(), nullptr);
  return sg;
}

}  // namespace memsim
