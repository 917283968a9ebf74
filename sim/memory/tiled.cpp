#include <algorithm>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/core/checked.h"
#include "sim/core/units.h"
#include "sim/memory/allocator.h"

namespace memsim {
namespace {

// An IPU-like tier: N tiles of equal capacity. A buffer of S bytes is spread evenly over
// k = min(tiles, ceil(S / grain)) consecutive tiles, ceil(S / k) bytes each, starting at the
// tile after the previous buffer's last one and wrapping round. The placement is fixed, like
// a static tile mapping: if a tile it touches lacks room for its share the request fails,
// with no search for another start (a compiler placing tensors around full tiles would do
// better; this is the simple rule). An allocation costs O(k).
class TiledAllocator final : public Allocator {
 public:
  TiledAllocator(std::uint64_t tiles, std::uint64_t tile_bytes, std::uint64_t grain_bytes)
      : tiles_(tiles),
        tile_bytes_(tile_bytes),
        grain_bytes_(grain_bytes),
        used_(tiles, 0),
        peaks_(tiles, 0) {}

  std::optional<Allocation> allocate(std::uint64_t bytes) override {
    if (bytes == 0) return Allocation{0, 0};
    const Spread s = spread(bytes);
    if (short_tile(s)) return std::nullopt;
    for (std::uint64_t i = 0; i < s.tiles; ++i) {
      const std::uint64_t t = (next_start_ + i) % tiles_;
      used_[t] += s.share;
      peaks_[t] = std::max(peaks_[t], used_[t]);
    }
    const std::uint64_t total = s.tiles * s.share;
    allocated_ += total;
    // The address names the start tile (address % tiles) and makes each allocation distinct.
    const std::uint64_t address = count_++ * tiles_ + next_start_;
    live_.emplace(address, Mapping{next_start_, s});
    next_start_ = (next_start_ + s.tiles) % tiles_;
    return Allocation{address, total};
  }

  void release(const Allocation& a) override {
    if (a.bytes == 0) return;
    auto it = live_.find(a.address);
    const Mapping& m = it->second;
    for (std::uint64_t i = 0; i < m.spread.tiles; ++i) used_[(m.start + i) % tiles_] -= m.spread.share;
    allocated_ -= m.spread.tiles * m.spread.share;
    live_.erase(it);
  }

  std::uint64_t allocated_bytes() const override { return allocated_; }
  std::uint64_t reserved_bytes() const override { return allocated_; }
  std::uint64_t capacity_bytes() const override { return tiles_ * tile_bytes_; }
  std::vector<std::uint64_t> tile_peaks() const override { return peaks_; }

  // Exact for the next start position, O(tiles) rather than O(log n): the answer depends on
  // the free room of each tile from that start. For each k, the tiles start..start+k-1 with
  // least room m take a request S with ceil(S / k) <= m, and S spreads over exactly k tiles
  // when (k-1) * grain < S <= k * grain (any S >= (tiles-1) * grain + 1 for k = tiles).
  std::uint64_t largest_free_block() const override {
    std::uint64_t best = 0;
    std::uint64_t least_room = tile_bytes_;
    for (std::uint64_t k = 1; k <= tiles_ && least_room > 0; ++k) {
      least_room = std::min(least_room, tile_bytes_ - used_[(next_start_ + k - 1) % tiles_]);
      std::uint64_t s = k * least_room;
      if (k < tiles_) s = std::min(s, k * grain_bytes_);
      if (s > (k - 1) * grain_bytes_) best = std::max(best, s);
    }
    return best;
  }

  std::string failure_reason(std::uint64_t bytes) const override {
    if (bytes == 0) return {};
    const Spread s = spread(bytes);
    auto t = short_tile(s);
    if (!t) return {};
    return "tile " + std::to_string(*t) + " needs " + format_bytes(static_cast<double>(s.share)) +
           " more but holds " + format_bytes(static_cast<double>(used_[*t])) + " of " +
           format_bytes(static_cast<double>(tile_bytes_));
  }

 private:
  struct Spread {
    std::uint64_t tiles;  // k
    std::uint64_t share;  // bytes on each of them
  };
  struct Mapping {
    std::uint64_t start;
    Spread spread;
  };

  Spread spread(std::uint64_t bytes) const {
    const std::uint64_t k = std::min(tiles_, (bytes - 1) / grain_bytes_ + 1);
    return Spread{k, (bytes - 1) / k + 1};
  }

  // The first tile, from the next start, without room for its share; nullopt when all have.
  std::optional<std::uint64_t> short_tile(const Spread& s) const {
    for (std::uint64_t i = 0; i < s.tiles; ++i) {
      const std::uint64_t t = (next_start_ + i) % tiles_;
      if (s.share > tile_bytes_ - used_[t]) return t;
    }
    return std::nullopt;
  }

  std::uint64_t tiles_;
  std::uint64_t tile_bytes_;
  std::uint64_t grain_bytes_;
  std::vector<std::uint64_t> used_;
  std::vector<std::uint64_t> peaks_;
  std::uint64_t allocated_ = 0;
  std::uint64_t next_start_ = 0;
  std::uint64_t count_ = 0;
  std::unordered_map<std::uint64_t, Mapping> live_;  // by address
};

// The tier's parameters, each read (and checked, at its line) the same way on load and on
// creation.
struct TileParams {
  std::uint64_t tiles;
  std::uint64_t tile_bytes;
  std::uint64_t grain_bytes;
};

TileParams read_tile_params(const Params& p) {
  return {static_cast<std::uint64_t>(p.get("tiles").as_int_in(1, 1 << 24)),
          p.get("tile_capacity").as_positive_bytes(), p.get("grain").as_positive_bytes()};
}

// The tiles fix the capacity; a `capacity` given beside them must say the same.
std::uint64_t tiled_tier_capacity(const Params& p, const ConfigNode& tier) {
  const TileParams t = read_tile_params(p);
  // Within the physical size bound, like any capacity (and never a product that wraps).
  const auto total_or = checked_mul(t.tiles, t.tile_bytes);
  if (!total_or || static_cast<double>(*total_or) > physical_range(UnitKind::size).max)
    p.get("tile_capacity").fail(fmt::format("{} tiles x {} B is more than 1PiB, the largest capacity memsim accepts",
                                            t.tiles, t.tile_bytes));
  const std::uint64_t total = *total_or;
  auto cap = tier.find("capacity");
  if (!cap) return total;
  const std::uint64_t capacity = cap->as_positive_bytes();
  if (capacity != total)
    cap->fail(fmt::format("capacity {} ({} B) is {} than the tiles hold: {} tiles x {} = {} ({} B)",
                          format_bytes(static_cast<double>(capacity)), capacity,
                          capacity > total ? "more" : "less", t.tiles,
                          format_bytes(static_cast<double>(t.tile_bytes)),
                          format_bytes(static_cast<double>(total)), total));
  return capacity;
}

// Under a cap the tier keeps its tile count and each tile shrinks in proportion (to 1 B at
// least). The capacity may be below what the tiles hold where a budget already lowered it.
std::unique_ptr<Allocator> make_tiled(const Params& p, std::uint64_t capacity_bytes,
                                      std::uint64_t cap_bytes) {
  const TileParams t = read_tile_params(p);
  if (t.tile_bytes > std::numeric_limits<std::uint64_t>::max() / t.tiles ||
      capacity_bytes > t.tiles * t.tile_bytes)
    throw std::invalid_argument("tiled allocator: capacity " + std::to_string(capacity_bytes) +
                                " B is more than the tiles hold: " + std::to_string(t.tiles) +
                                " tiles x " + std::to_string(t.tile_bytes) + " B");
  const std::uint64_t tile_bytes =
      std::max<std::uint64_t>(1, std::min(capacity_bytes, cap_bytes) / t.tiles);
  return std::make_unique<TiledAllocator>(t.tiles, tile_bytes, t.grain_bytes);
}

}  // namespace

AllocatorInfo tiled_allocator() {
  return {"tiled",
          "IPU-like tiles: a buffer spread evenly over consecutive tiles from where the last one "
          "ended; every tile it touches must have room",
          {{"tiles", "number of tiles; the tier holds tiles x tile_capacity", std::nullopt},
           {"tile_capacity", "what each tile holds, a size like '624KiB'", std::nullopt},
           {"grain", "least a buffer puts on one tile (S bytes take up to ceil(S / grain) tiles)",
            "64B"}},
          make_tiled, tiled_tier_capacity};
}

}  // namespace memsim
