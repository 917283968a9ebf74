#include "sim/report/trace_layout.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/core/units.h"

namespace memsim {
namespace {

bool is_copy(EventKind k) { return k == EventKind::swap_in || k == EventKind::swap_out; }

std::uint32_t stream_tid(std::uint32_t stream) { return stream + 1; }
std::uint32_t copy_tid(std::uint32_t direction, std::uint32_t engine) {
  return kCopyTidBase * (direction + 1) + engine + 1;
}

}  // namespace

std::int64_t trace_ns(double s) { return std::llround(s * 1e9); }

TraceLayout::TraceLayout(const std::vector<Event>& events, const SampleLog& samples,
                         const Summary& summary, const Trace& trace, const PlatformSpec& platform,
                         std::size_t max_events)
    : events_(events),
      samples_(samples),
      summary_(summary),
      trace_(trace),
      platform_(platform),
      compute_devices_(platform.op_devices()) {
  assign_copy_engines();
  // What every sample showed, kept or not (the recorder may keep only those the cap can
  // reach: see kept_samples_for).
  const std::size_t n_tiers = platform_.tiers.size();
  tier_stats_ = samples_.tier_stats();
  tier_stats_.resize(n_tiers);  // a tier never sampled: no samples, no categories
  tier_evicts_.assign(n_tiers, false);
  std::size_t counter_events = 0;  // all samples' events
  for (std::size_t t = 0; t < n_tiers; ++t) counter_events += tier_stats_[t].samples * counter_weight(t);

  // The slices (and evictions) sorted by start; the counter samples, which the run produced
  // in time order. Merged in time order, ties in the order the run produced them (events
  // first), as one stable sort of everything would order them; only the prefix that fits
  // in max_events is kept.
  std::vector<TraceItem> slices;
  slices.reserve(events_.size() + 1);
  for (std::uint32_t i = 0; i < events_.size(); ++i) {
    slices.push_back({trace_ns(events_[i].start_s), TraceItemKind::slice, i, event_tid_[i]});
    const Event& e = events_[i];
    if (e.kind == EventKind::swap_out && e.src_tier != kNoId &&
        platform_.tiers[e.src_tier].role == TierRole::compute) {
      slices.push_back({trace_ns(e.start_s), TraceItemKind::evict, i, 0});
      tier_evicts_[e.src_tier] = true;
    }
  }
  const auto by_time = [](const TraceItem& a, const TraceItem& b) { return a.ts_ns < b.ts_ns; };
  if (!std::is_sorted(slices.begin(), slices.end(), by_time)) std::stable_sort(slices.begin(), slices.end(), by_time);
  // Every sample, even several at one instant: the last is the value the tier keeps, but an
  // earlier one may be the peak (an allocation that a drop at the same instant makes room
  // for), and Perfetto draws each counter track's range per pixel, so the peak shows.
  std::vector<TraceItem> counters;  // the kept samples: a sample's last entry has its time
  counters.reserve(samples_.size());
  const auto& entries = samples_.entries();
  for (std::size_t k = 0; k < samples_.kept_entries(); ++k)
    if (!entries[k].more)
      counters.push_back({trace_ns(entries[k].time_s), TraceItemKind::counter,
                          static_cast<std::uint32_t>(counters.size()), entries[k].tier});
  if (!std::is_sorted(counters.begin(), counters.end(), by_time)) std::stable_sort(counters.begin(), counters.end(), by_time);
  const bool all_samples_kept = samples_.size() == samples_.recorded();
  std::optional<TraceItem> oom;
  if (summary_.oom) oom = TraceItem{trace_ns(oom_time_s()), TraceItemKind::oom, 0, 0};

  auto weight = [&](const TraceItem& item) -> std::size_t {
    return item.kind == TraceItemKind::counter ? counter_weight(item.tid) : 1;  // a counter's tid is its tier
  };
  events_total_ = slices.size() + counter_events + (oom ? 1 : 0);
  // Each item is at least one event: made at its size at once, not grown by doubling (each
  // growth a copy into fresh pages, two fifths of the trace's page faults on a 3-D step).
  items_.reserve(std::min(slices.size() + counters.size() + (oom ? 1 : 0), max_events));
  std::size_t i = 0, j = 0;
  for (;;) {
    // The next item in time order: a slice before a counter of its time, the OOM after both.
    const TraceItem* next = nullptr;
    if (i < slices.size() && (j == counters.size() || !by_time(counters[j], slices[i])))
      next = &slices[i];
    else if (j < counters.size())
      next = &counters[j];
    if (oom && (!next || by_time(*oom, *next))) next = &*oom;
    if (!next) break;
    const std::size_t w = weight(*next);
    if (events_written_ + w > max_events) {
      if (!items_.empty()) written_until_s_ = items_.back().ts_ns * 1e-9;
      break;
    }
    if (next->kind == TraceItemKind::counter && j + 1 == counters.size() && !all_samples_kept)
      throw std::logic_error("TraceLayout: the recorder kept fewer samples than the trace's cap can reach");
    events_written_ += w;
    items_.push_back(*next);
    if (next == &*oom) oom.reset();
    else if (next->kind == TraceItemKind::counter) ++j;
    else ++i;
  }
  kept_ = items_.size();
  next_sample_ = samples_.begin();
}

std::size_t TraceLayout::kept_samples_for(std::size_t max_events) {
  // Every counter sample is at least two events: the cap can reach no more than this many.
  return max_events / 2 + 1;
}

const MemorySample& TraceLayout::sample(std::uint32_t index) const {
  if (index < next_index_)
    throw std::logic_error(fmt::format("TraceLayout::sample({}) after sample({}): the samples are replayed in order",
                                       index, next_index_));
  for (; next_index_ < index; ++next_index_) ++next_sample_;
  return *next_sample_;
}

std::size_t TraceLayout::platform_device(const Event& e) const {
  return is_copy(e.kind) ? e.device : compute_devices_.at(e.device);
}

void TraceLayout::assign_copy_engines() {
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
    return trace_ns(x.start_s) < trace_ns(y.start_s);
  });
  std::vector<std::int64_t> engine_free;  // per engine of the current device and direction
  for (std::size_t k = 0; k < copies.size(); ++k) {
    const Event& e = events_[copies[k]];
    if (k == 0 || events_[copies[k - 1]].device != e.device || events_[copies[k - 1]].lane != e.lane)
      engine_free.clear();
    const std::int64_t start = trace_ns(e.start_s);
    std::size_t engine = 0;
    while (engine < engine_free.size() && engine_free[engine] > start) ++engine;
    if (engine == engine_free.size()) engine_free.push_back(0);
    engine_free[engine] = trace_ns(e.end_s);
    event_tid_[copies[k]] = copy_tid(e.lane, static_cast<std::uint32_t>(engine));
  }
}

double TraceLayout::oom_time_s() const {
  // The OOM stops the op's stream at its last event (or at the tier's last change).
  const OomReport& o = *summary_.oom;
  double t = 0;
  const Op* op = o.op_id < trace_.ops.size() && trace_.ops[o.op_id].name == o.op ? &trace_.ops[o.op_id] : nullptr;
  for (const Event& e : events_)
    if (!is_copy(e.kind) && op && e.device == op->device && e.lane == op->stream) t = std::max(t, e.end_s);
  if (auto tier = platform_.find_tier(o.tier); tier && *tier < tier_stats_.size())
    t = std::max(t, tier_stats_[*tier].last_time_s);
  return t;
}

std::string TraceLayout::device_process_name(std::size_t d) const {
  const DeviceSpec& dev = platform_.devices[d];
  return fmt::format("{} ({})", dev.name, to_string(dev.kind));
}

std::string TraceLayout::tier_process_name(std::size_t t) const {
  const TierSpec& tier = platform_.tiers[t];
  const std::uint64_t budget = t < summary_.tiers.size() ? summary_.tiers[t].usage.budget_bytes : 0;
  return fmt::format("{} ({}, {}{}, {})", tier.name, to_string(tier.role),
                     format_bytes(static_cast<double>(tier.capacity_bytes)),
                     budget ? ", budget " + format_bytes(static_cast<double>(budget)) : std::string(),
                     tier.allocator);
}

std::vector<std::pair<std::uint32_t, std::uint32_t>> TraceLayout::threads() const {
  // Every stream of a compute device, and each copy engine that carried a copy. (A host
  // that runs ops appears through its events.)
  std::vector<std::pair<std::uint32_t, std::uint32_t>> threads;
  for (std::size_t slot = 0; slot < compute_devices_.size(); ++slot)
    if (platform_.devices[compute_devices_[slot]].compute_tier)
      for (int s = 0; s < platform_.devices[compute_devices_[slot]].streams; ++s)
        threads.emplace_back(device_pid(compute_devices_[slot]), stream_tid(static_cast<std::uint32_t>(s)));
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
  // The events' threads: a few hundred among millions of events, each looked up in the
  // sorted list (a run of events on one thread once), not gathered and sorted whole.
  std::pair<std::uint32_t, std::uint32_t> last{0, 0};  // no thread has tid 0
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const std::pair<std::uint32_t, std::uint32_t> t{device_pid(platform_device(events_[i])), event_tid_[i]};
    if (t == last) continue;
    last = t;
    const auto at = std::lower_bound(threads.begin(), threads.end(), t);
    if (at == threads.end() || *at != t) threads.insert(at, t);
  }
  return threads;
}

std::string TraceLayout::thread_name(std::uint32_t pid, std::uint32_t tid) const {
  if (tid < kCopyTidBase) {
    // The streams after a device's compute streams are its communication streams, one per
    // process group it takes part in.
    const std::size_t device = pid - 1;  // device_pid's inverse
    const auto compute = device < platform_.devices.size() ? static_cast<std::uint32_t>(platform_.devices[device].streams)
                                                           : std::uint32_t{0};
    if (device < platform_.devices.size() && tid - 1 >= compute)
      return tid - 1 == compute ? std::string("comm (NCCL)") : fmt::format("comm{} (NCCL)", tid - 1 - compute);
    return fmt::format("stream{}", tid - 1);
  }
  const std::uint32_t direction = tid / kCopyTidBase - 1, engine = tid % kCopyTidBase - 1;
  std::string name = direction == 0 ? "copy_out" : "copy_in";
  if (engine > 0) name += fmt::format(".{}", engine);
  return name;
}

std::string_view TraceLayout::slice_name(const Event& e) const {
  if ((e.kind == EventKind::compute || e.kind == EventKind::recompute || e.kind == EventKind::comm) &&
      e.op != kNoOp)
    return trace_.ops[e.op].name;
  return to_string(e.kind);
}

std::string TraceLayout::oom_name() const {
  return fmt::format("OOM: {} full at op {}", summary_.oom->tier, summary_.oom->op);
}

}  // namespace memsim
