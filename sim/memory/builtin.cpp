#include <stdexcept>

#include "sim/memory/allocator.h"

namespace memsim {

// One factory per file; registration is explicit here.
std::unique_ptr<Allocator> make_ideal_allocator(const AllocatorConfig& c);

const std::vector<AllocatorInfo>& builtin_allocators() {
  static const std::vector<AllocatorInfo> all{
      {"ideal", "a counter: fits while live bytes stay within capacity (no fragmentation)"},
  };
  return all;
}

bool is_allocator(const std::string& name) {
  for (const auto& a : builtin_allocators())
    if (a.name == name) return true;
  return false;
}

std::unique_ptr<Allocator> make_allocator(const AllocatorConfig& c) {
  if (c.name == "ideal") return make_ideal_allocator(c);
  throw std::invalid_argument("unknown allocator: " + c.name);
}

}  // namespace memsim
