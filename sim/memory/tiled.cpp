#include <algorithm>
#include <limits>
#include <stdexcept>
#include <unordered_map>

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
        grain_bytes_(grain_bytes == 0 ? 64 : grain_bytes),
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

}  // namespace

std::unique_ptr<Allocator> make_tiled_allocator(const AllocatorConfig& c) {
  if (c.tiles == 0 || c.tile_bytes == 0)
    throw std::invalid_argument("tiled allocator needs tiles and tile_bytes above 0");
  if (c.tile_bytes > std::numeric_limits<std::uint64_t>::max() / c.tiles ||
      c.tiles * c.tile_bytes != c.capacity_bytes)
    throw std::invalid_argument("tiled allocator: capacity " + std::to_string(c.capacity_bytes) +
                                " B is not what the tiles hold: " + std::to_string(c.tiles) +
                                " tiles x " + std::to_string(c.tile_bytes) + " B");
  return std::make_unique<TiledAllocator>(c.tiles, c.tile_bytes, c.grain_bytes);
}

}  // namespace memsim
