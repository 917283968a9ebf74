#pragma once
// What tests of the platform, the engine and the plan share: a built-in platform preset by name
// (a cluster at a node count of the test's choosing), and one without its hosts' time to issue
// ops, so that a step's time is the devices' alone.
#include <stdexcept>
#include <string>

#include "sim/core/config.h"
#include "sim/core/presets.h"
#include "sim/platform/platform.h"

namespace memsim::test {

/// The preset `name` of configs/devices, with `nodes: N` set when `nodes` is given.
inline PlatformSpec preset_platform(const std::string& name, const std::string& nodes = "") {
  const Preset* p = find_preset("configs/devices", name);
  if (p == nullptr) throw std::logic_error("no platform preset " + name);
  ConfigNode root = ConfigNode::parse_text(p->text, p->path);
  if (!nodes.empty()) root.override_value({"nodes"}, nodes, "test");
  return load_platform(root);
}

/// `p` with no host overhead (docs/time-model.md): no per-step or per-op host time.
inline PlatformSpec without_host_overhead(PlatformSpec p) {
  for (DeviceSpec& d : p.devices) d.host = HostOverhead{};
  return p;
}

}  // namespace memsim::test
