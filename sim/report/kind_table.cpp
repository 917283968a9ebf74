#include "sim/report/kind_table.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "sim/core/units.h"
#include "sim/collectives/collectives.h"
#include "sim/report/writers.h"

namespace memsim {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr Phase kPhases[] = {Phase::forward, Phase::backward, Phase::optimizer};

std::vector<std::string> phase_names(const OpKindTotals& k) {
  std::vector<std::string> out;
  for (Phase p : kPhases)
    if (k.phases[static_cast<int>(p)]) out.emplace_back(to_string(p));
  return out;
}

std::string title(const Trace& t) { return t.description.empty() ? t.name : t.description; }

// Columns padded to their widest cell; `right` marks the numeric ones. The last column is
// not padded (no trailing blanks).
std::string aligned(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<std::size_t> width(right.size(), 0);
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line = " ";
    for (std::size_t c = 0; c < r.size(); ++c) {
      line += ' ';
      const bool last = c + 1 == r.size();
      if (right[c])
        line += fmt::format("{:>{}}", r[c], width[c]);
      else
        line += last ? r[c] : fmt::format("{:<{}}", r[c], width[c]);
      if (!last) line += ' ';
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::set<std::string> kinds_of(const std::vector<OpKindTotals>& rows) {
  std::set<std::string> kinds;
  for (const auto& k : rows) kinds.insert(k.kind);
  return kinds;
}

}  // namespace

std::vector<OpKindTotals> op_kind_totals(const Trace& trace) {
  std::unordered_map<const std::string*, std::size_t> row_of;  // by the interned kind
  std::vector<OpKindTotals> rows;
  for (const Op& op : trace.ops) {
    const std::string& kind = op.kind.str();
    const auto [at, added] = row_of.try_emplace(&kind, rows.size());
    if (added) {
      rows.push_back(OpKindTotals{kind});
      rows.back().communication = is_communication_kind(kind);
    }
    OpKindTotals& r = rows[at->second];
    ++r.ops;
    r.flops += op.flops;
    r.bytes_moved += op.bytes_moved;
    r.message_bytes += op.message_bytes;
    r.phases[static_cast<int>(op.phase)] = true;
  }
  std::sort(rows.begin(), rows.end(), [](const OpKindTotals& a, const OpKindTotals& b) {
    if (a.flops != b.flops) return a.flops > b.flops;
    if (a.bytes_moved != b.bytes_moved) return a.bytes_moved > b.bytes_moved;
    return a.kind < b.kind;
  });
  return rows;
}

EfficiencyEntry efficiency_entry(const DeviceSpec& device, const std::string& kind) {
  if (auto it = device.efficiency.find(kind); it != device.efficiency.end())
    return {"efficiency." + kind, it->second};
  return {"efficiency.default", device.default_efficiency};
}

EfficiencyEntry memory_efficiency_entry(const DeviceSpec& device, const std::string& kind) {
  if (auto it = device.memory_efficiency.find(kind); it != device.memory_efficiency.end())
    return {"memory_efficiency." + kind, it->second};
  if (device.default_memory_efficiency) return {"memory_efficiency.default", *device.default_memory_efficiency};
  return efficiency_entry(device, kind);
}

UnusedEfficiencyKeys unused_efficiency_keys(const DeviceSpec& device, const std::set<std::string>& kinds) {
  UnusedEfficiencyKeys u{device.name, {}, {}};
  for (const auto& [kind, value] : device.efficiency)
    if (!kinds.contains(kind)) u.efficiency.push_back(kind);
  for (const auto& [kind, value] : device.memory_efficiency)
    if (!kinds.contains(kind)) u.memory_efficiency.push_back(kind);
  return u;
}

std::vector<std::string> qualified_keys(const UnusedEfficiencyKeys& unused) {
  std::vector<std::string> out;
  for (const std::string& k : unused.efficiency) out.push_back(unused.device + ".efficiency." + k);
  for (const std::string& k : unused.memory_efficiency) out.push_back(unused.device + ".memory_efficiency." + k);
  return out;
}

std::vector<UnusedEfficiencyKeys> unused_efficiency_keys(const Trace& trace, const PlatformSpec& platform) {
  const std::vector<std::size_t> devices = platform.op_devices();
  // The interned kinds each device runs: a pointer per op looked up, not a string compared.
  std::vector<std::unordered_set<const std::string*>> runs(devices.size());
  for (const Op& op : trace.ops)
    if (op.device < devices.size()) runs[op.device].insert(&op.kind.str());
  std::vector<UnusedEfficiencyKeys> out;
  for (std::size_t d = 0; d < devices.size(); ++d) {
    if (runs[d].empty()) continue;  // an idle device's tables time nothing, rightly
    std::set<std::string> kinds;
    for (const std::string* k : runs[d]) kinds.insert(*k);
    UnusedEfficiencyKeys u = unused_efficiency_keys(platform.devices[devices[d]], kinds);
    if (!u.efficiency.empty() || !u.memory_efficiency.empty()) out.push_back(std::move(u));
  }
  return out;
}

std::vector<std::string> unused_efficiency_lines(const std::vector<UnusedEfficiencyKeys>& unused,
                                                 const std::string& kinds_command) {
  std::vector<std::pair<std::string, std::string>> lines;
  for (const UnusedEfficiencyKeys& u : unused) {
    std::vector<std::string> parts;
    std::size_t keys = 0;
    for (const auto& [table, names] : {std::pair{"efficiency", &u.efficiency},
                                       std::pair{"memory_efficiency", &u.memory_efficiency}}) {
      if (names->empty()) continue;
      parts.push_back(fmt::format("{} key{} {}", table, names->size() == 1 ? "" : "s", fmt::join(*names, ", ")));
      keys += names->size();
    }
    lines.emplace_back(u.device, fmt::format("{} {} no op of this run (its kinds: {})", fmt::join(parts, " and "),
                                             keys == 1 ? "matches" : "match", kinds_command));
  }
  // Consecutive devices as one range, then every range with the same keys on one line (a
  // pipeline's simulated ranks are a stage apart: gpu0, gpu1024, ...).
  std::vector<std::pair<std::vector<std::string>, std::string>> merged;
  for (const auto& range : group_identical(lines)) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const auto& m) { return m.second == range.second; });
    if (it == merged.end())
      merged.push_back({{range.first}, range.second});
    else
      it->first.push_back(range.first);
  }
  std::vector<std::string> out;
  constexpr std::size_t kMostListed = 4;
  for (const auto& [devices, text] : merged) {
    const std::string who =
        devices.size() <= kMostListed
            ? fmt::format("{}", fmt::join(devices, ", "))
            : fmt::format("{}, {}, ... {} ({} of them)", devices[0], devices[1], devices.back(), devices.size());
    out.push_back(who + ": " + text);
  }
  return out;
}

std::string op_kinds_text(const Trace& trace, const PlatformSpec* platform, const DeviceSpec* device) {
  const std::vector<OpKindTotals> kinds = op_kind_totals(trace);
  double flops = 0, bytes = 0;
  for (const auto& k : kinds) flops += k.flops, bytes += k.bytes_moved;
  std::string out = fmt::format("{}: {} ops of {} kind{}", title(trace), trace.ops.size(), kinds.size(),
                                kinds.size() == 1 ? "" : "s");
  if (device)
    out += fmt::format("; the entries of {}'s tables that time them ({})", device->name,
                       platform ? platform->name : std::string());
  out += "\n";
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head{"kind", "ops", "FLOPs", "share", "bytes moved", "phases"};
  if (device) head.insert(head.end(), {"efficiency", "memory_efficiency"});
  head.push_back("");
  rows.push_back(head);
  bool fallback = false, communication = false;
  for (const auto& k : kinds) {
    std::vector<std::string> r{k.kind,
                               std::to_string(k.ops),
                               fmt::format("{:.4g}", k.flops),
                               flops > 0 ? fmt::format("{:.1f}%", 100 * k.flops / flops) : "-",
                               format_bytes(k.bytes_moved),
                               fmt::format("{}", fmt::join(phase_names(k), ", "))};
    if (device) {
      const EfficiencyEntry e = efficiency_entry(*device, k.kind);
      const EfficiencyEntry m = memory_efficiency_entry(*device, k.kind);
      fallback |= m.key.starts_with("efficiency.");
      // Within its own column a key reads without the table's name.
      r.push_back(fmt::format("{} {:g}", e.key.substr(e.key.find('.') + 1), e.value));
      r.push_back(fmt::format("{} {:g}", m.key.starts_with("memory_efficiency.") ? m.key.substr(m.key.find('.') + 1)
                                                                                  : m.key,
                              m.value));
    }
    communication |= k.communication;
    r.push_back(k.communication ? fmt::format("communication, messages {}", format_bytes(k.message_bytes)) : "");
    rows.push_back(std::move(r));
  }
  std::vector<std::string> total{"total", std::to_string(trace.ops.size()), fmt::format("{:.4g}", flops),
                                 flops > 0 ? "100.0%" : "-", format_bytes(bytes), ""};
  if (device) total.insert(total.end(), {"", ""});
  total.push_back("");
  rows.push_back(total);
  std::vector<bool> right{false, true, true, true, true, false};
  if (device) right.insert(right.end(), {false, false});
  right.push_back(false);
  out += aligned(rows, right);
  if (communication)
    out += "  communication: the network times these where their process group spans devices; the "
           "cost model (and the efficiency tables) where not\n";
  if (!device) return out;
  if (fallback)
    out += fmt::format("  memory_efficiency 'efficiency.KIND': {}'s memory_efficiency table names neither the kind nor "
                       "a default, so the kind's efficiency entry times the memory-bound term too\n",
                       device->name);
  const UnusedEfficiencyKeys u = unused_efficiency_keys(*device, kinds_of(kinds));
  if (device->efficiency.empty() && device->memory_efficiency.empty())
    out += fmt::format("  {}'s tables have no key but default\n", device->name);
  else if (u.efficiency.empty() && u.memory_efficiency.empty())
    out += fmt::format("  every key of {}'s tables is a kind of this workload\n", device->name);
  for (const auto& [table, names] : {std::pair{"efficiency", &u.efficiency},
                                     std::pair{"memory_efficiency", &u.memory_efficiency}})
    if (!names->empty())
      out += fmt::format("  {}'s {} key{} {} {} no kind of this workload\n", device->name, table,
                         names->size() == 1 ? "" : "s", fmt::join(*names, ", "),
                         names->size() == 1 ? "matches" : "match");
  return out;
}

std::string op_kinds_json(const Trace& trace, const PlatformSpec* platform, const DeviceSpec* device) {
  const std::vector<OpKindTotals> kinds = op_kind_totals(trace);
  ordered_json j;
  j["workload"] = trace.name;
  j["description"] = trace.description;
  if (device) {
    j["platform"] = platform ? platform->name : std::string();
    j["device"] = device->name;
  }
  double flops = 0, bytes = 0;
  for (const auto& k : kinds) flops += k.flops, bytes += k.bytes_moved;
  j["ops"] = trace.ops.size();
  j["flops"] = flops;
  j["bytes_moved"] = bytes;
  ordered_json rows = ordered_json::array();
  for (const auto& k : kinds) {
    ordered_json r = {{"kind", k.kind},
                      {"ops", k.ops},
                      {"flops", k.flops},
                      {"bytes_moved", k.bytes_moved},
                      {"phases", phase_names(k)},
                      {"communication", k.communication},
                      {"message_bytes", k.message_bytes}};
    if (device) {
      const EfficiencyEntry e = efficiency_entry(*device, k.kind);
      const EfficiencyEntry m = memory_efficiency_entry(*device, k.kind);
      r["efficiency"] = {{"key", e.key}, {"value", e.value}};
      r["memory_efficiency"] = {{"key", m.key}, {"value", m.value}};
    }
    rows.push_back(std::move(r));
  }
  j["op_kinds"] = rows;
  if (device) {
    const UnusedEfficiencyKeys u = unused_efficiency_keys(*device, kinds_of(kinds));
    j["unused_efficiency_keys"] = qualified_keys(u);
  }
  return j.dump(2) + "\n";
}

}  // namespace memsim
