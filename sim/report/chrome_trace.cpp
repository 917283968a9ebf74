#include "sim/report/chrome_trace.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <type_traits>

#include <fmt/format.h>

#include "sim/core/units.h"

namespace memsim {
namespace {

std::int64_t to_ns(double s) { return std::llround(s * 1e9); }

// Microseconds with three decimals, from integer nanoseconds: exact, and two slices that
// meet in the simulation meet in the file.
void put_us(std::string& out, std::int64_t ns) {
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

void put_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        else
          out += c;
    }
  }
  out += '"';
}

// Thread ids within a device's process: streams first, then each copy engine direction.
constexpr std::uint32_t kCopyTidBase = 10000;
std::uint32_t stream_tid(std::uint32_t stream) { return stream + 1; }
std::uint32_t copy_tid(std::uint32_t direction, std::uint32_t engine) {
  return kCopyTidBase * (direction + 1) + engine + 1;
}

enum class ItemKind : std::uint8_t { slice, counter, evict, oom };

// One trace event to write, ordered by time; rendered only if it is kept.
struct Item {
  std::int64_t ts_ns;
  ItemKind kind;
  std::uint32_t index;  // into events or samples
  std::uint32_t tid;    // slices: the thread
};

bool is_copy(EventKind k) { return k == EventKind::swap_in || k == EventKind::swap_out; }

class Writer {
 public:
  Writer(const std::vector<Event>& events, const std::vector<MemorySample>& samples,
         const Summary& summary, const Trace& trace, const PlatformSpec& platform)
      : events_(events),
        samples_(samples),
        summary_(summary),
        trace_(trace),
        platform_(platform),
        compute_devices_(platform.op_devices()) {}

  ChromeTrace write(std::size_t max_events);

 private:
  std::uint32_t device_pid(std::size_t platform_device) const {
    return static_cast<std::uint32_t>(platform_device + 1);
  }
  std::uint32_t tier_pid(std::size_t tier) const {
    return static_cast<std::uint32_t>(platform_.devices.size() + tier + 1);
  }
  // Compute, recompute and stall events name a compute-device slot; copies a platform device.
  std::size_t platform_device(const Event& e) const {
    return is_copy(e.kind) ? e.device : compute_devices_.at(e.device);
  }

  void collect();
  void assign_copy_engines();
  void collect_counters();
  double oom_time_s() const;

  void begin_event(std::string_view name, char ph, std::int64_t ts_ns, std::uint32_t pid,
                   std::uint32_t tid);
  void put_slice(const Item& item);
  void put_counter(const Item& item);
  void put_evict(const Item& item);
  void put_oom(const Item& item);
  void put_metadata();

  const std::vector<Event>& events_;
  const std::vector<MemorySample>& samples_;
  const Summary& summary_;
  const Trace& trace_;
  const PlatformSpec& platform_;
  std::vector<std::size_t> compute_devices_;

  std::vector<Item> items_;
  std::vector<std::uint32_t> event_tid_;  // by event index
  // Per tier: which categories ever hold bytes, and whether reserved ever differs.
  std::vector<std::array<bool, kCategoryCount>> tier_categories_;
  std::vector<bool> tier_reserved_differs_;
  std::string out_;
  bool first_ = true;
};

void Writer::assign_copy_engines() {
  // A device runs up to copy_engines copies per direction at once; each gets the lowest
  // engine free at its start, so copies on one thread never overlap.
  event_tid_.assign(events_.size(), 0);
  std::vector<std::uint32_t> copies;
  for (std::uint32_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    if (is_copy(e.kind))
      copies.push_back(i);
    else
      event_tid_[i] = stream_tid(e.lane);
  }
  std::stable_sort(copies.begin(), copies.end(), [&](std::uint32_t a, std::uint32_t b) {
    const Event &x = events_[a], &y = events_[b];
    if (x.device != y.device) return x.device < y.device;
    if (x.lane != y.lane) return x.lane < y.lane;
    return to_ns(x.start_s) < to_ns(y.start_s);
  });
  std::vector<std::int64_t> engine_free;  // per engine of the current device and direction
  for (std::size_t k = 0; k < copies.size(); ++k) {
    const Event& e = events_[copies[k]];
    if (k == 0 || events_[copies[k - 1]].device != e.device || events_[copies[k - 1]].lane != e.lane)
      engine_free.clear();
    const std::int64_t start = to_ns(e.start_s);
    std::size_t engine = 0;
    while (engine < engine_free.size() && engine_free[engine] > start) ++engine;
    if (engine == engine_free.size()) engine_free.push_back(0);
    engine_free[engine] = to_ns(e.end_s);
    event_tid_[copies[k]] = copy_tid(e.lane, static_cast<std::uint32_t>(engine));
  }
}

void Writer::collect_counters() {
  // Every sample, even several at one instant: the last is the value the tier keeps, but an
  // earlier one may be the peak (an allocation that a drop at the same instant makes room
  // for), and Perfetto draws each counter track's range per pixel, so the peak shows.
  const std::size_t n_tiers = platform_.tiers.size();
  tier_categories_.assign(n_tiers, {});
  tier_reserved_differs_.assign(n_tiers, false);
  for (std::uint32_t i = 0; i < samples_.size(); ++i) {
    const MemorySample& s = samples_[i];
    for (int c = 0; c < kCategoryCount; ++c)
      if (s.by_category[c] > 0) tier_categories_[s.tier][c] = true;
    if (s.reserved_bytes != s.allocated_bytes) tier_reserved_differs_[s.tier] = true;
    items_.push_back({to_ns(s.time_s), ItemKind::counter, i, 0});
  }
}

double Writer::oom_time_s() const {
  // The OOM stops the op's stream at its last event (or at the tier's last change).
  const OomReport& o = *summary_.oom;
  double t = 0;
  const Op* op = o.op_id < trace_.ops.size() && trace_.ops[o.op_id].name == o.op ? &trace_.ops[o.op_id] : nullptr;
  for (const Event& e : events_)
    if (!is_copy(e.kind) && op && e.device == op->device && e.lane == op->stream) t = std::max(t, e.end_s);
  if (auto tier = platform_.find_tier(o.tier))
    for (const MemorySample& s : samples_)
      if (s.tier == *tier) t = std::max(t, s.time_s);
  return t;
}

void Writer::collect() {
  assign_copy_engines();
  items_.reserve(events_.size() + samples_.size() + 1);
  for (std::uint32_t i = 0; i < events_.size(); ++i) {
    items_.push_back({to_ns(events_[i].start_s), ItemKind::slice, i, event_tid_[i]});
    const Event& e = events_[i];
    if (e.kind == EventKind::swap_out && e.src_tier != kNoId &&
        platform_.tiers[e.src_tier].role == TierRole::compute)
      items_.push_back({to_ns(e.start_s), ItemKind::evict, i, 0});
  }
  collect_counters();
  if (summary_.oom) items_.push_back({to_ns(oom_time_s()), ItemKind::oom, 0, 0});
  std::stable_sort(items_.begin(), items_.end(),
                   [](const Item& a, const Item& b) { return a.ts_ns < b.ts_ns; });
}

void Writer::begin_event(std::string_view name, char ph, std::int64_t ts_ns, std::uint32_t pid,
                         std::uint32_t tid) {
  out_ += first_ ? "\n" : ",\n";
  first_ = false;
  out_ += "{\"name\":";
  put_string(out_, name);
  fmt::format_to(std::back_inserter(out_), ",\"ph\":\"{}\",\"ts\":", ph);
  put_us(out_, ts_ns);
  fmt::format_to(std::back_inserter(out_), ",\"pid\":{},\"tid\":{}", pid, tid);
}

void Writer::put_slice(const Item& item) {
  const Event& e = events_[item.index];
  const std::int64_t start = to_ns(e.start_s), end = to_ns(e.end_s);
  const Op* op = e.op == kNoOp ? nullptr : &trace_.ops[e.op];
  const std::string_view kind = to_string(e.kind);
  std::string_view name = kind;
  if ((e.kind == EventKind::compute || e.kind == EventKind::recompute || e.kind == EventKind::comm) && op)
    name = op->name;
  begin_event(name, 'X', start, device_pid(platform_device(e)), item.tid);
  out_ += ",\"dur\":";
  put_us(out_, end - start);
  out_ += ",\"cat\":";
  put_string(out_, kind);
  if (e.kind == EventKind::stall) out_ += ",\"cname\":\"terrible\"";
  out_ += ",\"args\":{";
  bool any = false;
  auto arg = [&](std::string_view key) {
    out_ += any ? ",\"" : "\"";
    out_ += key;
    out_ += "\":";
    any = true;
  };
  if (op) {
    arg(e.kind == EventKind::stall ? "waiting_op" : "op_index");
    if (e.kind == EventKind::stall)
      put_string(out_, op->name);
    else
      fmt::format_to(std::back_inserter(out_), "{}", op->id);
    if (e.kind != EventKind::stall) {
      arg("op_kind");
      put_string(out_, op->kind);
      arg("phase");
      put_string(out_, to_string(op->phase));
    }
  }
  if (e.buffer != kNoId) {
    arg("buffer");
    put_string(out_, trace_.buffers[e.buffer].name);
  }
  if (e.bytes > 0) {
    arg("bytes");
    fmt::format_to(std::back_inserter(out_), "{}", e.bytes);
  }
  if (e.src_tier != kNoId) {
    arg("from");
    put_string(out_, platform_.tiers[e.src_tier].name);
  }
  if (e.dst_tier != kNoId) {
    arg(e.kind == EventKind::stall ? "tier" : "to");
    put_string(out_, platform_.tiers[e.dst_tier].name);
  }
  out_ += "}}";
}

void Writer::put_counter(const Item& item) {
  const MemorySample& s = samples_[item.index];
  const std::uint32_t pid = tier_pid(s.tier);
  auto it = std::back_inserter(out_);
  begin_event("by category", 'C', item.ts_ns, pid, 0);
  out_ += ",\"args\":{";
  bool any = false;
  for (int c = 0; c < kCategoryCount; ++c) {
    if (!tier_categories_[s.tier][c]) continue;
    fmt::format_to(it, "{}\"{}\":{}", any ? "," : "", to_string(static_cast<Category>(c)),
                   s.by_category[c]);
    any = true;
  }
  out_ += "}}";
  begin_event("allocated", 'C', item.ts_ns, pid, 0);
  fmt::format_to(it, ",\"args\":{{\"bytes\":{}}}}}", s.allocated_bytes);
  if (tier_reserved_differs_[s.tier]) {
    begin_event("reserved", 'C', item.ts_ns, pid, 0);
    fmt::format_to(it, ",\"args\":{{\"bytes\":{}}}}}", s.reserved_bytes);
  }
}

void Writer::put_evict(const Item& item) {
  const Event& e = events_[item.index];
  begin_event("evict " + trace_.buffers[e.buffer].name, 'i', item.ts_ns, tier_pid(e.src_tier), 0);
  fmt::format_to(std::back_inserter(out_), ",\"s\":\"p\",\"args\":{{\"bytes\":{}}}}}", e.bytes);
}

void Writer::put_oom(const Item& item) {
  const OomReport& o = *summary_.oom;
  const auto tier = platform_.find_tier(o.tier);
  begin_event(fmt::format("OOM: {} full at op {}", o.tier, o.op), 'i', item.ts_ns,
              tier ? tier_pid(*tier) : 0, 0);
  auto it = std::back_inserter(out_);
  out_ += ",\"s\":\"g\",\"args\":{\"op\":";
  put_string(out_, o.op);
  out_ += ",\"tier\":";
  put_string(out_, o.tier);
  fmt::format_to(it, ",\"requested_bytes\":{},\"allocated_bytes\":{},\"capacity_bytes\":{}",
                 o.requested_bytes, o.allocated_bytes, o.capacity_bytes);
  out_ += ",\"reason\":";
  put_string(out_, o.reason.empty() ? std::string("the tier is full") : o.reason);
  out_ += "}}";
}

void Writer::put_metadata() {
  auto it = std::back_inserter(out_);
  auto meta = [&](std::string_view what, std::uint32_t pid, std::uint32_t tid,
                  std::string_view key, auto value) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    fmt::format_to(it, "{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"{}\":", what,
                   pid, tid, key);
    if constexpr (std::is_convertible_v<decltype(value), std::string_view>)
      put_string(out_, value);
    else
      fmt::format_to(it, "{}", value);
    out_ += "}}";
  };
  for (std::size_t d = 0; d < platform_.devices.size(); ++d) {
    const DeviceSpec& dev = platform_.devices[d];
    meta("process_name", device_pid(d), 0, "name",
         fmt::format("{} ({})", dev.name, to_string(dev.kind)));
    meta("process_sort_index", device_pid(d), 0, "sort_index", device_pid(d));
  }
  for (std::size_t t = 0; t < platform_.tiers.size(); ++t) {
    const TierSpec& tier = platform_.tiers[t];
    const std::uint64_t budget = t < summary_.tiers.size() ? summary_.tiers[t].usage.budget_bytes : 0;
    meta("process_name", tier_pid(t), 0, "name",
         fmt::format("{} ({}, {}{}, {})", tier.name, to_string(tier.role),
                     format_bytes(static_cast<double>(tier.capacity_bytes)),
                     budget ? ", budget " + format_bytes(static_cast<double>(budget)) : std::string(),
                     tier.allocator));
    meta("process_sort_index", tier_pid(t), 0, "sort_index", tier_pid(t));
  }
  // Threads: every stream of a compute device, and each copy engine that carried a copy.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> threads;  // (pid, tid)
  // (A host that runs ops appears through its events.)
  for (std::size_t slot = 0; slot < compute_devices_.size(); ++slot)
    if (platform_.devices[compute_devices_[slot]].compute_tier)
      for (int s = 0; s < platform_.devices[compute_devices_[slot]].streams; ++s)
        threads.emplace_back(device_pid(compute_devices_[slot]), stream_tid(static_cast<std::uint32_t>(s)));
  for (std::size_t i = 0; i < events_.size(); ++i)
    threads.emplace_back(device_pid(platform_device(events_[i])), event_tid_[i]);
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
  for (const auto& [pid, tid] : threads) {
    std::string name;
    if (tid < kCopyTidBase) {
      // The streams after a device's compute streams are its communication streams, one
      // per process group it takes part in.
      const std::size_t device = pid - 1;  // device_pid's inverse
      const auto compute = device < platform_.devices.size() ? static_cast<std::uint32_t>(platform_.devices[device].streams)
                                                             : std::uint32_t{0};
      if (device < platform_.devices.size() && tid - 1 >= compute)
        name = tid - 1 == compute ? std::string("comm (NCCL)") : fmt::format("comm{} (NCCL)", tid - 1 - compute);
      else
        name = fmt::format("stream{}", tid - 1);
    } else {
      const std::uint32_t direction = tid / kCopyTidBase - 1, engine = tid % kCopyTidBase - 1;
      name = direction == 0 ? "copy_out" : "copy_in";
      if (engine > 0) name += fmt::format(".{}", engine);
    }
    meta("thread_name", pid, tid, "name", name);
    meta("thread_sort_index", pid, tid, "sort_index", tid);
  }
}

ChromeTrace Writer::write(std::size_t max_events) {
  collect();
  ChromeTrace result;
  // A counter sample is two or three `C` events (by category, allocated, reserved).
  auto weight = [&](const Item& item) -> std::size_t {
    if (item.kind != ItemKind::counter) return 1;
    return tier_reserved_differs_[samples_[item.index].tier] ? 3 : 2;
  };
  std::size_t kept = 0;  // items written: a prefix in time order
  for (const Item& item : items_) {
    const std::size_t w = weight(item);
    if (kept == static_cast<std::size_t>(&item - items_.data()) &&
        result.events_written + w <= max_events) {
      result.events_written += w;
      ++kept;
    }
    result.events_total += w;
  }
  if (kept < items_.size() && kept > 0) result.written_until_s = items_[kept - 1].ts_ns * 1e-9;

  out_.reserve(4096 + kept * 160);
  auto it = std::back_inserter(out_);
  out_ += "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"memsim_version\":";
  put_string(out_, MEMSIM_VERSION);
  out_ += ",\"workload\":";
  put_string(out_, summary_.description.empty() ? summary_.workload : summary_.description);
  out_ += ",\"platform\":";
  put_string(out_, summary_.platform);
  out_ += ",\"policy\":";
  put_string(out_, summary_.policy);
  out_ += ",\"status\":";
  put_string(out_, summary_.status);
  fmt::format_to(it, ",\"events_total\":{},\"events_written\":{}}},\"traceEvents\":[",
                 result.events_total, result.events_written);
  put_metadata();
  for (std::size_t i = 0; i < kept; ++i) {
    const Item& item = items_[i];
    switch (item.kind) {
      case ItemKind::slice: put_slice(item); break;
      case ItemKind::counter: put_counter(item); break;
      case ItemKind::evict: put_evict(item); break;
      case ItemKind::oom: put_oom(item); break;
    }
  }
  out_ += "\n]}\n";
  result.json = std::move(out_);
  return result;
}

}  // namespace

ChromeTrace chrome_trace_json(const std::vector<Event>& events,
                              const std::vector<MemorySample>& samples, const Summary& summary,
                              const Trace& trace, const PlatformSpec& platform,
                              std::size_t max_events) {
  return Writer(events, samples, summary, trace, platform).write(max_events);
}

}  // namespace memsim
