#pragma once
// The recorder listens to the engine: one Event per thing that took time (compute,
// recompute, a copy, a stall) and one MemorySample per change of a tier's occupancy (and,
// when asked, the AllocationChange behind each sample). It keeps them in memory in time
// order; the writers turn them into files. It also keeps what was live at each tier's peak.
//
// Memory is bounded per op: an Event is 56 bytes, and a sample is kept as what changed — the
// tier's totals and the one category that moved (40 bytes; a change that moves several
// categories takes one entry per category) — not as the tier's whole split by category
// (112 bytes). Reading the samples back replays the changes.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "sim/memory/memory_state.h"
#include "sim/report/peak.h"
#include "sim/workload/trace.h"

namespace memsim {

/// comm: a communication op on a device's communication stream (NCCL's), from the moment
/// the device reaches it to the moment the whole collective has landed.
enum class EventKind : std::uint8_t { compute, recompute, swap_out, swap_in, stall, comm };
std::string_view to_string(EventKind k);

inline constexpr std::uint32_t kNoId = 0xffffffffu;

struct Event {
  EventKind kind = EventKind::compute;
  double start_s = 0;
  double end_s = 0;
  std::uint32_t device = 0;
  std::uint32_t lane = 0;      // stream index, or copy engine index for copies
  OpId op = kNoOp;             // compute, recompute; the op that waited for a stall
  BufferId buffer = kNoId;     // copies; the buffer waited for in a stall
  std::uint64_t bytes = 0;
  std::uint32_t src_tier = kNoId, dst_tier = kNoId;
};

struct MemorySample {
  double time_s = 0;
  std::uint32_t tier = 0;
  std::uint64_t allocated_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  CategoryBytes by_category{};
};

/// The samples as kept: one entry per category that changed. Iterating yields every sample
/// whole, in the order it was recorded.
class SampleLog {
 public:
  struct Entry {
    double time_s = 0;
    std::uint64_t allocated_bytes = 0;
    std::uint64_t reserved_bytes = 0;
    std::uint64_t category_bytes = 0;  // the category's total after the change
    std::uint32_t tier = 0;
    std::uint8_t category = 0;
    bool more = false;  // the next entry belongs to the same sample
  };

  /// Replays entries into whole samples: the split by category of each tier, as the entries
  /// so far leave it. Entries may come in pieces, each ending where a sample ends.
  class Replay {
   public:
    /// The sample whose entries start at `at` (up to the first without `more`) into `out`;
    /// returns the entry after it.
    const Entry* next(const Entry* at, MemorySample& out);

   private:
    std::vector<CategoryBytes> by_tier_;
  };

  class iterator {
   public:
    using value_type = MemorySample;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::input_iterator_tag;
    using reference = const MemorySample&;
    using pointer = const MemorySample*;
    iterator() = default;
    const MemorySample& operator*() const { return current_; }
    const MemorySample* operator->() const { return &current_; }
    iterator& operator++() {
      load();
      return *this;
    }
    void operator++(int) { load(); }
    bool operator==(const iterator& o) const { return at_ == o.at_ && done_ == o.done_; }

   private:
    friend class SampleLog;
    iterator(const std::vector<Entry>* entries, std::size_t at, std::size_t end);
    void load();  // the sample starting at at_, or the end
    const std::vector<Entry>* entries_ = nullptr;
    std::size_t at_ = 0, end_ = 0;
    bool done_ = true;
    Replay replay_;
    MemorySample current_;
  };

  /// What every sample of a tier showed, kept or not.
  struct TierStats {
    std::size_t samples = 0;
    std::array<bool, kCategoryCount> categories{};  // whether each ever held bytes
    bool reserved_differs = false;                   // reserved ever != allocated
    double last_time_s = 0;
  };

  void add(double time_s, std::uint32_t tier, const TierUsage& usage);
  void reserve(std::size_t samples) { entries_.reserve(samples); }
  /// Keep only the first `n` samples: later ones count in recorded() and tier_stats(), and
  /// their entries stay only until drop_unkept() (a stream sees them first).
  void keep_at_most(std::size_t n) { limit_ = n; }
  void drop_unkept() { entries_.resize(kept_entries_); }
  /// The entries added so far: the kept ones, then any not yet dropped.
  const std::vector<Entry>& entries() const { return entries_; }
  /// The entries of the kept samples: the first kept_entries() of entries().
  std::size_t kept_entries() const { return kept_entries_; }
  iterator begin() const { return {&entries_, 0, kept_entries_}; }
  iterator end() const { return {}; }
  /// The samples kept; every sample recorded; what each tier's samples showed.
  std::size_t size() const { return kept_; }
  bool empty() const { return kept_ == 0; }
  std::size_t recorded() const { return recorded_; }
  const std::vector<TierStats>& tier_stats() const { return stats_; }
  /// The bytes the log holds, for the memory-per-op report.
  std::size_t memory_bytes() const { return entries_.capacity() * sizeof(Entry); }

 private:
  std::vector<Entry> entries_;
  std::vector<CategoryBytes> last_;  // per tier: the split the previous sample left
  std::vector<TierStats> stats_;
  std::size_t limit_ = SIZE_MAX, kept_ = 0, kept_entries_ = 0, recorded_ = 0;
};

struct PlatformSpec;

/// Where a run's records also go while the run makes them, a block at a time, in the order
/// they were made (the timeline and memory files, written on another thread as the engine
/// runs). Called on the engine's thread; the blocks are valid only during the call.
class RecordStream {
 public:
  virtual ~RecordStream() = default;
  /// Before the first record: the step as it runs (it outlives the stream's use of it) and
  /// its platform.
  virtual void start(const Trace& trace, const PlatformSpec& platform) = 0;
  virtual void events(const Event* first, std::size_t n) = 0;
  /// Whole samples (see SampleLog::Replay).
  virtual void samples(const SampleLog::Entry* first, std::size_t n) = 0;
};

class Recorder final : public MemoryListener {
 public:
  /// With `keep_samples` false only events are kept (benchmarks).
  explicit Recorder(bool keep_samples = true) : keep_samples_(keep_samples) {}
  /// Keep at most `n` memory samples (the trace's counters need no more than its cap); the
  /// rest are counted, and passed to a stream.
  void keep_samples_at_most(std::size_t n) { samples_.keep_at_most(n); }
  /// Also keep every allocation and release with its address (events.csv); off by default.
  void keep_allocations(bool on) { keep_allocations_ = on; }
  void keep_samples(bool on) { keep_samples_ = on; }
  void record(const Event& e) {
    events_.push_back(e);
    if (e.kind == EventKind::compute) ++ops_done_;
    if (stream_ && events_.size() - events_streamed_ >= kStreamBlock) pass_events();
    if (progress_ && (events_.size() & (kProgressEvery - 1)) == 0) progress_(ops_done_, e.end_s);
  }
  /// Also tell `progress` every few thousand events how many ops have run and the simulated
  /// time the last event ended at (a terminal's progress line); empty: not any more.
  void report_progress(std::function<void(std::uint64_t ops_done, double simulated_s)> progress) {
    progress_ = std::move(progress);
  }
  /// Also pass the records to `stream` as they come (nullptr: not any more); flush_stream()
  /// passes on what is left.
  void stream_to(RecordStream* stream) { stream_ = stream; }
  void flush_stream();
  void on_memory_change(std::size_t tier, const TierUsage& usage, double now_s) override;
  void on_allocation(const AllocationChange& change) override {
    peak_live_.on_allocation(change);
    if (keep_allocations_) allocations_.push_back(change);
  }
  /// Room for the events and samples a step is expected to make.
  void reserve(std::size_t events, std::size_t samples);

  const std::vector<Event>& events() const { return events_; }
  /// The memory samples, replayed in order (see SampleLog); a vector with samples_vector().
  const SampleLog& samples() const { return samples_; }
  std::vector<MemorySample> samples_vector() const {
    std::vector<MemorySample> v;
    v.reserve(samples_.size());
    for (const MemorySample& m : samples_) v.push_back(m);
    return v;
  }
  const std::vector<AllocationChange>& allocations() const { return allocations_; }
  const PeakLiveSet& peak_live() const { return peak_live_; }

 private:
  static constexpr std::size_t kStreamBlock = 4096;  // records per block passed on
  static constexpr std::size_t kProgressEvery = 4096;  // events per progress report (a power of 2)
  void pass_events();
  void pass_samples();

  bool keep_samples_;
  bool keep_allocations_ = false;
  RecordStream* stream_ = nullptr;
  std::function<void(std::uint64_t, double)> progress_;
  std::uint64_t ops_done_ = 0;
  std::size_t events_streamed_ = 0, entries_streamed_ = 0;
  std::vector<Event> events_;
  SampleLog samples_;
  std::vector<AllocationChange> allocations_;
  PeakLiveSet peak_live_;
};

}  // namespace memsim
