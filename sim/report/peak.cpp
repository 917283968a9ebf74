#include "sim/report/peak.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/core/text_out.h"
#include "sim/core/units.h"
#include "sim/report/recorder.h"

namespace memsim {

namespace {

PeakLiveSet::Entry entry_of(std::size_t buffer, std::uint64_t category, std::uint64_t bytes) {
  return {static_cast<BufferId>(buffer), static_cast<Category>(category), bytes};
}

}  // namespace

PeakLiveSet::TierState& PeakLiveSet::state(std::size_t tier) {
  if (tier >= tiers_.size()) tiers_.resize(tier + 1);
  return tiers_[tier];
}

void PeakLiveSet::on_allocation(const AllocationChange& c) {
  TierState& s = state(c.tier);
  ++s.changes;
  const Entry entry{c.buffer, c.category, c.allocation.bytes};
  if (c.buffer == AllocationChange::kNoBuffer) {
    if (c.allocated) {
      s.anonymous.push_back({s.changes, entry});
      return;
    }
    // The most recent workspace of this size and category is the one released (an op's
    // workspace is released after the ops it encloses, such as a remake, release theirs).
    for (auto it = s.anonymous.rbegin(); it != s.anonymous.rend(); ++it)
      if (it->entry.bytes == entry.bytes && it->entry.category == entry.category) {
        if (it->since <= s.peak_change) s.released.push_back(it->entry);
        s.anonymous.erase(std::next(it).base());
        return;
      }
    return;
  }
  // The ids from the tier's lowest seen up to its highest: a tier holds one replica's or one
  // rank's buffers, whose ids are a stretch of the whole step's (indexing by the step's ids
  // made a platform of 1,000 replicas hold 1,000 x the step's ids).
  if (s.buffers.empty()) {
    s.first = c.buffer;
  } else if (c.buffer < s.first) {
    s.buffers.insert(s.buffers.begin(), std::size_t{s.first} - c.buffer, Held{});
    s.first = c.buffer;
  }
  const std::size_t at = std::size_t{c.buffer} - s.first;
  if (at >= s.buffers.size()) s.buffers.resize(at + 1);
  Held& h = s.buffers[at];
  if (c.allocated) {
    h.since = s.changes;
    h.category = static_cast<std::uint8_t>(c.category);
    h.bytes = c.allocation.bytes;
  } else if (h.since != 0) {
    if (h.since <= s.peak_change) s.released.push_back(entry_of(c.buffer, h.category, h.bytes));
    h.since = 0;
  }
}

void PeakLiveSet::on_memory_change(std::size_t tier, const TierUsage& usage) {
  TierState& s = state(tier);
  if (usage.peak_allocated_bytes <= s.peak_bytes) return;
  // A new peak: what was released before it was not live at it.
  s.peak_bytes = usage.peak_allocated_bytes;
  s.peak_change = s.changes;
  s.released.clear();
}

std::vector<PeakLiveSet::Entry> PeakLiveSet::live_at_peak(std::size_t tier) const {
  if (tier >= tiers_.size()) return {};
  const TierState& s = tiers_[tier];
  std::vector<Entry> out = s.released;
  for (std::size_t b = 0; b < s.buffers.size(); ++b)
    if (const Held& h = s.buffers[b]; h.since != 0 && h.since <= s.peak_change)
      out.push_back(entry_of(s.first + b, h.category, h.bytes));
  for (const HeldAnonymous& h : s.anonymous)
    if (h.since <= s.peak_change) out.push_back(h.entry);
  return out;
}

std::string category_words(Category c) {
  switch (c) {
    case Category::activation: return "activations";
    case Category::activation_grad: return "activation grads";
    case Category::weight: return "weights";
    case Category::gradient: return "gradients";
    case Category::optimizer_state: return "optimizer state";
    case Category::input: return "inputs";
    case Category::workspace: return "workspace";
    case Category::other: return "other";
    case Category::comm: return "communication buffers";
    case Category::runtime: return "runtime (CUDA context, NCCL)";
  }
  return "other";
}

namespace {

// layer_of as a prefix of the name itself.
std::string_view layer_prefix(std::string_view name) {
  for (std::string_view suffix : {".backward", ".recompute"})
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix)
      name.remove_suffix(suffix.size());
  // An imported op is named in its scope ("encoder.layers.3.self_attn/aten::addmm#2452"):
  // the scope is the layer, whatever dots it holds (importers/scopes.h).
  if (const auto slash = name.rfind('/'); slash != std::string_view::npos) return name.substr(0, slash);
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(0, dot);
}

}  // namespace

std::string layer_of(const std::string& op_name) { return std::string(layer_prefix(op_name)); }

namespace {

// The op running at `t` among `events` (one device's compute and recompute events, or every
// device's): the latest to start, when streams overlap, else the first to start after it
// (the peak came while the device waited).
const Event* op_at(const std::vector<const Event*>& events, double t) {
  const Event* running = nullptr;
  const Event* next = nullptr;
  for (const Event* e : events) {
    if (e->start_s <= t && t < e->end_s) {
      if (!running || e->start_s > running->start_s) running = e;
    } else if (e->start_s >= t && (!next || e->start_s < next->start_s)) {
      next = e;
    }
  }
  return running ? running : next;
}

std::vector<std::string> csv_split(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

std::string plural(std::size_t n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

}  // namespace

void explain_peaks(Summary& summary, const Recorder& recorder, const Trace& trace,
                   const PlatformSpec& platform) {
  const auto op_devices = platform.op_devices();
  summary.peaks.assign(summary.tiers.size(), PeakReport{});
  // Each op device's compute and recompute events, and where each device is among the op
  // devices, found once: searched for each tier, a platform of 8,000 replicas (16,000
  // tiers, a million events) took minutes.
  std::vector<const Event*> every;
  std::vector<std::vector<const Event*>> by_slot(op_devices.size());
  for (const Event& e : recorder.events()) {
    if (e.kind != EventKind::compute && e.kind != EventKind::recompute) continue;
    every.push_back(&e);
    if (e.device < by_slot.size()) by_slot[e.device].push_back(&e);
  }
  std::unordered_map<std::string_view, std::size_t> slot_of;
  for (std::size_t k = 0; k < op_devices.size(); ++k) slot_of.emplace(platform.devices[op_devices[k]].name, k);
  std::map<double, const Event*> every_at;
  for (std::size_t t = 0; t < summary.tiers.size() && t < platform.tiers.size(); ++t) {
    const TierSummary& tier = summary.tiers[t];
    PeakReport& peak = summary.peaks[t];
    if (tier.usage.peak_allocated_bytes == 0) continue;
    // Largest first; ties in the order the step made them (buffer ids; workspace, which has
    // none, after the buffers, by category). Sorted in place on integer keys: a million
    // live buffers cost no string comparison and no second list.
    std::vector<PeakLiveSet::Entry> live = recorder.peak_live().live_at_peak(t);
    std::sort(live.begin(), live.end(), [](const PeakLiveSet::Entry& a, const PeakLiveSet::Entry& b) {
      if (a.bytes != b.bytes) return a.bytes > b.bytes;
      if (a.buffer != b.buffer) return a.buffer < b.buffer;
      return a.category < b.category;  // what is left equal is alike in every column
    });
    // The names in one block, sized first so that nothing moves while the views are made.
    std::size_t text_bytes = 0;
    for (const PeakLiveSet::Entry& e : live)
      if (e.buffer != AllocationChange::kNoBuffer) {
        const Buffer& buf = trace.buffers[e.buffer];
        text_bytes += buf.name.size() + (buf.producer != kNoOp ? trace.ops[buf.producer].name.size() : 0);
      }
    auto text = std::make_shared<std::string>();
    text->reserve(text_bytes);
    auto keep = [&](std::string_view s) {
      const std::size_t at = text->size();
      text->append(s);
      return std::string_view(text->data() + at, s.size());
    };
    std::vector<PeakBuffer>& listed = peak.live.edit();
    listed.reserve(live.size());
    for (const PeakLiveSet::Entry& e : live) {
      PeakBuffer& b = listed.emplace_back();
      b.category = e.category;
      b.bytes = e.bytes;
      if (e.buffer != AllocationChange::kNoBuffer) {
        const Buffer& buf = trace.buffers[e.buffer];
        b.name = keep(buf.name);
        if (buf.producer != kNoOp) {
          b.producer = keep(trace.ops[buf.producer].name);
          b.layer = layer_prefix(b.producer);
        }
      }
    }
    peak.text = std::move(text);
    // The op on the tier's own device; a tier of a device that runs no ops (host DRAM
    // filled by swaps) takes the op running on any device.
    const auto at = slot_of.find(platform.tiers[t].device);
    // Every device's events: once per time asked (the tiers of a large platform's devices
    // that run nothing all peak at 0, and each search is a pass over the whole step).
    auto in_every = [&](double when) {
      const auto [it, fresh] = every_at.try_emplace(when, nullptr);
      if (fresh) it->second = op_at(every, when);
      return it->second;
    };
    const Event* e = at == slot_of.end() ? in_every(tier.usage.peak_time_s) : op_at(by_slot[at->second], tier.usage.peak_time_s);
    if (!e && at != slot_of.end()) e = in_every(tier.usage.peak_time_s);
    if (e && e->op != kNoOp) {
      const Op& op = trace.ops[e->op];
      peak.op = op.id;
      peak.op_name = op.name;
      peak.phase = std::string(to_string(op.phase));
      peak.recompute = e->kind == EventKind::recompute;
    }
  }
}

bool write_peak_csv(TextOut& out, const Summary& s) {
  bool any = false;
  for (const TierSummary& t : s.tiers)
    for (const PeakBuffer& b : s.peak(t).live) {
      if (!any) out.put("tier,buffer,category,bytes,producer,layer\n");
      any = true;
      out.put_csv(t.name).put(',').put_csv(b.name).put(',').put(to_string(b.category)).put(',').put(b.bytes);
      out.put(',').put_csv(b.producer).put(',').put_csv(b.layer).put('\n');
    }
  return any;
}

std::string peak_csv(const Summary& s) {
  std::string text;
  TextOut out(text);
  write_peak_csv(out, s);
  return text;
}

std::string explain_text(const Summary& s) {
  std::string out = fmt::format("{} on {}, policy {}\n", s.description.empty() ? s.workload : s.description,
                                s.platform, s.policy);
  for (const TierSummary& t : s.tiers) {
    const TierUsage& u = t.usage;
    if (u.peak_allocated_bytes == 0) continue;
    const PeakReport& p = s.peak(t);
    std::uint64_t listed = 0;
    for (const PeakBuffer& b : p.live) listed += b.bytes;
    out += fmt::format("\n{}: peak {} of {}{} at {}", t.name, format_bytes(u.peak_allocated_bytes),
                       format_bytes(u.capacity_bytes),
                       u.budget_bytes ? fmt::format(" (budget {})", format_bytes(u.budget_bytes)) : "",
                       format_seconds(u.peak_time_s));
    if (!p.op_name.empty())
      out += fmt::format(", during {} ({}{})", p.op_name, p.phase, p.recompute ? ", recomputed" : "");
    out += fmt::format("; {} live\n", plural(p.live.size(), "buffer"));
    // By category over the whole tier, then one group per layer (and one for what was
    // there from the start), largest first, each split by category, every buffer listed.
    std::map<Category, std::pair<std::uint64_t, std::size_t>> by_category;
    for (const PeakBuffer& b : p.live) {
      by_category[b.category].first += b.bytes;
      ++by_category[b.category].second;
    }
    std::vector<std::pair<Category, std::pair<std::uint64_t, std::size_t>>> cats(by_category.begin(), by_category.end());
    std::stable_sort(cats.begin(), cats.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    std::string line;
    for (const auto& [c, v] : cats)
      line += fmt::format("{}{} {} ({})", line.empty() ? "" : ", ", category_words(c), format_bytes(v.first), v.second);
    out += fmt::format("  by category: {}\n", line);
    if (listed != u.peak_allocated_bytes)
      out += fmt::format("  (the buffers listed hold {}; the allocator counts {})\n", format_bytes(listed),
                         format_bytes(u.peak_allocated_bytes));
    struct Group {
      std::uint64_t bytes = 0;
      std::map<Category, std::vector<const PeakBuffer*>> by_category;
    };
    std::map<std::string, Group> groups;
    for (const PeakBuffer& b : p.live) {
      const std::string key = !b.layer.empty() ? std::string(b.layer)
                              : b.name.empty() ? std::string(b.category == Category::runtime ? "(outside the allocator)"
                                                                                              : "(op workspace)")
                                               : std::string("(there from the start)");
      Group& g = groups[key];
      g.bytes += b.bytes;
      g.by_category[b.category].push_back(&b);  // p.live is largest first: so is each list
    }
    std::vector<std::pair<std::string, const Group*>> order;
    for (const auto& [name, g] : groups) order.emplace_back(name, &g);
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.second->bytes > b.second->bytes; });
    out += fmt::format("  by layer ({}, largest first):\n", plural(order.size(), "group"));
    for (const auto& [name, g] : order) {
      out += fmt::format("    {:<40} {:>10}\n", name, format_bytes(g->bytes));
      for (const auto& [c, list] : g->by_category) {
        std::uint64_t bytes = 0;
        for (const PeakBuffer* b : list) bytes += b->bytes;
        out += fmt::format("      {:<38} {:>10}  {}\n", to_string(c), format_bytes(bytes), plural(list.size(), "buffer"));
        for (const PeakBuffer* b : list)
          out += fmt::format("        {:<36} {:>10}{}\n",
                             b->name.empty() ? (b->category == Category::runtime ? "(CUDA context, NCCL)" : "(workspace)")
                                             : b->name,
                             format_bytes(b->bytes), b->producer.empty() ? "" : "  by " + std::string(b->producer));
      }
    }
  }
  return out;
}

Summary read_peak_explanation(const std::string& out_dir) {
  const std::string summary_path = out_dir + "/summary.json";
  std::ifstream in(summary_path);
  if (!in) throw InputError(fmt::format("{}: cannot read (is {} the --out folder of a memsim run?)", summary_path, out_dir));
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tiers") || !j["tiers"].is_object())
    throw InputError(fmt::format("{}: not a memsim summary.json", summary_path));
  Summary s;
  s.workload = j.value("workload", "");
  s.description = j.value("description", "");
  s.platform = j.value("platform", "");
  s.policy = j.value("policy", "");
  for (const auto& [name, t] : j["tiers"].items()) {
    TierSummary tier;
    tier.name = name;
    tier.role = t.value("role", "");
    tier.usage.capacity_bytes = t.value("capacity_bytes", std::uint64_t{0});
    if (t.contains("budget_bytes") && t["budget_bytes"].is_number()) tier.usage.budget_bytes = t["budget_bytes"];
    tier.usage.peak_allocated_bytes = t.value("peak_allocated_bytes", std::uint64_t{0});
    tier.usage.peak_time_s = t.value("peak_time_s", 0.0);
    PeakReport peak;
    if (t.contains("peak_op") && t["peak_op"].is_object()) {
      const auto& op = t["peak_op"];
      peak.op = op.value("index", kNoOp);
      peak.op_name = op.value("name", "");
      peak.phase = op.value("phase", "");
      peak.recompute = op.value("recompute", false);
    }
    s.tiers.push_back(std::move(tier));
    s.peaks.push_back(std::move(peak));
  }
  const std::string csv_path = out_dir + "/peak.csv";
  std::ifstream csv(csv_path);
  if (!csv) {
    for (const TierSummary& t : s.tiers)
      if (t.usage.peak_allocated_bytes > 0)
        throw InputError(fmt::format("{}: cannot read: run memsim again with --out {} (runs before "
                                     "`memsim explain` did not write it)", csv_path, out_dir));
    return s;
  }
  std::string line;
  std::getline(csv, line);
  if (line != "tier,buffer,category,bytes,producer,layer")
    throw InputError(fmt::format("{}:1: expected the header 'tier,buffer,category,bytes,producer,layer', got '{}'", csv_path, line));
  std::vector<std::shared_ptr<std::deque<std::string>>> texts(s.tiers.size());  // the names, per tier
  for (int row = 2; std::getline(csv, line); ++row) {
    const auto f = csv_split(line);
    const auto category = f.size() == 6 ? category_from_string(f[2]) : std::nullopt;
    auto tier = std::find_if(s.tiers.begin(), s.tiers.end(), [&](const TierSummary& t) { return t.name == f[0]; });
    if (!category || tier == s.tiers.end() || f[3].empty() ||
        f[3].find_first_not_of("0123456789") != std::string::npos)
      throw InputError(fmt::format("{}:{}: expected tier,buffer,category,bytes,producer,layer with a tier of "
                                   "summary.json, a category and a byte count, got '{}'", csv_path, row, line));
    PeakReport& peak = s.peaks[tier - s.tiers.begin()];
    auto& text = texts[tier - s.tiers.begin()];
    if (!text) peak.text = text = std::make_shared<std::deque<std::string>>();  // a deque: its strings never move
    auto keep = [&](const std::string& field) -> std::string_view { return text->emplace_back(field); };
    peak.live.edit().push_back({keep(f[1]), *category, std::stoull(f[3]), keep(f[4]), keep(f[5])});
  }
  return s;
}

}  // namespace memsim
