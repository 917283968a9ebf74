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

/// routes[from][to]; nullopt when no links join them (and on the diagonal).
using RouteTable = std::vector<std::vector<std::optional<Route>>>;
/// Every pair's route, or with `wanted` only those from each tier to the tiers it lists
/// (the others nullopt): a 1,024-GPU platform has 1.6 M pairs and a run needs a few thousand.
RouteTable compute_routes(const PlatformSpec& platform,
                          const std::vector<std::vector<std::size_t>>* wanted = nullptr);

/// The offload tier a compute tier swaps to: the one with the widest route (then the
/// fewest hops, then file order); nullopt when none is reachable.
std::optional<std::size_t> nearest_offload_tier(const PlatformSpec& platform,
                                                const RouteTable& routes, std::size_t from);

}  // namespace memsim
