#include "sim/platform/routes.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace memsim {

RouteTable compute_routes(const PlatformSpec& p) {
  const std::size_t n_tiers = p.tiers.size();
  const std::size_t n_nodes = n_tiers + p.switches.size();
  auto node_of = [&](const std::string& name) -> std::size_t {
    if (auto t = p.find_tier(name)) return *t;
    for (std::size_t i = 0; i < p.switches.size(); ++i)
      if (p.switches[i] == name) return n_tiers + i;
    throw std::logic_error("link endpoint not checked by the loader: " + name);
  };
  struct Hop {
    std::size_t to;
    std::size_t link;
    bool forward;
  };
  std::vector<std::vector<Hop>> adj(n_nodes);
  for (std::size_t l = 0; l < p.links.size(); ++l) {
    const std::size_t a = node_of(p.links[l].from), b = node_of(p.links[l].to);
    adj[a].push_back({b, l, true});
    adj[b].push_back({a, l, false});
  }
  // A node's own bandwidth: a tier's memory, or unlimited for a switch.
  auto node_bw = [&](std::size_t v) {
    return v < n_tiers ? p.tiers[v].bandwidth_Bps : std::numeric_limits<double>::infinity();
  };

  RouteTable table(n_tiers, std::vector<std::optional<Route>>(n_tiers));
  for (std::size_t src = 0; src < n_tiers; ++src) {
    // Dijkstra on the label (bottleneck bandwidth desc, hops asc), O(V^2): platforms are small.
    std::vector<double> width(n_nodes, -1);
    std::vector<std::size_t> hops(n_nodes, SIZE_MAX), prev(n_nodes, SIZE_MAX);
    std::vector<const Hop*> via(n_nodes, nullptr);
    std::vector<bool> done(n_nodes, false);
    width[src] = node_bw(src);
    hops[src] = 0;
    for (std::size_t iter = 0; iter < n_nodes; ++iter) {
      std::size_t u = SIZE_MAX;
      for (std::size_t v = 0; v < n_nodes; ++v)
        if (!done[v] && width[v] >= 0 &&
            (u == SIZE_MAX || width[v] > width[u] || (width[v] == width[u] && hops[v] < hops[u])))
          u = v;
      if (u == SIZE_MAX) break;
      done[u] = true;
      for (const Hop& h : adj[u]) {
        const double w = std::min({width[u], p.links[h.link].bandwidth_Bps, node_bw(h.to)});
        if (!done[h.to] && (w > width[h.to] || (w == width[h.to] && hops[u] + 1 < hops[h.to]))) {
          width[h.to] = w;
          hops[h.to] = hops[u] + 1;
          prev[h.to] = u;
          via[h.to] = &h;
        }
      }
    }
    for (std::size_t dst = 0; dst < n_tiers; ++dst) {
      if (dst == src || prev[dst] == SIZE_MAX) continue;
      Route r;
      r.bottleneck_Bps = width[dst];
      std::vector<RouteElement> middle;
      for (std::size_t v = dst; v != src; v = prev[v]) {
        if (v != dst && v < n_tiers) {
          middle.push_back({RouteElement::Kind::tier, v, true});
          r.latency_s += p.tiers[v].latency_s;
        }
        middle.push_back({RouteElement::Kind::link, via[v]->link, via[v]->forward});
        r.latency_s += p.links[via[v]->link].latency_s;
      }
      r.elements.push_back({RouteElement::Kind::tier, src, true});
      r.elements.insert(r.elements.end(), middle.rbegin(), middle.rend());
      r.elements.push_back({RouteElement::Kind::tier, dst, true});
      r.latency_s += p.tiers[src].latency_s + p.tiers[dst].latency_s;
      table[src][dst] = std::move(r);
    }
  }
  return table;
}

std::optional<std::size_t> nearest_offload_tier(const PlatformSpec& p, const RouteTable& routes,
                                                std::size_t from) {
  std::optional<std::size_t> best;
  for (std::size_t t = 0; t < p.tiers.size(); ++t) {
    if (p.tiers[t].role != TierRole::offload || !routes[from][t]) continue;
    if (!best) {
      best = t;
      continue;
    }
    const Route& a = *routes[from][t];
    const Route& b = *routes[from][*best];
    if (a.bottleneck_Bps > b.bottleneck_Bps ||
        (a.bottleneck_Bps == b.bottleneck_Bps && a.elements.size() < b.elements.size()))
      best = t;
  }
  return best;
}

}  // namespace memsim
