#pragma once
// What the registries of built-in components have alike — policies (policy/builtin.cpp),
// allocators (memory/builtin.cpp), models (workload/models/builtin.cpp) and collective
// algorithms (collectives/builtin.cpp): each is a list made once, in the order `memsim list`
// prints it, of entries that carry their own `name`; a name is looked up and the names are
// listed here, once for all of them.
#include <string>
#include <string_view>
#include <vector>

namespace memsim {

/// The entry of `registry` named `name`; nullptr when none is.
template <class Info>
const Info* find_by_name(const std::vector<Info>& registry, std::string_view name) {
  for (const Info& info : registry)
    if (info.name == name) return &info;
  return nullptr;
}

/// The names of `registry`'s entries, in its order.
template <class Info>
std::vector<std::string> names_of(const std::vector<Info>& registry) {
  std::vector<std::string> names;
  names.reserve(registry.size());
  for (const Info& info : registry) names.push_back(info.name);
  return names;
}

}  // namespace memsim
