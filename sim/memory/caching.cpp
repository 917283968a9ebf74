#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "sim/core/units.h"
#include "sim/memory/allocator.h"

namespace memsim {
namespace {

// PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), default settings:
// no max_split_size, no power-of-two round-up, one stream.
constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kMinBlockSize = 512;      // rounding unit and least block
constexpr std::uint64_t kSmallSize = 1 * kMiB;    // largest request of the small pool
constexpr std::uint64_t kSmallBuffer = 2 * kMiB;  // segment for small requests
constexpr std::uint64_t kMinLargeAlloc = 10 * kMiB;
constexpr std::uint64_t kLargeBuffer = 20 * kMiB;  // segment for requests below kMinLargeAlloc
constexpr std::uint64_t kRoundLarge = 2 * kMiB;    // larger segments: request rounded to this

enum Pool : int { kSmallPool = 0, kLargePool = 1 };

std::uint64_t round_up(std::uint64_t n, std::uint64_t unit) { return (n + unit - 1) / unit * unit; }
std::uint64_t round_size(std::uint64_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : round_up(bytes, kMinBlockSize);
}
Pool pool_of(std::uint64_t rounded) { return rounded <= kSmallSize ? kSmallPool : kLargePool; }
std::uint64_t segment_size(std::uint64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}
bool should_split(Pool pool, std::uint64_t remaining) {
  return pool == kSmallPool ? remaining >= kMinBlockSize : remaining > kSmallSize;
}

// Segments are taken from the tier whole and kept (cached) when their blocks are freed. Each
// segment is tiled by blocks; a block is live or free; free neighbours in one segment merge.
// Segment bases come from a bump pointer, so blocks of different segments are never
// adjacent in the address map and never merge.
class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(std::uint64_t capacity) : capacity_(capacity) {}

  std::optional<Allocation> allocate(std::uint64_t bytes) override {
    // An empty tensor never reaches the device allocator.
    if (bytes == 0) return Allocation{0, 0};
    if (bytes > capacity_) return std::nullopt;
    const std::uint64_t size = round_size(bytes);
    const Pool pool = pool_of(size);
    auto fit = free_[pool].lower_bound({size, 0});
    if (fit == free_[pool].end()) {
      const std::uint64_t segment = segment_size(size);
      if (segment > capacity_ - reserved_) {
        // PyTorch frees its idle cached segments and retries once. Done only when the retry
        // will succeed, so a failed request leaves the cache as it was.
        if (segment > capacity_ - (reserved_ - idle_reserved_)) return std::nullopt;
        release_idle_segments();
      }
      fit = add_segment(segment, pool);
    }
    const auto [block_size, address] = *fit;
    free_[pool].erase(fit);
    Block& block = blocks_.at(address);
    if (should_split(pool, block_size - size)) {
      blocks_.emplace(address + size, Block{block_size - size, block.segment, true});
      free_[pool].emplace(block_size - size, address + size);
      block.size = size;
    }
    block.free = false;
    Segment& segment = segments_.at(block.segment);
    if (segment.allocated == 0) idle_reserved_ -= segment.size;
    segment.allocated += block.size;
    allocated_ += block.size;
    return Allocation{address, block.size};
  }

  void release(const Allocation& a) override {
    if (a.bytes == 0) return;
    auto it = blocks_.find(a.address);
    Segment& segment = segments_.at(it->second.segment);
    const Pool pool = segment.pool;
    segment.allocated -= it->second.size;
    if (segment.allocated == 0) idle_reserved_ += segment.size;
    allocated_ -= it->second.size;
    it->second.free = true;
    auto next = std::next(it);
    if (next != blocks_.end() && next->second.segment == it->second.segment &&
        next->second.free) {
      free_[pool].erase({next->second.size, next->first});
      it->second.size += next->second.size;
      blocks_.erase(next);
    }
    if (it != blocks_.begin()) {
      auto prev = std::prev(it);
      if (prev->second.segment == it->second.segment && prev->second.free) {
        free_[pool].erase({prev->second.size, prev->first});
        prev->second.size += it->second.size;
        blocks_.erase(it);
        it = prev;
      }
    }
    free_[pool].emplace(it->second.size, it->first);
  }

  std::uint64_t allocated_bytes() const override { return allocated_; }
  std::uint64_t reserved_bytes() const override { return reserved_; }
  std::uint64_t capacity_bytes() const override { return capacity_; }

  // The larger of what a cached free block serves and what a new segment would serve. A
  // small-pool block serves at most kSmallSize; a new segment of F unreserved bytes serves a
  // request of F rounded down to kRoundLarge once F >= kMinLargeAlloc (its segment is the
  // request itself), else a small request if a 2 MiB segment fits. Requests between 1 MiB
  // and 10 MiB may fail while a larger one succeeds (they need a 20 MiB segment).
  std::uint64_t largest_free_block() const override {
    std::uint64_t best = 0;
    if (!free_[kSmallPool].empty())
      best = std::min(free_[kSmallPool].rbegin()->first, kSmallSize);
    if (!free_[kLargePool].empty()) best = std::max(best, free_[kLargePool].rbegin()->first);
    const std::uint64_t unreserved = capacity_ - reserved_;
    if (unreserved >= kMinLargeAlloc)
      best = std::max(best, unreserved / kRoundLarge * kRoundLarge);
    else if (unreserved >= kSmallBuffer)
      best = std::max(best, kSmallSize);
    return best;
  }

  std::string failure_reason(std::uint64_t bytes) const override {
    if (bytes == 0 || bytes > capacity_) return {};
    const std::uint64_t size = round_size(bytes);
    if (size > capacity_ - allocated_) return {};  // plainly full
    const Pool pool = pool_of(size);
    const std::uint64_t segment = segment_size(size);
    const std::uint64_t unreserved = capacity_ - (reserved_ - idle_reserved_);
    if (free_[pool].lower_bound({size, 0}) != free_[pool].end() || segment <= unreserved)
      return {};  // it would fit
    // Free bytes in segments that also hold live blocks: the cache cannot give them back.
    const std::uint64_t stuck = reserved_ - allocated_ - idle_reserved_;
    std::string shortfall = format_bytes(static_cast<double>(unreserved)) +
                            " unreserved is less than the " +
                            format_bytes(static_cast<double>(segment)) + " segment";
    if (stuck == 0) return shortfall + " the request needs";
    return format_bytes(static_cast<double>(stuck)) +
           " reserved in cached blocks too small for the request, and " + shortfall +
           " it needs";
  }

 private:
  struct Block {
    std::uint64_t size;
    std::uint64_t segment;  // base address of its segment
    bool free;
  };
  struct Segment {
    std::uint64_t size;
    Pool pool;
    std::uint64_t allocated;  // bytes of its live blocks; 0: idle, releasable
  };
  using FreeSet = std::set<std::pair<std::uint64_t, std::uint64_t>>;  // (size, address)

  FreeSet::iterator add_segment(std::uint64_t size, Pool pool) {
    const std::uint64_t base = next_base_;
    next_base_ += size;
    segments_.emplace(base, Segment{size, pool, 0});
    blocks_.emplace(base, Block{size, base, true});
    reserved_ += size;
    idle_reserved_ += size;
    return free_[pool].emplace(size, base).first;
  }

  void release_idle_segments() {
    for (auto it = segments_.begin(); it != segments_.end();) {
      if (it->second.allocated != 0) {
        ++it;
        continue;
      }
      free_[it->second.pool].erase({it->second.size, it->first});
      blocks_.erase(it->first);
      reserved_ -= it->second.size;
      it = segments_.erase(it);
    }
    idle_reserved_ = 0;
  }

  std::uint64_t capacity_;
  std::uint64_t allocated_ = 0;
  std::uint64_t reserved_ = 0;
  std::uint64_t idle_reserved_ = 0;  // reserved in segments with no live block
  std::uint64_t next_base_ = 0;
  std::map<std::uint64_t, Block> blocks_;      // by address
  std::map<std::uint64_t, Segment> segments_;  // by base address
  FreeSet free_[2];                            // per pool
};

}  // namespace

AllocatorInfo caching_allocator() {
  return {"caching",
          "PyTorch's CUDA caching allocator: 512 B rounding, 2 MiB / 20 MiB segments, "
          "splitting, cached segments released before an OOM",
          {},
          [](const Params&, std::uint64_t capacity_bytes, std::uint64_t cap_bytes) {
            return std::make_unique<CachingAllocator>(std::min(capacity_bytes, cap_bytes));
          },
          {}};
}

}  // namespace memsim
