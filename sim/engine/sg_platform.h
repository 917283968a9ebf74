#pragma once
// The platform as SimGrid sees it, built once per run: every device the run uses is a host,
// which its first tier shares, and each of its other tiers another; every link its routes cross a link (split-duplex where the YAML says full duplex),
// and each tier's own memory a link of its bandwidth that every copy into or out of it
// crosses, so copies into one host memory share it. Routes between tiers follow platform/routes.h. Part of the
// engine: the only other file that includes SimGrid.
#include <vector>

#include <simgrid/s4u.hpp>

#include "sim/platform/platform.h"
#include "sim/platform/routes.h"

namespace memsim {

// Device hosts run 1e9 "flops" per simulated second: an op of duration d executes d x 1e9,
// which SimGrid resolves to within a few ULPs of d.
inline constexpr double kHostSpeed = 1e9;

struct SgPlatform {
  std::vector<simgrid::s4u::Host*> device_hosts;  // by platform device index; null: unused
  std::vector<simgrid::s4u::Host*> tier_hosts;    // by tier index; null: unused
  RouteTable routes;                              // what each route crosses (link traffic)
  std::vector<simgrid::s4u::SemaphorePtr> copy_slots;  // device x {out, in}: its copy engines; null until its first copy
};

/// Builds the zone, hosts, links and routes in SimGrid's engine (which must exist): the
/// routes `wanted` lists (compute_routes), or all of them; hosts for the devices `running`
/// marks (all without it) and for the devices and tiers the routes join.
SgPlatform build_sg_platform(const PlatformSpec& platform,
                             const std::vector<std::vector<std::size_t>>* wanted = nullptr,
                             const std::vector<bool>* running = nullptr);

}  // namespace memsim
