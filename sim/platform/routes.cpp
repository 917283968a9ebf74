#include "sim/platform/routes.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

namespace memsim {

RouteTable compute_routes(const PlatformSpec& p, const std::vector<std::vector<std::size_t>>* wanted) {
  const std::size_t n_tiers = p.tiers.size();
  const std::size_t n_nodes = n_tiers + p.switches.size();
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t t = 0; t < n_tiers; ++t) index.emplace(p.tiers[t].name, t);
  for (std::size_t i = 0; i < p.switches.size(); ++i) index.emplace(p.switches[i], n_tiers + i);
  auto node_of = [&](const std::string& name) -> std::size_t {
    auto it = index.find(name);
    if (it == index.end()) throw std::logic_error("link endpoint not checked by the loader: " + name);
    return it->second;
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
  std::vector<double> width(n_nodes);
  std::vector<std::size_t> hops(n_nodes), prev(n_nodes);
  std::vector<const Hop*> via(n_nodes);
  std::vector<bool> done(n_nodes);
  for (std::size_t src = 0; src < n_tiers; ++src) {
    if (wanted && (*wanted)[src].empty()) continue;
    // Dijkstra on the label (bottleneck bandwidth desc, hops asc, node index asc), with a
    // heap: the node settled next is the widest, then the nearest, then the first in order.
    std::fill(width.begin(), width.end(), -1.0);
    std::fill(hops.begin(), hops.end(), SIZE_MAX);
    std::fill(prev.begin(), prev.end(), SIZE_MAX);
    std::fill(via.begin(), via.end(), nullptr);
    std::fill(done.begin(), done.end(), false);
    using Label = std::tuple<double, std::size_t, std::size_t>;  // -width, hops, node
    std::priority_queue<Label, std::vector<Label>, std::greater<Label>> heap;
    width[src] = node_bw(src);
    hops[src] = 0;
    heap.emplace(-width[src], 0, src);
    while (!heap.empty()) {
      const auto [neg_w, h, u] = heap.top();
      heap.pop();
      if (done[u] || -neg_w != width[u] || h != hops[u]) continue;  // settled, or stale
      done[u] = true;
      for (const Hop& e : adj[u]) {
        const double w = std::min({width[u], p.links[e.link].bandwidth_Bps, node_bw(e.to)});
        if (!done[e.to] && (w > width[e.to] || (w == width[e.to] && hops[u] + 1 < hops[e.to]))) {
          width[e.to] = w;
          hops[e.to] = hops[u] + 1;
          prev[e.to] = u;
          via[e.to] = &e;
          heap.emplace(-w, hops[e.to], e.to);
        }
      }
    }
    auto add = [&](std::size_t dst) {
      if (dst == src || prev[dst] == SIZE_MAX) return;
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
    };
    if (wanted)
      for (std::size_t dst : (*wanted)[src]) add(dst);
    else
      for (std::size_t dst = 0; dst < n_tiers; ++dst) add(dst);
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
