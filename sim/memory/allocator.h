#pragma once
// How a tier hands out space. Allocators are plain objects (no SimGrid, no time): the engine
// asks, they answer. `ideal` is the lower bound every other allocator is measured against;
// best_fit, caching (PyTorch-like) and tiled (IPU-like) come with the memory-hierarchy work.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace memsim {

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns an address (an offset into the tier) or nullopt when `bytes` does not fit.
  virtual std::optional<std::uint64_t> allocate(std::uint64_t bytes) = 0;
  virtual void release(std::uint64_t address, std::uint64_t bytes) = 0;
  /// Bytes held by live allocations.
  virtual std::uint64_t allocated_bytes() const = 0;
  /// Bytes taken from the tier (live plus cached or lost to rounding).
  virtual std::uint64_t reserved_bytes() const = 0;
  virtual std::uint64_t largest_free_block() const = 0;
  virtual std::uint64_t capacity_bytes() const = 0;
};

struct AllocatorInfo {
  std::string name;
  std::string description;
};
const std::vector<AllocatorInfo>& builtin_allocators();
/// Throws std::invalid_argument for an unknown name (the platform loader checks names first).
std::unique_ptr<Allocator> make_allocator(const std::string& name, std::uint64_t capacity_bytes);

}  // namespace memsim
