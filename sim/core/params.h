#pragma once
// Parameters declared where they are read (a model generator, a policy): each with a
// description and a default, or required. Params checks a YAML map against the
// declarations (unknown keys are errors) and hands out values as ConfigNodes, so a bad
// value is reported at its line — or, for a default, as "default of <owner>.<name>".
#include <optional>
#include <string>
#include <vector>

#include "sim/core/config.h"

namespace memsim {

struct ParamSpec {
  std::string name;
  std::string description;
  std::optional<std::string> default_value;  // nullopt: required
};

class Params {
 public:
  /// `map` holds the values; `extra_keys` are keys the caller reads itself (e.g. "model").
  /// `owner` names the thing declaring the parameters ("model resnet") in messages.
  Params(const ConfigNode& map, std::vector<ParamSpec> specs, const std::string& owner,
         const std::vector<std::string>& extra_keys = {});

  /// The value of a declared parameter: from the map, else its default.
  ConfigNode get(const std::string& name) const;
  bool given(const std::string& name) const;
  /// The value of an extra key (one the caller reads itself, such as a workload's
  /// `parallel` section), if the map has it.
  std::optional<ConfigNode> extra(const std::string& key) const { return map_.find(key); }
  const std::vector<ParamSpec>& specs() const { return specs_; }

 private:
  ConfigNode map_;
  std::vector<ParamSpec> specs_;
  std::string owner_;
};

}  // namespace memsim
