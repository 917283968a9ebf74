#include "sim/core/params.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/suggest.h"

namespace memsim {

Params::Params(const ConfigNode& map, std::vector<ParamSpec> specs, const std::string& owner,
               const std::vector<std::string>& extra_keys)
    : map_(map), specs_(std::move(specs)), owner_(owner) {
  if (!map_.is_map()) map_.fail_expected("a map");
  for (const auto& entry : map_.entries()) {
    const std::string& key = entry.first;
    bool known = std::find(extra_keys.begin(), extra_keys.end(), key) != extra_keys.end();
    for (const auto& s : specs_) known |= s.name == key;
    if (known) continue;
    std::string names;
    std::vector<std::string> all;
    for (const auto& s : specs_) {
      names += (names.empty() ? "" : ", ") + s.name;
      all.push_back(s.name);
    }
    map_.key_node(key).fail(names.empty() ? fmt::format("unknown key '{}'; {} takes no parameters", key, owner_)
                             : fmt::format("unknown key '{}'{}; {} takes: {}", key, did_you_mean_aside(key, all), owner_, names));
  }
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
