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
//
// An allocator is a component like a policy: created by name (memory/builtin.cpp registers
// them), its parameters declared in its own file and read from the tier's entry in the
// platform YAML (`sram: {allocator: tiled, tiles: 1472, tile_capacity: 624KiB, ...}`).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/params.h"

namespace memsim {

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
  /// Keys of the tier's entry that this allocator reads, beside the tier's own.
  std::vector<ParamSpec> params;
  /// An allocator for a tier of `capacity_bytes` that may use at most `cap_bytes` of it (a
  /// budget; the capacity itself when there is none). It applies the cap itself, so its
  /// capacity_bytes() is what the tier offers under it. Throws std::invalid_argument for an
  /// impossible configuration (the platform loader checks first, so users see located errors).
  std::function<std::unique_ptr<Allocator>(const Params&, std::uint64_t capacity_bytes,
                                           std::uint64_t cap_bytes)>
      create;
  /// The tier's capacity, for an allocator whose parameters fix it (tiled: tiles x
  /// tile_capacity): checks a `capacity` given in the tier's entry against them. Empty: the
  /// entry's `capacity` is required and taken as it is.
  std::function<std::uint64_t(const Params&, const ConfigNode& tier)> tier_capacity;
};

/// Every built-in allocator, in the order `memsim list` shows them.
const std::vector<AllocatorInfo>& builtin_allocators();
const AllocatorInfo* find_allocator(std::string_view name);
/// Reads `tier` (a tier's entry) through the allocator's declared parameters; `tier_keys` are
/// the keys the tier reads itself. Unknown keys and missing required ones are located errors.
Params allocator_params(const AllocatorInfo& info, const ConfigNode& tier,
                        const std::vector<std::string>& tier_keys);
/// The allocator `name` for a tier of `capacity_bytes` under a cap of `cap_bytes`; `params`
/// are the tier's (null: a tier built in code, every parameter at its default). Throws
/// std::invalid_argument for an unknown name or an impossible configuration.
std::unique_ptr<Allocator> make_allocator(const std::string& name,
                                          const Params* params,
                                          std::uint64_t capacity_bytes, std::uint64_t cap_bytes);

// One per file.
AllocatorInfo ideal_allocator();
AllocatorInfo best_fit_allocator();
AllocatorInfo caching_allocator();
AllocatorInfo tiled_allocator();

}  // namespace memsim
