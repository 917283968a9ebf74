#include <algorithm>

#include "sim/memory/allocator.h"

namespace memsim {
namespace {

// A counter: any request fits while the sum of live bytes stays within capacity. No
// fragmentation, no rounding — the lower bound of what any real allocator needs.
// Addresses are handed out by a bump pointer so events can name them; they carry no layout.
class IdealAllocator final : public Allocator {
 public:
  explicit IdealAllocator(std::uint64_t capacity) : capacity_(capacity) {}
  std::optional<Allocation> allocate(std::uint64_t bytes) override {
    if (bytes > capacity_ - allocated_) return std::nullopt;
    allocated_ += bytes;
    Allocation a{next_address_, bytes};
    next_address_ += bytes;
    return a;
  }
  void release(const Allocation& a) override { allocated_ -= a.bytes; }
  std::uint64_t allocated_bytes() const override { return allocated_; }
  std::uint64_t reserved_bytes() const override { return allocated_; }
  std::uint64_t largest_free_block() const override { return capacity_ - allocated_; }
  std::uint64_t capacity_bytes() const override { return capacity_; }

 private:
  std::uint64_t capacity_;
  std::uint64_t allocated_ = 0;
  std::uint64_t next_address_ = 0;
};

}  // namespace

AllocatorInfo ideal_allocator() {
  return {"ideal", "a counter: fits while live bytes stay within capacity (no fragmentation)", {},
          [](const Params&, std::uint64_t capacity_bytes, std::uint64_t cap_bytes) {
            return std::make_unique<IdealAllocator>(std::min(capacity_bytes, cap_bytes));
          },
          {}};
}

}  // namespace memsim
