#include "sim/platform/routes.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace memsim {

const Route* RouteTable::find(std::size_t from, std::size_t to) const {
  if (from >= from_.size()) return nullptr;
  const auto& routes = from_[from];
  const auto it = std::lower_bound(routes.begin(), routes.end(), to,
                                   [](const auto& held, std::size_t t) { return held.first < t; });
  return it != routes.end() && it->first == to ? &it->second : nullptr;
}

void RouteTable::set(std::size_t from, std::size_t to, Route route) {
  auto& routes = from_[from];
  if (!routes.empty() && routes.back().first >= to)
    throw std::logic_error("RouteTable::set: routes from a tier out of order");
  routes.emplace_back(to, std::move(route));
}

namespace {

// Widest-path searches over the platform's graph (tiers and switches), one source at a time.
// The arrays are the graph's size and reset only where a search touched them, so a search
// that stops near its source costs what it explored, not the platform.
class Router {
  // A node's place in a search: -width, hops, node, compared in that order.
  struct Label {
    double neg_w;
    std::size_t hops, node;
  };
  // Whether `a` comes after `b` (the heap's top is what comes first).
  struct After {
    bool operator()(const Label& a, const Label& b) const {
      if (a.neg_w != b.neg_w) return a.neg_w > b.neg_w;
      if (a.hops != b.hops) return a.hops > b.hops;
      return a.node > b.node;
    }
  };

 public:
  explicit Router(const PlatformSpec& p) : p_(p), n_tiers_(p.tiers.size()) {
    const std::size_t n_nodes = n_tiers_ + p.switches.size();
    std::unordered_map<std::string, std::size_t> index;
    for (std::size_t t = 0; t < n_tiers_; ++t) index.emplace(p.tiers[t].name, t);
    for (std::size_t i = 0; i < p.switches.size(); ++i) index.emplace(p.switches[i], n_tiers_ + i);
    auto node_of = [&](const std::string& name) -> std::size_t {
      auto it = index.find(name);
      if (it == index.end()) throw std::logic_error("link endpoint not checked by the loader: " + name);
      return it->second;
    };
    adj_.resize(n_nodes);
    for (std::size_t l = 0; l < p.links.size(); ++l) {
      const std::size_t a = node_of(p.links[l].from), b = node_of(p.links[l].to);
      const double bw = p.links[l].bandwidth_Bps;
      adj_[a].push_back({b, l, true, std::min(bw, node_bw(b))});
      adj_[b].push_back({a, l, false, std::min(bw, node_bw(a))});
    }
    width_.assign(n_nodes, -1.0);
    hops_.assign(n_nodes, SIZE_MAX);
    prev_.assign(n_nodes, SIZE_MAX);
    via_.assign(n_nodes, nullptr);
    done_.assign(n_nodes, false);
  }

  /// Dijkstra from `src` on the label (bottleneck bandwidth desc, hops asc, node index asc):
  /// the node settled next is the widest, then the nearest, then the first in order.
  /// `settled(node, width)` is told of each node as it is settled and returns false to stop.
  template <class Settled>
  void search(std::size_t src, Settled&& settled) {
    for (std::size_t v : touched_) {
      width_[v] = -1.0;
      hops_[v] = SIZE_MAX;
      prev_[v] = SIZE_MAX;
      via_[v] = nullptr;
      done_[v] = false;
    }
    touched_.clear();
    src_ = src;
    // A min-heap on (-width, hops, node), in a vector kept from one search to the next.
    std::vector<Label>& heap = heap_;
    heap.clear();
    const auto push = [&heap](double neg_w, std::size_t hops, std::size_t v) {
      heap.push_back({neg_w, hops, v});
      std::push_heap(heap.begin(), heap.end(), After());
    };
    width_[src] = node_bw(src);
    hops_[src] = 0;
    touched_.push_back(src);
    push(-width_[src], 0, src);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), After());
      const auto [neg_w, h, u] = heap.back();
      heap.pop_back();
      if (done_[u] || -neg_w != width_[u] || h != hops_[u]) continue;  // settled, or stale
      done_[u] = true;
      if (!settled(u, width_[u])) return;
      for (const Hop& e : adj_[u]) {
        const double w = std::min(width_[u], e.width);
        if (!done_[e.to] && (w > width_[e.to] || (w == width_[e.to] && hops_[u] + 1 < hops_[e.to]))) {
          if (width_[e.to] < 0 && hops_[e.to] == SIZE_MAX) touched_.push_back(e.to);
          width_[e.to] = w;
          hops_[e.to] = hops_[u] + 1;
          prev_[e.to] = u;
          via_[e.to] = &e;
          push(-w, hops_[e.to], e.to);
        }
      }
    }
  }

  /// The route to `dst` the last search settled; nullopt when it did not reach it.
  std::optional<Route> route_to(std::size_t dst) const {
    if (dst == src_ || dst >= n_tiers_ || !done_[dst]) return std::nullopt;
    Route r;
    r.bottleneck_Bps = width_[dst];
    std::vector<RouteElement> middle;
    for (std::size_t v = dst; v != src_; v = prev_[v]) {
      if (v != dst && v < n_tiers_) {
        middle.push_back({RouteElement::Kind::tier, v, true});
        r.latency_s += p_.tiers[v].latency_s;
      }
      middle.push_back({RouteElement::Kind::link, via_[v]->link, via_[v]->forward});
      r.latency_s += p_.links[via_[v]->link].latency_s;
    }
    r.elements.push_back({RouteElement::Kind::tier, src_, true});
    r.elements.insert(r.elements.end(), middle.rbegin(), middle.rend());
    r.elements.push_back({RouteElement::Kind::tier, dst, true});
    r.latency_s += p_.tiers[src_].latency_s + p_.tiers[dst].latency_s;
    return r;
  }

  std::size_t tiers() const { return n_tiers_; }

 private:
  struct Hop {
    std::size_t to;
    std::size_t link;
    bool forward;
    // The link's bandwidth and its far end's, the least of them: what a route widens to
    // through it, kept here so that a search over a switch of 2,048 links reads its list
    // alone, not 2,048 links and tiers scattered over the platform.
    double width;
  };
  // A node's own bandwidth: a tier's memory, or unlimited for a switch.
  double node_bw(std::size_t v) const {
    return v < n_tiers_ ? p_.tiers[v].bandwidth_Bps : std::numeric_limits<double>::infinity();
  }

  const PlatformSpec& p_;
  std::size_t n_tiers_;
  std::vector<std::vector<Hop>> adj_;
  std::vector<double> width_;
  std::vector<std::size_t> hops_, prev_;
  std::vector<const Hop*> via_;
  std::vector<bool> done_;
  std::vector<std::size_t> touched_;
  std::vector<Label> heap_;
  std::size_t src_ = 0;
};

}  // namespace

RouteTable compute_routes(const PlatformSpec& p, const std::vector<std::vector<std::size_t>>* wanted) {
  Router router(p);
  RouteTable table(p.tiers.size());
  std::vector<bool> want(p.tiers.size(), false);
  for (std::size_t src = 0; src < p.tiers.size(); ++src) {
    if (wanted && (*wanted)[src].empty()) continue;
    std::size_t left = 0;  // wanted tiers not yet settled
    if (wanted)
      for (std::size_t dst : (*wanted)[src])
        if (dst != src && !want[dst]) {
          want[dst] = true;
          ++left;
        }
    router.search(src, [&](std::size_t v, double) {
      if (!wanted) return true;
      if (v < want.size() && want[v] && --left == 0) return false;
      return true;
    });
    if (wanted) {
      for (std::size_t dst : (*wanted)[src]) {
        if (!want[dst]) continue;  // a repeat
        want[dst] = false;
        if (auto r = router.route_to(dst)) table.set(src, dst, std::move(*r));
      }
    } else {
      for (std::size_t dst = 0; dst < p.tiers.size(); ++dst)
        if (auto r = router.route_to(dst)) table.set(src, dst, std::move(*r));
    }
  }
  return table;
}

std::vector<std::optional<OffloadRoute>> nearest_offloads(const PlatformSpec& p,
                                                          const std::vector<std::size_t>& sources) {
  Router router(p);
  std::vector<std::optional<OffloadRoute>> out;
  for (std::size_t from : sources) {
    // Widest first: every offload tier as wide as the first one settled is settled before
    // anything narrower; among those, the fewest route elements, then file order.
    double best_width = -1;
    std::vector<std::size_t> widest;
    router.search(from, [&](std::size_t v, double width) {
      if (best_width >= 0 && width < best_width) return false;
      if (v != from && v < p.tiers.size() && p.tiers[v].role == TierRole::offload) {
        best_width = width;
        widest.push_back(v);
      }
      return true;
    });
    std::optional<OffloadRoute> best;
    std::sort(widest.begin(), widest.end());
    for (std::size_t t : widest) {
      std::optional<Route> r = router.route_to(t);
      if (!r) continue;
      if (!best || r->elements.size() < best->out.elements.size()) best = OffloadRoute{t, std::move(*r), {}};
    }
    if (best) {
      router.search(best->tier, [&](std::size_t v, double) { return v != from; });
      if (std::optional<Route> back = router.route_to(from))
        best->in = std::move(*back);
      else
        best.reset();
    }
    out.push_back(std::move(best));
  }
  return out;
}

}  // namespace memsim
