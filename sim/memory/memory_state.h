#pragma once
// Which buffer lives where, and how full each tier is. Pure bookkeeping (no SimGrid): the
// engine calls it with the simulated time, it keeps per-tier totals by category, peaks and
// the time of each peak. Every method is O(1) except the OOM report.
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "sim/memory/allocator.h"
#include "sim/platform/platform.h"
#include "sim/workload/trace.h"

namespace memsim {

using CategoryBytes = std::array<std::uint64_t, kCategoryCount>;

struct TierUsage {
  std::uint64_t capacity_bytes = 0;  // the hardware's
  std::uint64_t budget_bytes = 0;    // a cap below it (policy.budget); 0: none
  /// What the run may hold in the tier: the budget, else the capacity.
  std::uint64_t limit_bytes() const { return budget_bytes ? budget_bytes : capacity_bytes; }
  std::uint64_t allocated_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  CategoryBytes by_category{};
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  double peak_time_s = 0;
  CategoryBytes peak_by_category{};
  std::uint64_t largest_free_at_peak_bytes = 0;  // the largest request that fitted at the peak
};

/// Where a buffer is. A buffer may briefly hold space in two tiers while it is copied.
struct Placement {
  static constexpr std::size_t kNowhere = SIZE_MAX;
  std::size_t tier = kNowhere;  // where it is readable
  Allocation allocation;        // what it holds there
};

/// One allocation or release in a tier: the allocator's address and rounded bytes. `buffer`
/// is kNoBuffer for anonymous space (op workspace).
struct AllocationChange {
  static constexpr BufferId kNoBuffer = 0xffffffffu;
  double time_s = 0;
  std::uint32_t tier = 0;
  BufferId buffer = kNoBuffer;
  Category category = Category::other;
  bool allocated = true;  // false: released
  Allocation allocation;
};

/// Told of every change of a tier's occupancy (the recorder's memory curve). Each change is
/// announced by on_allocation (the allocation or release behind it) and then by
/// on_memory_change (the tier's totals after it), so the two streams pair one to one.
class MemoryListener {
 public:
  virtual ~MemoryListener() = default;
  virtual void on_memory_change(std::size_t tier, const TierUsage& usage, double now_s) = 0;
  virtual void on_allocation(const AllocationChange& change) { (void)change; }
};

class MemoryState {
 public:
  /// `caps` (indexed like platform.tiers, or empty: none): what each tier may hold, at most
  /// its capacity; each allocator runs under its tier's cap.
  MemoryState(const PlatformSpec& platform, const Trace& trace,
              const std::vector<std::uint64_t>& caps = {});
  void set_listener(MemoryListener* listener) { listener_ = listener; }

  /// Takes space for `buffer` in `tier`; false when the allocator says no (nothing changes).
  bool allocate(BufferId buffer, std::size_t tier, double now_s);
  /// Releases the buffer's space in the tier it occupies (a no-op if it is nowhere).
  void release(BufferId buffer, double now_s);
  /// A copy of `b` into tier `to` starts: space there is held from now on. Returns the
  /// address, or nullopt when it does not fit (nothing changes).
  std::optional<Allocation> reserve_move(BufferId b, std::size_t to, double now_s);
  /// The copy is done: `b` now lives at `a` in `to`; its old space is released.
  void finish_move(BufferId b, std::size_t to, const Allocation& a, double now_s);
  /// Workspace and other anonymous space; nullopt if it does not fit.
  std::optional<Allocation> allocate_anonymous(std::size_t tier, std::uint64_t bytes,
                                               Category category, double now_s);
  void release_anonymous(std::size_t tier, const Allocation& a, Category category, double now_s);

  const Placement& placement(BufferId b) const { return placement_[b]; }
  bool resident(BufferId b, std::size_t tier) const { return placement_[b].tier == tier; }
  const TierUsage& usage(std::size_t tier) const { return held(tier).usage; }
  std::size_t tier_count() const { return slot_.size(); }
  std::uint64_t largest_free_block(std::size_t tier) const;
  /// Why a request of `bytes` did not fit in `tier` ("" when the tier is simply full).
  std::string failure_reason(std::size_t tier, std::uint64_t bytes) const;
  const Allocator& allocator(std::size_t tier) const { return *held(tier).allocator; }
  /// Tier `tier`'s usage and its tiles' peaks (tiled tiers), for the summary. A tier the run
  /// never touched is reported as its allocator starts, without keeping one for it.
  void report(std::size_t tier, TierUsage& usage, std::vector<std::uint64_t>& tile_peaks) const;

  /// The `n` largest buffers resident in `tier`, largest first (ties by id). O(buffers).
  std::vector<BufferId> largest_resident(std::size_t tier, std::size_t n) const;

 private:
  void changed(std::size_t tier, double now_s);
  void announce(std::size_t tier, BufferId b, Category c, bool allocated, const Allocation& a,
                double now_s);

  // A tier's allocator and usage exist from its first use: a 16,384-GPU platform has 20,480
  // tiers, and a symmetric run touches one rank's few.
  struct Held {
    std::unique_ptr<Allocator> allocator;
    TierUsage usage;
  };
  static constexpr std::uint32_t kUnheld = UINT32_MAX;
  Held make(std::size_t tier) const;
  Held& held(std::size_t tier) const;

  const Trace& trace_;
  const PlatformSpec& platform_;
  std::vector<std::uint64_t> caps_;
  mutable std::vector<std::uint32_t> slot_;  // per tier: its index in held_, or kUnheld
  mutable std::deque<Held> held_;            // a deque: references stay valid as it grows
  std::vector<Placement> placement_;
  MemoryListener* listener_ = nullptr;
};

}  // namespace memsim
