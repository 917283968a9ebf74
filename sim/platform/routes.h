#pragma once
// How data travels between tiers: for every pair, the widest path (largest bottleneck
// bandwidth), then the fewest hops, then the links' file order — so GPUs talk over NVLink
// when they have it and over PCIe otherwise. A path may cross another tier (GPU -> switch
// -> host DRAM -> NVMe bounces through host memory) and then takes that tier's bandwidth
// too. Pure data: the engine turns routes into SimGrid routes, policies estimate copy times.
#include <cstddef>
#include <optional>
#include <vector>

#include "sim/platform/platform.h"

namespace memsim {

struct RouteElement {
  enum class Kind : unsigned char { tier, link } kind = Kind::link;
  std::size_t index = 0;  // into PlatformSpec::tiers or ::links
  bool forward = true;    // a link crossed from its first endpoint to its second
};

struct Route {
  /// Source tier, links and crossed tiers in order, destination tier.
  std::vector<RouteElement> elements;
  double bottleneck_Bps = 0;  // the narrowest link or tier on the way
  double latency_s = 0;       // the sum of the links' and tiers' latencies

  /// Time for `bytes` alone on this route: bytes / bottleneck + latency.
  double transfer_time_s(double bytes) const { return bytes / bottleneck_Bps + latency_s; }
};

/// The routes of a run, from tier to tier: only those asked for are held, so a platform of
/// 16,384 GPUs (270 M pairs) costs what the few thousand routes a run takes cost.
class RouteTable {
 public:
  explicit RouteTable(std::size_t tiers = 0) : from_(tiers) {}
  /// The route from `from` to `to`; nullptr when none is held (no links join them, it was
  /// not asked for, or from == to).
  const Route* find(std::size_t from, std::size_t to) const;
  /// Holds `route`; routes from one tier are set in increasing `to`, once each.
  void set(std::size_t from, std::size_t to, Route route);
  std::size_t tiers() const { return from_.size(); }
  /// The routes held from `from`, by destination in increasing order.
  const std::vector<std::pair<std::size_t, Route>>& from(std::size_t from) const { return from_[from]; }

 private:
  std::vector<std::vector<std::pair<std::size_t, Route>>> from_;
};

/// Every pair's route, or with `wanted` only those from each tier to the tiers it lists
/// (sorted, no repeats): a 1,024-GPU platform has 1.6 M pairs and a run needs a few thousand.
/// The search from a tier stops once what it wants is settled.
RouteTable compute_routes(const PlatformSpec& platform,
                          const std::vector<std::vector<std::size_t>>* wanted = nullptr);

/// The offload tier a compute tier swaps to and the routes there and back.
struct OffloadRoute {
  std::size_t tier = 0;
  Route out, in;
};
/// For each tier of `from`, the offload tier it swaps to: the one with the widest route (then
/// the fewest route elements, then file order); nullopt when none is reachable. One search
/// from each, stopped once no wider route is left, and one back.
std::vector<std::optional<OffloadRoute>> nearest_offloads(const PlatformSpec& platform,
                                                          const std::vector<std::size_t>& from);

}  // namespace memsim
