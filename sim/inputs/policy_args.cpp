#include "sim/inputs/policy_args.h"

#include <filesystem>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/paths.h"
#include "sim/core/suggest.h"

namespace memsim {

std::unique_ptr<Policy> make_policy_arg(const std::string& arg,
                                        const std::vector<Override>& overrides) {
  ConfigNode root = ConfigNode::parse_text("{}", "--policy " + arg);
  std::string name = arg;
  const bool is_file = arg.size() > 5 && (arg.ends_with(".yaml") || arg.ends_with(".yml"));
  if (is_file || path_exists(arg)) {
    root = ConfigNode::parse_file(arg);
    name = root.at("policy").as_string();
  }
  const PolicyInfo* info = find_policy(name);
  if (!info) {
    std::string names;
    std::vector<std::string> all;
    for (const auto& p : builtin_policies()) {
      names += (names.empty() ? "" : ", ") + p.name;
      all.push_back(p.name);
    }
    if (is_file) root.at("policy").fail_expected("a policy name (" + names + ")" + did_you_mean(name, all));
    throw InputError(fmt::format("--policy {}: no such policy{} (policies: {})", arg, did_you_mean(arg, all), names));
  }
  for (const auto& o : overrides)
    if (o.target == "policy") root.override_value({o.key}, o.value, o.origin);
  Params params(root, info->params, "policy " + name, {"policy"});
  return info->create(params);
}

}  // namespace memsim
