#include <algorithm>
#include <stdexcept>

#include "sim/memory/allocator.h"

namespace memsim {

// One factory per file; registration is explicit here.
std::unique_ptr<Allocator> make_ideal_allocator(const AllocatorConfig& c);
std::unique_ptr<Allocator> make_best_fit_allocator(const AllocatorConfig& c);
std::unique_ptr<Allocator> make_caching_allocator(const AllocatorConfig& c);
std::unique_ptr<Allocator> make_tiled_allocator(const AllocatorConfig& c);

const std::vector<AllocatorInfo>& builtin_allocators() {
  static const std::vector<AllocatorInfo> all{
      {"ideal", "a counter: fits while live bytes stay within capacity (no fragmentation)"},
      {"best_fit", "address-ordered free list, smallest hole that fits, coalescing (fragmentation)"},
      {"caching", "PyTorch's CUDA caching allocator: 512 B rounding, 2 MiB / 20 MiB segments, "
                  "splitting, cached segments released before an OOM"},
      {"tiled", "IPU-like tiles: a buffer spread evenly over consecutive tiles from where the "
                "last one ended; every tile it touches must have room"},
  };
  return all;
}

bool is_allocator(const std::string& name) {
  for (const auto& a : builtin_allocators())
    if (a.name == name) return true;
  return false;
}

AllocatorConfig capped(AllocatorConfig c, std::uint64_t cap_bytes) {
  if (cap_bytes >= c.capacity_bytes) return c;
  c.capacity_bytes = cap_bytes;
  if (c.name == "tiled" && c.tiles > 0) {
    // A tiled tier keeps its tile count; each tile shrinks in proportion.
    c.tile_bytes = std::max<std::uint64_t>(1, c.capacity_bytes / c.tiles);
    c.capacity_bytes = c.tile_bytes * c.tiles;
  }
  return c;
}

std::unique_ptr<Allocator> make_allocator(const AllocatorConfig& c) {
  if (c.name == "ideal") return make_ideal_allocator(c);
  if (c.name == "best_fit") return make_best_fit_allocator(c);
  if (c.name == "caching") return make_caching_allocator(c);
  if (c.name == "tiled") return make_tiled_allocator(c);
  throw std::invalid_argument("unknown allocator: " + c.name);
}

}  // namespace memsim
