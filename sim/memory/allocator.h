#pragma once
// How a tier hands out space. Allocators are plain objects (no SimGrid, no time): the engine
// asks, they answer.
//
//   ideal     a counter: fits while live bytes stay within capacity (the lower bound)
//   best_fit  an address-ordered free list with coalescing: shows fragmentation
//   caching   PyTorch's CUDA caching allocator: 512 B rounding, small and large pools,
//             2 MiB / 20 MiB segments, block splitting, cached segments released and the
//             request retried before an OOM
//   tiled     an IPU-like tier of N tiles, each with its own capacity: a buffer is spread
//             over tiles and fits only if every tile it touches has room
//
// "Allocated" is what live allocations hold (with the allocator's rounding); "reserved" is
// what the allocator has taken from the tier (allocated plus cached segments).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace memsim {

struct AllocatorConfig {
  std::string name = "ideal";
  std::uint64_t capacity_bytes = 0;
  std::uint64_t tiles = 0;        // tiled: number of tiles
  std::uint64_t tile_bytes = 0;   // tiled: capacity of each tile
  std::uint64_t grain_bytes = 0;  // tiled: least a buffer puts on one tile (0: 64 B)
};

/// What an allocation took: where, and how many bytes (the request after rounding).
struct Allocation {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Takes room for `bytes`, or nullopt when it does not fit (nothing changes then).
  virtual std::optional<Allocation> allocate(std::uint64_t bytes) = 0;
  /// Gives back exactly what allocate() returned.
  virtual void release(const Allocation& a) = 0;
  virtual std::uint64_t allocated_bytes() const = 0;
  virtual std::uint64_t reserved_bytes() const = 0;
  /// The largest request that would succeed now without releasing cached memory. O(log n).
  virtual std::uint64_t largest_free_block() const = 0;
  virtual std::uint64_t capacity_bytes() const = 0;
  /// After allocate(bytes) failed: why, as a phrase for the OOM report ("" when the tier is
  /// simply full). best_fit names fragmentation, tiled names the tile.
  virtual std::string failure_reason(std::uint64_t bytes) const { (void)bytes; return {}; }
  /// Tiled tiers: the peak bytes each tile has held. Empty for others.
  virtual std::vector<std::uint64_t> tile_peaks() const { return {}; }
};

struct AllocatorInfo {
  std::string name;
  std::string description;
};
const std::vector<AllocatorInfo>& builtin_allocators();
bool is_allocator(const std::string& name);
/// Throws std::invalid_argument for an unknown name or an impossible configuration (the
/// platform loader checks first, so users see located errors).
std::unique_ptr<Allocator> make_allocator(const AllocatorConfig& config);
/// The configuration under a cap (a budget) of at most `cap_bytes`: the capacity lowered
/// to it, and for tiles, each tile shrunk in proportion (the tile count kept).
AllocatorConfig capped(AllocatorConfig config, std::uint64_t cap_bytes);

}  // namespace memsim
