#include "sim/platform/platform.h"

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/memory/allocator.h"
#include "sim/workload/op_kinds.h"

namespace memsim {
namespace {

const std::vector<std::string> kDeviceKinds{"gpu", "tpu", "ipu", "cpu"};
const std::vector<std::string> kTierRoles{"compute", "offload", "scratch"};
const std::vector<std::string> kComputeDTypes{"fp32", "tf32", "fp16", "bf16", "fp8"};

double positive(const ConfigNode& n, UnitKind kind) { return n.as_positive_unit(kind); }

// Efficiencies scale the roofline: below a millionth an op would take a million times its
// work, which no calibrated device does (and 1e-320 would make times infinite).
constexpr double kLeastEfficiency = 1e-6;

// A tier's entry holds its own keys and its allocator's parameters.
TierSpec load_tier(const std::string& device, const std::string& name, const ConfigNode& n) {
  const std::vector<std::string> tier_keys{"role", "capacity", "bandwidth", "latency", "allocator"};
  std::vector<std::string> keys = tier_keys;
  for (const auto& info : builtin_allocators())
    for (const auto& p : info.params)
      if (std::find(keys.begin(), keys.end(), p.name) == keys.end()) keys.push_back(p.name);
  n.allow_only(keys);
  TierSpec t;
  t.name = device + "." + name;
  t.device = device;
  std::string role = n.at("role").as_choice(kTierRoles);
  t.role = role == "compute" ? TierRole::compute
           : role == "offload" ? TierRole::offload
                               : TierRole::scratch;
  if (auto a = n.find("allocator")) {
    std::vector<std::string> names;
    for (const auto& info : builtin_allocators()) names.push_back(info.name);
    t.allocator = a->as_choice(names);
  }
  const AllocatorInfo& allocator = *find_allocator(t.allocator);
  // Another allocator's parameter is a misplaced key, not a typo: say whose it is.
  for (const auto& info : builtin_allocators())
    for (const auto& p : info.params)
      if (n.has(p.name) && std::none_of(allocator.params.begin(), allocator.params.end(),
                                        [&](const ParamSpec& s) { return s.name == p.name; }))
        n.key_node(p.name).fail(fmt::format("'{}' needs allocator: {}", p.name, info.name));
  t.allocator_params = allocator_params(allocator, n, tier_keys);
  t.capacity_bytes = allocator.tier_capacity ? allocator.tier_capacity(*t.allocator_params, n)
                                             : n.at("capacity").as_positive_bytes();
  t.bandwidth_Bps = positive(n.at("bandwidth"), UnitKind::bandwidth);
  if (auto l = n.find("latency")) t.latency_s = l->as_unit(UnitKind::time);
  return t;
}

// An `efficiency` or `memory_efficiency` table: `default` and known op kinds, each in (0, 1].
void load_efficiency_table(const ConfigNode& table, std::optional<double>& default_value,
                           std::map<std::string, double>& per_kind) {
  for (const auto& [kind_name, value] : table.entries()) {
    if (kind_name != "default" && !is_known_op_kind(kind_name)) {
      std::string kinds;
      for (const auto& k : known_op_kinds()) kinds += ", " + k;
      table.key_node(kind_name).fail(
          fmt::format("unknown op kind '{}'; expected default{}", kind_name, kinds));
    }
    double v = value.as_fraction();
    if (v <= 0) value.fail_expected("a number above 0 and at most 1");
    if (v < kLeastEfficiency) value.fail_expected("a number from 0.000001 to 1");
    if (kind_name == "default")
      default_value = v;
    else
      per_kind[kind_name] = v;
  }
}

void load_device(PlatformSpec& p, const std::string& name, const ConfigNode& n) {
  n.allow_only({"kind", "compute", "launch_overhead", "streams", "copy_engines", "efficiency",
                "memory_efficiency", "exchange", "tiers"});
  if (name.find('.') != std::string::npos) n.fail("a device name may not contain '.'");
  DeviceSpec d;
  d.name = name;
  std::string kind = n.at("kind").as_choice(kDeviceKinds);
  d.kind = static_cast<DeviceKind>(
      std::find(kDeviceKinds.begin(), kDeviceKinds.end(), kind) - kDeviceKinds.begin());
  if (auto c = n.find("compute")) {
    c->allow_only({"fp32", "tf32", "fp16", "bf16", "fp8"});
    for (const auto& [dtype, rate] : c->entries())
      d.peak_flops[static_cast<int>(*dtype_from_string(dtype))] = positive(rate, UnitKind::rate);
  }
  if (auto l = n.find("launch_overhead")) d.launch_overhead_s = l->as_unit(UnitKind::time);
  if (auto s = n.find("streams")) d.streams = static_cast<int>(s->as_int_in(1, 1024));
  if (auto c = n.find("copy_engines")) d.copy_engines = static_cast<int>(c->as_int_in(1, 1024));
  if (auto e = n.find("efficiency")) {
    std::optional<double> def;
    load_efficiency_table(*e, def, d.efficiency);
    if (def) d.default_efficiency = *def;
  }
  if (auto e = n.find("memory_efficiency"))
    load_efficiency_table(*e, d.default_memory_efficiency, d.memory_efficiency);
  if (auto x = n.find("exchange")) {
    x->allow_only({"bandwidth", "sync"});
    d.exchange_Bps = positive(x->at("bandwidth"), UnitKind::bandwidth);
    if (auto s = x->find("sync")) d.sync_s = s->as_unit(UnitKind::time);
  }
  auto tiers = n.at("tiers");
  if (tiers.entries().empty()) tiers.fail_expected("at least one tier");
  for (const auto& [tier_name, tier] : tiers.entries()) {
    if (tier_name.find('.') != std::string::npos) tier.fail("a tier name may not contain '.'");
    TierSpec t = load_tier(name, tier_name, tier);
    if (t.role == TierRole::compute) {
      if (d.compute_tier)
        tier.at("role").fail(fmt::format("device '{}' already has compute tier '{}'", name,
                                         p.tiers[*d.compute_tier].name));
      d.compute_tier = p.tiers.size();
    }
    if (t.role == TierRole::scratch) {
      if (d.scratch_tier)
        tier.at("role").fail(fmt::format("device '{}' already has scratch tier '{}'", name,
                                         p.tiers[*d.scratch_tier].name));
      d.scratch_tier = p.tiers.size();
    }
    d.tiers.push_back(p.tiers.size());
    p.tiers.push_back(std::move(t));
  }
  if (d.compute_tier) {
    bool any_rate = false;
    for (double r : d.peak_flops) any_rate |= r > 0;
    if (!any_rate)
      n.fail(fmt::format("device '{}' has a compute tier but no compute rates (key 'compute')",
                         name));
  }
  p.devices.push_back(std::move(d));
}

}  // namespace

std::string_view to_string(DeviceKind k) { return kDeviceKinds[static_cast<int>(k)]; }
std::string_view to_string(TierRole r) { return kTierRoles[static_cast<int>(r)]; }

double DeviceSpec::efficiency_for(const std::string& op_kind) const {
  auto it = efficiency.find(op_kind);
  return it == efficiency.end() ? default_efficiency : it->second;
}

double DeviceSpec::memory_efficiency_for(const std::string& op_kind) const {
  auto it = memory_efficiency.find(op_kind);
  if (it != memory_efficiency.end()) return it->second;
  return default_memory_efficiency ? *default_memory_efficiency : efficiency_for(op_kind);
}

std::optional<std::size_t> DeviceSpec::operand_tier() const {
  if (compute_tier) return compute_tier;
  if (kind != DeviceKind::cpu || tiers.empty()) return std::nullopt;
  for (double r : peak_flops)
    if (r > 0) return tiers.front();
  return std::nullopt;
}

std::vector<std::size_t> PlatformSpec::op_devices() const {
  std::vector<std::size_t> out = compute_devices();
  for (std::size_t i = 0; i < devices.size(); ++i)
    if (!devices[i].compute_tier && devices[i].operand_tier()) out.push_back(i);
  return out;
}

std::optional<std::size_t> PlatformSpec::find_device(const std::string& n) const {
  for (std::size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name == n) return i;
  return std::nullopt;
}

std::optional<std::size_t> PlatformSpec::find_tier(const std::string& n) const {
  for (std::size_t i = 0; i < tiers.size(); ++i)
    if (tiers[i].name == n) return i;
  return std::nullopt;
}

std::vector<std::size_t> PlatformSpec::compute_devices() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < devices.size(); ++i)
    if (devices[i].compute_tier) out.push_back(i);
  return out;
}

PlatformSpec load_platform(const ConfigNode& root) {
  root.allow_only({"name", "description", "devices", "switches", "links"});
  PlatformSpec p;
  p.source = root.file();
  p.name = root.at("name").as_string();
  auto devices = root.at("devices");
  for (const auto& [name, dev] : devices.entries()) load_device(p, name, dev);
  if (p.compute_devices().empty())
    devices.fail("no device has a compute tier (a tier with role: compute)");
  if (auto switches = root.find("switches")) {
    for (const auto& s : switches->items()) {
      std::string name = s.as_string();
      if (p.find_tier(name) || p.find_device(name) ||
          std::find(p.switches.begin(), p.switches.end(), name) != p.switches.end())
        s.fail(fmt::format("switch name '{}' is already used", name));
      p.switches.push_back(name);
    }
  }
  auto is_node = [&](const std::string& name) {
    return p.find_tier(name) ||
           std::find(p.switches.begin(), p.switches.end(), name) != p.switches.end();
  };
  if (auto links = root.find("links")) {
    for (const auto& [name, n] : links->entries()) {
      n.allow_only({"endpoints", "bandwidth", "latency", "duplex"});
      LinkSpec l;
      l.name = name;
      auto ends = n.at("endpoints");
      auto items = ends.items();
      if (items.size() != 2) ends.fail_expected("two tier names like [gpu0.hbm, host.dram]");
      for (const auto& e : items)
        if (!is_node(e.as_string()))
          e.fail_expected("a tier (device.tier, e.g. gpu0.hbm) or a switch of this platform");
      l.from = items[0].as_string();
      l.to = items[1].as_string();
      if (l.from == l.to) ends.fail("a link must join two different tiers");
      l.bandwidth_Bps = positive(n.at("bandwidth"), UnitKind::bandwidth);
      if (auto lat = n.find("latency")) l.latency_s = lat->as_unit(UnitKind::time);
      if (auto dup = n.find("duplex")) l.full_duplex = dup->as_choice({"full", "half"}) == "full";
      p.links.push_back(std::move(l));
    }
  }
  return p;
}

std::optional<std::string> platform_override_problem(const ConfigNode& root, const std::string& key) {
  const auto first = key.find('.');
  const auto second = first == std::string::npos ? std::string::npos : key.find('.', first + 1);
  if (second == std::string::npos || !root.is_map()) return std::nullopt;
  const std::string device = key.substr(0, first), tier = key.substr(first + 1, second - first - 1);
  auto devices = root.find("devices");
  if (!devices || !devices->is_map() || !devices->has(device)) return std::nullopt;
  const auto dev = devices->at(device);
  static const std::vector<std::string> kDeviceKeys{"kind", "compute", "launch_overhead", "streams", "copy_engines",
                                                    "efficiency", "memory_efficiency", "exchange", "tiers"};
  if (!dev.is_map() || std::find(kDeviceKeys.begin(), kDeviceKeys.end(), tier) != kDeviceKeys.end()) return std::nullopt;
  auto tiers = dev.find("tiers");
  if (!tiers || !tiers->is_map() || tiers->has(tier)) return std::nullopt;
  std::string names;
  for (const auto& [name, value] : tiers->entries()) names += (names.empty() ? "" : ", ") + name;
  return fmt::format("no tier '{}' on {} (tiers: {})", tier, device, names);
}

std::optional<std::vector<std::string>> platform_override_path(const ConfigNode& root,
                                                               const std::string& key) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    auto dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (!root.is_map()) return std::nullopt;
  if (parts[0] == "name") return parts;
  auto devices = root.find("devices");
  if (devices && devices->is_map() && devices->has(parts[0]) && parts.size() >= 2) {
    auto dev = devices->at(parts[0]);
    auto tiers = dev.is_map() ? dev.find("tiers") : std::nullopt;
    if (parts.size() >= 3 && tiers && tiers->is_map() && tiers->has(parts[1])) {
      std::vector<std::string> path{"devices", parts[0], "tiers"};
      path.insert(path.end(), parts.begin() + 1, parts.end());
      return path;
    }
    std::vector<std::string> path{"devices"};
    path.insert(path.end(), parts.begin(), parts.end());
    return path;
  }
  auto links = root.find("links");
  if (links && links->is_map() && links->has(parts[0]) && parts.size() >= 2) {
    std::vector<std::string> path{"links"};
    path.insert(path.end(), parts.begin(), parts.end());
    return path;
  }
  if ((parts[0] == "devices" || parts[0] == "links") && parts.size() >= 2) return parts;
  return std::nullopt;
}

}  // namespace memsim
