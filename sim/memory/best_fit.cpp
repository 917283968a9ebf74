#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "sim/core/units.h"
#include "sim/memory/allocator.h"

namespace memsim {
namespace {

// An address-ordered free list over [0, capacity). A request takes the front of the smallest
// hole that fits (ties: the lowest address), unrounded; a release coalesces with free
// neighbours. Holes are indexed twice: by address (to find neighbours) and by (size,
// address) (best fit and the largest hole), so every operation is O(log holes).
class BestFitAllocator final : public Allocator {
 public:
  explicit BestFitAllocator(std::uint64_t capacity) : capacity_(capacity) {
    if (capacity > 0) add_hole(0, capacity);
  }

  std::optional<Allocation> allocate(std::uint64_t bytes) override {
    if (bytes == 0) return Allocation{0, 0};
    auto fit = by_size_.lower_bound({bytes, 0});
    if (fit == by_size_.end()) return std::nullopt;
    auto [size, address] = *fit;
    remove_hole(address, size);
    if (size > bytes) add_hole(address + bytes, size - bytes);
    allocated_ += bytes;
    return Allocation{address, bytes};
  }

  void release(const Allocation& a) override {
    if (a.bytes == 0) return;
    allocated_ -= a.bytes;
    std::uint64_t address = a.address;
    std::uint64_t size = a.bytes;
    auto next = by_address_.lower_bound(address);
    if (next != by_address_.end() && next->first == address + size) {
      size += next->second;
      remove_hole(next->first, next->second);
    }
    auto after = by_address_.lower_bound(address);
    if (after != by_address_.begin()) {
      auto prev = std::prev(after);
      if (prev->first + prev->second == address) {
        address = prev->first;
        size += prev->second;
        remove_hole(prev->first, prev->second);
      }
    }
    add_hole(address, size);
  }

  std::uint64_t allocated_bytes() const override { return allocated_; }
  std::uint64_t reserved_bytes() const override { return allocated_; }
  std::uint64_t largest_free_block() const override {
    return by_size_.empty() ? 0 : by_size_.rbegin()->first;
  }
  std::uint64_t capacity_bytes() const override { return capacity_; }

  std::string failure_reason(std::uint64_t bytes) const override {
    const std::uint64_t free = capacity_ - allocated_;
    const std::uint64_t hole = largest_free_block();
    if (free < bytes || hole >= bytes) return {};
    return "fragmentation: " + format_bytes(static_cast<double>(free)) +
           " free in total but the largest hole is " + format_bytes(static_cast<double>(hole));
  }

 private:
  void add_hole(std::uint64_t address, std::uint64_t size) {
    by_address_.emplace(address, size);
    by_size_.emplace(size, address);
  }
  void remove_hole(std::uint64_t address, std::uint64_t size) {
    by_address_.erase(address);
    by_size_.erase({size, address});
  }

  std::uint64_t capacity_;
  std::uint64_t allocated_ = 0;
  std::map<std::uint64_t, std::uint64_t> by_address_;          // address -> size
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_size_;  // (size, address)
};

}  // namespace

AllocatorInfo best_fit_allocator() {
  return {"best_fit",
          "address-ordered free list, smallest hole that fits, coalescing (fragmentation)",
          {},
          [](const Params&, std::uint64_t capacity_bytes, std::uint64_t cap_bytes) {
            return std::make_unique<BestFitAllocator>(std::min(capacity_bytes, cap_bytes));
          },
          {}};
}

}  // namespace memsim
