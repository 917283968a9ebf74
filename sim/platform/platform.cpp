#include "sim/platform/platform.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/collectives/collectives.h"
#include "sim/core/error.h"
#include "sim/core/presets.h"
#include "sim/core/registry.h"
#include "sim/core/suggest.h"
#include "sim/memory/allocator.h"
#include "sim/platform/bounds.h"
#include "sim/workload/op_kinds.h"

namespace memsim {
namespace {

const std::vector<std::string> kDeviceKinds{"gpu", "tpu", "ipu", "cpu"};
const std::vector<std::string> kTierRoles{"compute", "offload", "scratch"};
const std::vector<std::string> kComputeDTypes{"fp32", "tf32", "fp16", "bf16", "fp8"};

double positive(const ConfigNode& n, UnitKind kind) { return n.as_positive_unit(kind); }

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
  if (auto a = n.find("allocator")) t.allocator = a->as_choice(names_of(builtin_allocators()));
  const AllocatorInfo& allocator = *find_allocator(t.allocator);
  // Another allocator's parameter is a misplaced key, not a typo: say whose it is.
  for (const auto& info : builtin_allocators())
    for (const auto& p : info.params)
      if (n.has(p.name) && std::none_of(allocator.params.begin(), allocator.params.end(),
                                        [&](const ParamSpec& s) { return s.name == p.name; }))
        n.key_node(p.name).fail(fmt::format("'{}' needs allocator: {}", p.name, info.name));
  t.allocator_params = std::make_shared<const Params>(allocator_params(allocator, n, tier_keys));
  t.capacity_bytes = allocator.tier_capacity ? allocator.tier_capacity(*t.allocator_params, n)
                                             : n.at("capacity").as_positive_bytes();
  t.bandwidth_Bps = positive(n.at("bandwidth"), UnitKind::bandwidth);
  if (auto l = n.find("latency")) t.latency_s = l->as_unit(UnitKind::time);
  return t;
}

// An `efficiency` or `memory_efficiency` table: `default` and known op kinds, each in (0, 1].
void load_efficiency_table(const ConfigNode& table, std::optional<double>& default_value,
                           SharedMap<std::string, double>& per_kind) {
  for (const auto& [kind_name, value] : table.entries()) {
    if (kind_name != "default" && !is_known_op_kind(kind_name)) {
      std::string kinds;
      for (const auto& k : known_op_kinds()) kinds += ", " + k;
      table.key_node(kind_name).fail(
          fmt::format("unknown op kind '{}'; expected default{}", kind_name, kinds));
    }
    double v = value.as_fraction();
    if (v <= 0) value.fail_expected("a number above 0 and at most 1");
    if (!is_device_efficiency(v)) value.fail_expected(kEfficiencyRange);
    if (kind_name == "default")
      default_value = v;
    else
      per_kind[kind_name] = v;
  }
}

HostOverhead load_host_overhead(const ConfigNode& n) {
  n.allow_only({"per_op", "per_step", "sync_after"});
  HostOverhead h;
  if (auto o = n.find("per_op")) {
    if (o->is_map()) {
      for (const auto& [kind, value] : o->entries()) {
        const double v = value.as_unit(UnitKind::time);
        if (v < 0) value.fail_expected("a time of at least 0");
        if (kind == "default")
          h.per_op_s = v;
        else
          h.per_kind_s[kind] = v;
      }
    } else {
      h.per_op_s = o->as_unit(UnitKind::time);
      if (h.per_op_s < 0) o->fail_expected("a time of at least 0");
    }
  }
  if (auto s = n.find("per_step")) {
    h.per_step_s = s->as_unit(UnitKind::time);
    if (h.per_step_s < 0) s->fail_expected("a time of at least 0");
  }
  if (auto s = n.find("sync_after"))
    for (const auto& k : s->items()) h.sync_after.push_back(k.as_string());
  return h;
}

// `algorithms:` of `collectives:`, NCCL's tuner as rules: per kind, a name ("auto" or an
// algorithm's) for every size, or a list of {below: SIZE, use: NAME}, the last without below.
std::map<std::string, std::vector<CollectiveModel::Rule>> load_algorithm_rules(const ConfigNode& n) {
  if (!n.is_map()) n.fail_expected("a map from a communication kind to an algorithm or a list of rules");
  std::vector<std::string> names = collective_algorithm_names();
  names.push_back("auto");
  std::map<std::string, std::vector<CollectiveModel::Rule>> out;
  for (const auto& [kind, v] : n.entries()) {
    if (!is_communication_kind(kind))
      n.key_node(kind).fail(fmt::format("'{}' is not a communication kind: expected one of {}{}", kind,
                                        fmt::join(communication_kinds(), ", "),
                                        did_you_mean(kind, communication_kinds())));
    auto algorithm = [&, kind = kind](const ConfigNode& use) {
      const std::string name = use.as_string();
      const CollectiveAlgorithm* a = find_collective_algorithm(name);
      if (name != "auto" && !a)
        use.fail(fmt::format("no collective algorithm '{}': expected one of {}{}", name, fmt::join(names, ", "),
                             did_you_mean(name, names)));
      if (a && !a->runs(kind))
        use.fail(fmt::format("algorithm '{}' does not run {}: it runs {}", name, kind, fmt::join(a->kinds, ", ")));
      return name;
    };
    std::vector<CollectiveModel::Rule> rules;
    if (v.is_sequence()) {
      const auto items = v.items();
      if (items.empty()) v.fail_expected("at least one rule (e.g. {below: 64MiB, use: tree})");
      for (std::size_t i = 0; i < items.size(); ++i) {
        const ConfigNode& r = items[i];
        if (!r.is_map()) r.fail_expected("a rule {below: SIZE, use: ALGORITHM} or {use: ALGORITHM}");
        r.allow_only({"below", "use"});
        CollectiveModel::Rule rule;
        if (auto b = r.find("below")) rule.below = b->as_positive_bytes();
        rule.use = algorithm(r.at("use"));
        if (rule.below == 0 && i + 1 < items.size())
          items[i + 1].fail("this rule is never used: the rule before it has no 'below' and takes every size");
        rules.push_back(std::move(rule));
      }
    } else {
      rules.push_back({0, algorithm(v)});
    }
    out[kind] = std::move(rules);
  }
  return out;
}

CollectiveModel load_collectives(const ConfigNode& n) {
  n.allow_only({"protocols", "floor_per_step", "ring_fill", "sm_share", "algorithms"});
  CollectiveModel c;
  auto time_at_least_0 = [](const ConfigNode& v) {
    const double t = v.as_unit(UnitKind::time);
    if (t < 0) v.fail_expected("a time of at least 0");
    return t;
  };
  if (auto a = n.find("algorithms")) c.algorithms = load_algorithm_rules(*a);
  // Protocols may be left out when the section only chooses algorithms.
  const auto protocols = c.algorithms.empty() || n.has("protocols") ? std::optional(n.at("protocols")) : std::nullopt;
  if (protocols && protocols->entries().empty())
    protocols->fail_expected("at least one protocol (e.g. simple: {latency: 20us, efficiency: 0.8})");
  if (protocols) for (const auto& [name, pn] : protocols->entries()) {
    pn.allow_only({"latency", "per_step", "efficiency"});
    CollectiveModel::Protocol p;
    p.name = name;
    if (auto l = pn.find("latency")) p.latency_s = time_at_least_0(*l);
    if (auto l = pn.find("per_step")) p.per_step_s = time_at_least_0(*l);
    const auto e = pn.at("efficiency");
    p.efficiency = e.as_fraction();
    if (!(p.efficiency > 0 && p.efficiency <= 1)) e.fail_expected("a number above 0 and at most 1");
    c.protocols.push_back(std::move(p));
  }
  if (auto f = n.find("floor_per_step")) c.floor_per_step_s = time_at_least_0(*f);
  if (auto f = n.find("sm_share")) {
    c.sm_share = f->as_double();
    if (!(c.sm_share >= 0 && c.sm_share < 1)) f->fail_expected("a fraction from 0 to below 1");
  }
  if (auto r = n.find("ring_fill")) {
    c.ring_fill = r->as_double();
    if (!(c.ring_fill >= 0 && c.ring_fill < 2)) r->fail_expected("a number from 0 to below 2 (the bandwidth lost to a ring of n ranks is ring_fill / n)");
  }
  return c;
}

void load_device(PlatformSpec& p, const std::string& name, const ConfigNode& n, std::uint32_t node) {
  n.allow_only({"kind", "compute", "launch_overhead", "streams", "copy_engines", "efficiency",
                "memory_efficiency", "exchange", "tiers", "reserved", "host_overhead", "gemm",
                "flash_attention"});
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
  if (auto h = n.find("host_overhead")) d.host = load_host_overhead(*h);
  if (auto g = n.find("gemm")) {
    g->allow_only({"sms", "tile"});
    d.gemm.sms = static_cast<std::uint32_t>(g->at("sms").as_int_in(1, 1 << 20));
    if (auto t = g->find("tile")) {
      const auto dims = t->items();
      if (dims.size() != 2) t->fail_expected("[tile_m, tile_n], two sizes of the output tile");
      d.gemm.tile_m = static_cast<std::uint32_t>(dims[0].as_int_in(1, 1 << 16));
      d.gemm.tile_n = static_cast<std::uint32_t>(dims[1].as_int_in(1, 1 << 16));
    }
  }
  if (auto f = n.find("flash_attention")) {
    f->allow_only({"fixed_keys"});
    const auto keys = f->at("fixed_keys").items();
    if (keys.size() != 2)
      f->at("fixed_keys").fail_expected("[forward, backward], the keys' worth of work a block of queries pays "
                                        "once in each pass");
    for (std::size_t i = 0; i < 2; ++i) {
      const double k = keys[i].as_double();
      if (!(k >= 0 && k <= 1e9)) keys[i].fail_expected("a number of keys from 0 to 1e9");
      (i == 0 ? d.flash.fixed_keys_forward : d.flash.fixed_keys_backward) = k;
    }
  }
  d.node = node;
  if (auto r = n.find("reserved"))
    for (const auto& [what, bytes] : r->entries()) d.reserved.emplace_back(what, bytes.as_bytes());
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
  if (!d.reserved.empty()) {
    if (!d.compute_tier) n.at("reserved").fail("only a device with a compute tier has reserved memory");
    std::uint64_t sum = 0;
    for (const auto& r : d.reserved) sum += r.second;
    if (sum >= p.tiers[*d.compute_tier].capacity_bytes)
      n.at("reserved").fail(fmt::format("reserved memory ({} bytes) must be less than compute tier "
                                        "'{}' ({} bytes)",
                                        sum, p.tiers[*d.compute_tier].name,
                                        p.tiers[*d.compute_tier].capacity_bytes));
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

// Device `from` (node 0's) again as `name` on node `node`: its tiers renamed and appended.
void copy_device(PlatformSpec& p, std::size_t from, const std::string& name, std::uint32_t node) {
  const DeviceSpec& src = p.devices[from];  // p.devices does not grow before the end
  DeviceSpec d = src;
  d.name = name;
  d.node = node;
  d.tiers.clear();
  for (std::size_t old : src.tiers) {
    TierSpec t = p.tiers[old];
    t.name = name + t.name.substr(src.name.size());
    t.device = name;
    if (src.compute_tier == old) d.compute_tier = p.tiers.size();
    if (src.scratch_tier == old) d.scratch_tier = p.tiers.size();
    d.tiers.push_back(p.tiers.size());
    p.tiers.push_back(std::move(t));
  }
  p.devices.push_back(std::move(d));
}

// Names of node k of a multi-node platform (see platform.h): a trailing number is
// renumbered across the nodes, a name without one gets the node's number.
class NodeNames {
 public:
  NodeNames(std::uint32_t nodes, const std::vector<std::string>& names) : nodes_(nodes) {
    for (const auto& n : names) {
      auto [prefix, number] = split(n);
      if (number) span_[prefix] = std::max(span_[prefix], *number + 1);
    }
  }
  std::string operator()(const std::string& name, std::uint32_t k) const {
    if (nodes_ == 1) return name;
    auto [prefix, number] = split(name);
    if (!number) return name + std::to_string(k);
    const auto span = span_.find(prefix);
    if (span == span_.end()) return name;  // not a name of the node: the caller reports it
    return prefix + std::to_string(*number + static_cast<std::uint64_t>(k) * span->second);
  }

 private:
  static std::pair<std::string, std::optional<std::uint64_t>> split(const std::string& name) {
    std::size_t i = name.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
    if (i == name.size() || i == 0 || name.size() - i > 9) return {name, std::nullopt};
    return {name.substr(0, i), std::stoull(name.substr(i))};
  }
  std::uint32_t nodes_;
  std::map<std::string, std::uint64_t> span_;
};

std::vector<std::string> keys_of(const std::optional<ConfigNode>& map) {
  std::vector<std::string> out;
  if (map && map->is_map())
    for (const auto& [k, v] : map->entries()) out.push_back(k);
  return out;
}

}  // namespace

std::vector<std::uint64_t> reserved_per_tier(const PlatformSpec& platform, const Trace& trace) {
  std::vector<std::uint64_t> out(platform.tiers.size(), 0);
  const auto devices = platform.compute_devices();
  const bool communicates = trace.communicates();
  std::vector<bool> runs(devices.size(), false);
  for (const Op& op : trace.ops)
    if (op.device < runs.size()) runs[op.device] = true;
  for (std::size_t k = 0; k < devices.size(); ++k)
    if (runs[k]) {
      const DeviceSpec& d = platform.devices[devices[k]];
      out[*d.compute_tier] = d.reserved_bytes(communicates);
    }
  return out;
}

std::uint64_t DeviceSpec::reserved_bytes(bool communicates) const {
  std::uint64_t sum = 0;
  for (const auto& [what, bytes] : reserved)
    if (what != "nccl" || communicates) sum += bytes;
  return sum;
}

std::string_view to_string(DeviceKind k) { return kDeviceKinds[static_cast<int>(k)]; }
std::string_view to_string(TierRole r) { return kTierRoles[static_cast<int>(r)]; }

double GemmModel::wave_factor(double m, double n, double batch) const {
  if (sms == 0 || m <= 0 || n <= 0 || batch <= 0) return 1.0;
  const double tiles = std::ceil(m / tile_m) * std::ceil(n / tile_n) * batch;
  const double waves = std::ceil(tiles / sms);
  return tiles / (waves * sms);
}

double FlashModel::factor(double keys, bool backward) const {
  const double fixed = backward ? fixed_keys_backward : fixed_keys_forward;
  if (fixed <= 0 || keys <= 0) return 1.0;
  return keys / (keys + fixed);
}

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
  root.allow_only({"name", "description", "devices", "switches", "links", "nodes", "fabric", "collectives"});
  PlatformSpec p;
  p.source = root.file();
  p.name = root.at("name").as_string();
  if (auto c = root.find("collectives")) p.collectives = load_collectives(*c);
  const std::optional<ConfigNode> nodes = root.find("nodes");
  if (nodes) p.nodes = static_cast<std::uint32_t>(nodes->as_int_in(1, 65536));
  std::optional<ConfigNode> fabric = root.find("fabric");
  p.cluster = fabric.has_value();
  if (fabric) {
    fabric->allow_only({"switches", "links"});
    if (p.nodes == 1 && !nodes) fabric->fail("a fabric joins nodes: give 'nodes: N' too");
  }
  // Copies of a node with nothing between them would be separate machines, not a cluster.
  if (p.nodes > 1 && !fabric)
    nodes->fail(fmt::format("{} nodes need a fabric to join them, and platform '{}' has no 'fabric' section: "
                            "nodes applies to a cluster (a node description and the fabric of switches and "
                            "links between its copies)",
                            p.nodes, p.name));
  auto devices = root.at("devices");
  const std::optional<ConfigNode> switches = root.find("switches");
  const std::optional<ConfigNode> links = root.find("links");
  std::vector<std::string> switch_names;
  // A switch is a name, or {name: NAME, reduces: true} for one that reduces (NVLS, SHARP).
  auto switch_entry = [](const ConfigNode& s, bool* reduces = nullptr) {
    if (!s.is_map()) return s.as_string();
    s.allow_only({"name", "reduces"});
    if (reduces)
      if (auto r = s.find("reduces")) *reduces = r->as_bool();
    return s.at("name").as_string();
  };
  if (switches)
    for (const auto& s : switches->items()) switch_names.push_back(switch_entry(s));
  const NodeNames device_name(p.nodes, keys_of(devices));
  const NodeNames switch_name(p.nodes, switch_names);
  const NodeNames link_name(p.nodes, keys_of(links));
  std::vector<std::string> fabric_switches;
  if (fabric)
    if (auto fs = fabric->find("switches"))
      for (const auto& s : fs->items()) fabric_switches.push_back(switch_entry(s));
  std::vector<std::string> fabric_node_links;  // fabric links with an end in the node
  auto is_fabric_switch = [&](const std::string& n) {
    return std::find(fabric_switches.begin(), fabric_switches.end(), n) != fabric_switches.end();
  };
  std::optional<ConfigNode> fabric_links = fabric ? fabric->find("links") : std::nullopt;
  if (fabric_links)
    for (const auto& [name, n] : fabric_links->entries()) {
      auto ends = n.find("endpoints");
      bool local = false;
      if (ends && ends->is_sequence())
        for (const auto& e : ends->items()) local |= !is_fabric_switch(e.as_string());
      if (local) fabric_node_links.push_back(name);
    }
  const NodeNames fabric_link_name(p.nodes, fabric_node_links);
  // An endpoint in node k: a tier (device.tier) or a switch of the node, renamed.
  auto in_node = [&](const std::string& end, std::uint32_t k) {
    if (is_fabric_switch(end)) return end;
    auto dot = end.find('.');
    if (dot != std::string::npos) return device_name(end.substr(0, dot), k) + end.substr(dot);
    if (std::find(switch_names.begin(), switch_names.end(), end) != switch_names.end())
      return switch_name(end, k);
    return end;  // not a name of the node: reported below as unknown
  };

  // Names seen so far, looked up in constant time: a platform of 2,048 nodes has 40,000
  // devices and tiers and 60,000 links, and a search of the lists for each made loading it
  // take minutes.
  std::unordered_set<std::string> device_seen, tier_seen, switch_seen, link_seen;
  const std::size_t devices_before = p.devices.size(), tiers_at_start = p.tiers.size();
  for (std::uint32_t k = 0; k < p.nodes; ++k) {
    std::size_t i = devices_before;  // node 0's copy of this device
    for (const auto& [name, dev] : devices.entries()) {
      const std::string renamed = device_name(name, k);
      if (device_seen.count(renamed))
        dev.fail(fmt::format("device '{}' (node {}'s '{}') is already a device of another node", renamed, k, name));
      const std::size_t tiers_before = p.tiers.size();
      // Node 0 is read from its entry; another node is node 0's copy, renamed, and shares
      // its tables (what would be read again is the same and passed the same checks).
      if (k == 0)
        load_device(p, renamed, dev, k);
      else
        copy_device(p, i++, renamed, k);
      device_seen.insert(renamed);
      for (std::size_t t = tiers_before; t < p.tiers.size(); ++t) tier_seen.insert(p.tiers[t].name);
    }
    if (k == 0 && p.nodes > 1) {
      // Every node holds what the first does: room for all of them at once, not the doubling
      // of a growing vector (which kept up to twice the 16,384 GPUs' devices and tiers).
      p.devices.reserve(devices_before + (p.devices.size() - devices_before) * p.nodes);
      p.tiers.reserve(tiers_at_start + (p.tiers.size() - tiers_at_start) * p.nodes);
    }
  }
  if (p.compute_devices().empty())
    devices.fail("no device has a compute tier (a tier with role: compute)");
  auto add_switch = [&](const ConfigNode& at, const std::string& name) {
    if (tier_seen.count(name) || device_seen.count(name) || switch_seen.count(name))
      at.fail(fmt::format("switch name '{}' is already used", name));
    p.switches.push_back(name);
    switch_seen.insert(name);
    bool reduces = false;
    switch_entry(at, &reduces);
    if (reduces) p.reducing_switches.push_back(name);
  };
  for (std::uint32_t k = 0; k < p.nodes; ++k)
    if (switches)
      for (const auto& s : switches->items()) add_switch(s, switch_name(switch_entry(s), k));
  if (fabric)
    if (auto fs = fabric->find("switches"))
      for (const auto& s : fs->items()) add_switch(s, switch_entry(s));
  auto is_node = [&](const std::string& name) {
    return tier_seen.count(name) > 0 || switch_seen.count(name) > 0;
  };
  auto add_link = [&](const std::string& name, const ConfigNode& n, const std::string& from,
                      const std::string& to, std::optional<std::uint32_t> node) {
    n.allow_only({"endpoints", "bandwidth", "latency", "duplex"});
    LinkSpec l;
    l.name = name;
    auto ends = n.at("endpoints");
    auto items = ends.items();
    if (items.size() != 2) ends.fail_expected("two tier names like [gpu0.hbm, host.dram]");
    const std::string renamed[2] = {from, to};
    for (int i = 0; i < 2; ++i)
      if (!is_node(renamed[i]))
        items[i].fail_expected("a tier (device.tier, e.g. gpu0.hbm) or a switch of this platform");
    l.from = from;
    l.to = to;
    if (l.from == l.to) ends.fail("a link must join two different tiers");
    if (!link_seen.insert(l.name).second) n.fail(fmt::format("link name '{}' is already used", l.name));
    l.bandwidth_Bps = positive(n.at("bandwidth"), UnitKind::bandwidth);
    if (auto lat = n.find("latency")) l.latency_s = lat->as_unit(UnitKind::time);
    if (auto dup = n.find("duplex")) l.full_duplex = dup->as_choice({"full", "half"}) == "full";
    l.node = node;
    p.links.push_back(std::move(l));
  };
  auto ends_of = [](const ConfigNode& n) {
    std::vector<std::string> out;
    if (auto e = n.find("endpoints"); e && e->is_sequence())
      for (const auto& item : e->items()) out.push_back(item.as_string());
    out.resize(2);
    return out;
  };
  p.links.reserve(p.links.size() + (links ? links->entries().size() * p.nodes : 0) +
                  (fabric_links ? fabric_links->entries().size() * p.nodes : 0));
  for (std::uint32_t k = 0; k < p.nodes; ++k)
    if (links)
      for (const auto& [name, n] : links->entries()) {
        const auto e = ends_of(n);
        add_link(link_name(name, k), n, in_node(e[0], k), in_node(e[1], k), k);
      }
  if (fabric_links)
    for (const auto& [name, n] : fabric_links->entries()) {
      const auto e = ends_of(n);
      const bool local = std::find(fabric_node_links.begin(), fabric_node_links.end(), name) !=
                         fabric_node_links.end();
      for (std::uint32_t k = 0; k < (local ? p.nodes : 1); ++k)
        add_link(local ? fabric_link_name(name, k) : name, n, in_node(e[0], k), in_node(e[1], k),
                 local ? std::optional<std::uint32_t>(k) : std::nullopt);
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
                                                    "efficiency", "memory_efficiency", "exchange", "tiers",
                                                    "host_overhead", "gemm", "flash_attention", "reserved"};
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
  if (parts[0] == "name" || (parts[0] == "nodes" && parts.size() == 1) || parts[0] == "collectives") return parts;
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

bool glob_matches(const std::string& glob, const std::string& name) {
  // Greedy with backtracking to the last '*': linear in practice for names this short.
  std::size_t g = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = n;
    } else if (g < glob.size() && glob[g] == name[n]) {
      ++g;
      ++n;
    } else if (star != std::string::npos) {
      g = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

std::vector<std::string> expand_device_glob(const std::string& key, const std::vector<std::string>& devices) {
  const auto dot = key.find('.');
  const std::string head = key.substr(0, dot);
  if (head.find('*') == std::string::npos) return {key};
  const std::string rest = dot == std::string::npos ? std::string() : key.substr(dot);
  std::vector<std::string> out;
  for (const auto& d : devices)
    if (glob_matches(head, d)) out.push_back(d + rest);
  return out;
}

std::vector<std::string> platform_document_devices(const ConfigNode& root) {
  return root.is_map() ? keys_of(root.find("devices")) : std::vector<std::string>{};
}

std::string more_devices_hint(const PlatformSpec& platform, std::size_t needed) {
  const std::size_t have = platform.compute_devices().size();
  if (platform.cluster) {
    const std::size_t per_node = std::max<std::size_t>(1, have / std::max<std::uint32_t>(1, platform.nodes));
    const std::size_t nodes = (needed + per_node - 1) / per_node;
    return fmt::format("; --set nodes={} makes {} ({} a node)", nodes, nodes * per_node, per_node);
  }
  // The presets with enough, from their files (an error path: loading them all is cheap).
  std::vector<std::string> machines, clusters;
  std::size_t per_cluster_node = 0;
  for (const std::string& name : preset_names("configs/devices")) {
    if (name == platform.name) continue;
    try {
      const Preset* preset = find_preset("configs/devices", name);
      const PlatformSpec other = load_platform(ConfigNode::parse_text(preset->text, preset->path));
      const std::size_t n = other.compute_devices().size();
      if (other.cluster) {
        clusters.push_back(name);
        per_cluster_node = std::max<std::size_t>(per_cluster_node, n / other.nodes);
      } else if (n >= needed) {
        machines.push_back(fmt::format("{} {}", name, n));
      }
    } catch (const InputError&) {
      // A preset that does not load is reported where it is used, not here.
    }
  }
  std::string out = fmt::format("; for {}: ", needed);
  auto list = [](const std::vector<std::string>& xs) {
    std::string text;
    for (const auto& x : xs) text += (text.empty() ? "" : ", ") + x;
    return text;
  };
  if (!machines.empty()) out += fmt::format("a preset with more ({})", list(machines));
  if (!clusters.empty())
    out += fmt::format("{}a cluster preset with --set nodes=N ({}: up to {} a node)", machines.empty() ? "" : " or ",
                       list(clusters), per_cluster_node);
  if (machines.empty() && clusters.empty()) out += "a platform with more compute devices";
  return out;
}

}  // namespace memsim
