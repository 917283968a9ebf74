#pragma once
// What the run's timeline trace shows, whichever format writes it (trace.json,
// trace.pftrace): the items in time order, which of them fit in --max-events, and the
// processes and threads they are drawn on.
//
//   a process per device      threads: stream0.. (compute, recompute, stalls), the
//                             communication streams, copy_out / copy_in (one thread per busy
//                             copy engine: a copy takes the lowest engine free at its start)
//   a process per memory tier counters: allocated bytes by category, allocated, reserved
//                             (when it ever differs); instants: evictions
//   the OOM                   an instant, when the run ended with one
//
// Process ids: devices 1.., then tiers. Thread ids within a device: stream s is s + 1; copy
// engine e of direction d (0 out, 1 in) is kCopyTidBase * (d + 1) + e + 1.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/report/recorder.h"
#include "sim/report/summary.h"
#include "sim/workload/trace.h"

namespace memsim {

/// Seconds to the integer nanoseconds both trace formats are written from, so that a slice
/// that ends when the next one starts touches it without overlap.
std::int64_t trace_ns(double s);

inline constexpr std::uint32_t kCopyTidBase = 10000;

enum class TraceItemKind : std::uint8_t { slice, counter, evict, oom };

/// One thing to draw, at its time: a slice (events[index] on thread tid), a counter sample
/// (samples[index]), an eviction (events[index], a swap out of a compute tier), the OOM.
struct TraceItem {
  std::int64_t ts_ns;
  TraceItemKind kind;
  std::uint32_t index;
  std::uint32_t tid;
};

class TraceLayout {
 public:
  /// Keeps the earliest items that make at most `max_events` events (a counter sample is
  /// two or three: by category, allocated, reserved).
  /// The samples are walked in order, not held (see sample()), so a run of millions of
  /// samples keeps none of them.
  TraceLayout(const std::vector<Event>& events, const SampleLog& samples,
              const Summary& summary, const Trace& trace, const PlatformSpec& platform,
              std::size_t max_events);

  /// Sample `index` of a counter item that is written (one of the first kept()). The
  /// samples are replayed, not held: ask for them in order (as items() has them), each once
  /// or more; an index before the last one asked for is a logic_error.
  const MemorySample& sample(std::uint32_t index) const;

  /// The items written, in time order (ties in the order the run produced them): the
  /// earliest of all the run's items, up to max_events events.
  const std::vector<TraceItem>& items() const { return items_; }
  /// How many items are written (items().size()).
  std::size_t kept() const { return kept_; }
  /// The most memory samples a trace capped at `max_events` can show: a recorder that keeps
  /// these (Recorder::keep_samples_at_most) keeps every sample the trace writes.
  static std::size_t kept_samples_for(std::size_t max_events);
  std::size_t events_total() const { return events_total_; }
  std::size_t events_written() const { return events_written_; }
  /// When truncated: the time of the last item written.
  double written_until_s() const { return written_until_s_; }

  std::uint32_t device_pid(std::size_t platform_device) const {
    return static_cast<std::uint32_t>(platform_device + 1);
  }
  std::uint32_t tier_pid(std::size_t tier) const {
    return static_cast<std::uint32_t>(platform_.devices.size() + tier + 1);
  }
  /// The platform device an event is drawn on (compute events name a compute-device slot).
  std::size_t platform_device(const Event& e) const;
  /// The thread events[i] is drawn on.
  std::uint32_t event_tid(std::size_t i) const { return event_tid_[i]; }

  /// "gpu0 (gpu)"; "hbm (compute, 40 GiB, budget 30 GiB, caching)".
  std::string device_process_name(std::size_t platform_device) const;
  std::string tier_process_name(std::size_t tier) const;
  /// Every (pid, tid) drawn: each stream of a compute device and each thread an event is
  /// on, sorted.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> threads() const;
  /// "stream0", "comm (NCCL)", "comm1 (NCCL)", "copy_out", "copy_in.1".
  std::string thread_name(std::uint32_t pid, std::uint32_t tid) const;

  /// Whether a category ever holds bytes on a tier; whether its reserved bytes ever differ
  /// from its allocated bytes.
  bool tier_has_category(std::size_t tier, int category) const { return tier_stats_[tier].categories[category]; }
  bool tier_reserved_differs(std::size_t tier) const { return tier_stats_[tier].reserved_differs; }
  /// Whether a tier's occupancy ever changed (it has counter samples).
  bool tier_sampled(std::size_t tier) const { return tier_stats_[tier].samples > 0; }
  /// Whether anything was ever evicted from a tier (a swap out of a compute tier).
  bool tier_evicts(std::size_t tier) const { return tier_evicts_[tier]; }

  /// A slice's name: the op's for compute, recompute and comm; the kind's otherwise.
  std::string_view slice_name(const Event& e) const;
  /// "OOM: hbm full at op layer3.fwd".
  std::string oom_name() const;

 private:
  void assign_copy_engines();
  double oom_time_s() const;
  /// A counter sample is two or three events (by category, allocated, reserved).
  std::size_t counter_weight(std::size_t tier) const { return tier_stats_[tier].reserved_differs ? 3 : 2; }

  const std::vector<Event>& events_;
  const SampleLog& samples_;
  mutable SampleLog::iterator next_sample_;  // sample(): the replay, showing sample next_index_
  mutable std::uint32_t next_index_ = 0;
  const Summary& summary_;
  const Trace& trace_;
  const PlatformSpec& platform_;
  std::vector<std::size_t> compute_devices_;

  std::vector<TraceItem> items_;
  std::vector<std::uint32_t> event_tid_;  // by event index
  std::vector<SampleLog::TierStats> tier_stats_;  // per tier: what all its samples showed
  std::vector<bool> tier_evicts_;
  std::size_t kept_ = 0;
  std::size_t events_total_ = 0, events_written_ = 0;
  double written_until_s_ = 0;
};

}  // namespace memsim
