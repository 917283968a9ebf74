#include <algorithm>
#include <stdexcept>

#include "sim/core/registry.h"
#include "sim/memory/allocator.h"

namespace memsim {

const std::vector<AllocatorInfo>& builtin_allocators() {
  static const std::vector<AllocatorInfo> all{
      ideal_allocator(),
      best_fit_allocator(),
      caching_allocator(),
      tiled_allocator(),
  };
  return all;
}

const AllocatorInfo* find_allocator(std::string_view name) { return find_by_name(builtin_allocators(), name); }

Params allocator_params(const AllocatorInfo& info, const ConfigNode& tier,
                        const std::vector<std::string>& tier_keys) {
  return Params(tier, info.params, "allocator " + info.name, tier_keys);
}

std::unique_ptr<Allocator> make_allocator(const std::string& name,
                                          const Params* params,
                                          std::uint64_t capacity_bytes, std::uint64_t cap_bytes) {
  const AllocatorInfo* info = find_allocator(name);
  if (!info) throw std::invalid_argument("unknown allocator: " + name);
  if (params) return info->create(*params, capacity_bytes, cap_bytes);
  const Params defaults =
      allocator_params(*info, ConfigNode::parse_text("{}", "(a tier built in code)"), {});
  return info->create(defaults, capacity_bytes, cap_bytes);
}

}  // namespace memsim
