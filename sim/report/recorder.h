#pragma once
// The recorder listens to the engine: one Event per thing that took time (compute,
// recompute, a copy, a stall) and one MemorySample per change of a tier's occupancy (and,
// when asked, the AllocationChange behind each sample). It keeps them in memory in time
// order; the writers turn them into files. It also keeps what was live at each tier's peak.
#include <cstdint>
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

class Recorder final : public MemoryListener {
 public:
  /// With `keep_samples` false only events are kept (benchmarks).
  explicit Recorder(bool keep_samples = true) : keep_samples_(keep_samples) {}
  /// Also keep every allocation and release with its address (events.csv); off by default.
  void keep_allocations(bool on) { keep_allocations_ = on; }
  void record(const Event& e) { events_.push_back(e); }
  void on_memory_change(std::size_t tier, const TierUsage& usage, double now_s) override;
  void on_allocation(const AllocationChange& change) override {
    peak_live_.on_allocation(change);
    if (keep_allocations_) allocations_.push_back(change);
  }
  void reserve(std::size_t events, std::size_t samples);

  const std::vector<Event>& events() const { return events_; }
  const std::vector<MemorySample>& samples() const { return samples_; }
  const std::vector<AllocationChange>& allocations() const { return allocations_; }
  const PeakLiveSet& peak_live() const { return peak_live_; }

 private:
  bool keep_samples_;
  bool keep_allocations_ = false;
  std::vector<Event> events_;
  std::vector<MemorySample> samples_;
  std::vector<AllocationChange> allocations_;
  PeakLiveSet peak_live_;
};

}  // namespace memsim
