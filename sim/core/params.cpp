#include "sim/core/params.h"

#include <fmt/format.h>

#include "sim/core/error.h"

namespace memsim {

Params::Params(const ConfigNode& map, std::vector<ParamSpec> specs, const std::string& owner,
               const std::vector<std::string>& extra_keys)
    : map_(map), specs_(std::move(specs)), owner_(owner) {
  std::vector<std::string> allowed = extra_keys;
  for (const auto& s : specs_) allowed.push_back(s.name);
  map_.allow_only(allowed);
  for (const auto& s : specs_)
    if (!s.default_value && !map_.has(s.name))
      map_.fail(fmt::format("missing required key '{}' ({} requires it: {})", s.name, owner_,
                            s.description));
}

bool Params::given(const std::string& name) const { return map_.has(name); }

ConfigNode Params::get(const std::string& name) const {
  for (const auto& s : specs_) {
    if (s.name != name) continue;
    if (auto v = map_.find(name)) return *v;
    // Defaults are parsed like any value so they go through the same checks.
    return ConfigNode::parse_text(*s.default_value, fmt::format("default of {}.{}", owner_, name));
  }
  throw std::logic_error(fmt::format("{} reads undeclared parameter '{}'", owner_, name));
}

}  // namespace memsim
