#include "sim/engine/sg_platform.h"

#include "sim/platform/routes.h"

namespace sg4 = simgrid::s4u;

namespace memsim {

SgPlatform build_sg_platform(const PlatformSpec& platform,
                             const std::vector<std::vector<std::size_t>>* wanted) {
  SgPlatform sg;
  auto* zone = sg4::create_full_zone(platform.name.empty() ? "platform" : platform.name);
  for (const auto& d : platform.devices) sg.device_hosts.push_back(zone->create_host(d.name, kHostSpeed));
  for (const auto& t : platform.tiers) sg.tier_hosts.push_back(zone->create_host(t.name, 1.0));

  // Links, and each tier's own memory as a shared resource: a copy reads its source and
  // writes its destination at no more than their bandwidths, and copies into one host memory
  // share it. Routes (platform/routes.h) say which of them each copy crosses.
  std::vector<sg4::Link*> links;
  for (const auto& l : platform.links) {
    sg4::Link* link = l.full_duplex ? zone->create_split_duplex_link(l.name, l.bandwidth_Bps)
                                    : zone->create_link(l.name, l.bandwidth_Bps);
    link->set_latency(l.latency_s);
    links.push_back(link);
  }
  std::vector<sg4::Link*> memory_port;
  for (const auto& t : platform.tiers) {
    auto* port = zone->create_link(t.name + ".memory", t.bandwidth_Bps);
    port->set_latency(t.latency_s);
    memory_port.push_back(port);
  }
  const std::size_t n_tiers = platform.tiers.size();
  sg.routed.assign(n_tiers, std::vector<bool>(n_tiers, false));
  sg.routes = compute_routes(platform, wanted);
  const RouteTable& routes = sg.routes;
  for (std::size_t src = 0; src < n_tiers; ++src)
    for (std::size_t dst = 0; dst < n_tiers; ++dst) {
      if (!routes[src][dst]) continue;
      std::vector<sg4::LinkInRoute> route;
      for (const RouteElement& e : routes[src][dst]->elements) {
        if (e.kind == RouteElement::Kind::tier) {
          route.emplace_back(memory_port[e.index]);
        } else if (platform.links[e.index].full_duplex) {
          route.emplace_back(links[e.index], e.forward ? sg4::LinkInRoute::Direction::UP
                                                       : sg4::LinkInRoute::Direction::DOWN);
        } else {
          route.emplace_back(links[e.index]);
        }
      }
      zone->add_route(sg.tier_hosts[src]->get_netpoint(), sg.tier_hosts[dst]->get_netpoint(), nullptr,
                      nullptr, route, false);
      sg.routed[src][dst] = true;
    }
  zone->seal();
  for (const auto& d : platform.devices)
    for (int dir = 0; dir < 2; ++dir) sg.copy_slots.push_back(sg4::Semaphore::create(d.copy_engines));
  return sg;
}

}  // namespace memsim
