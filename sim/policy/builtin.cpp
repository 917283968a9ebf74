#include "sim/policy/policy.h"

namespace memsim {

const std::vector<PolicyInfo>& builtin_policies() {
  static const std::vector<PolicyInfo> policies{none_policy(), keep_all_policy()};
  return policies;
}

const PolicyInfo* find_policy(std::string_view name) {
  for (const auto& p : builtin_policies())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace memsim
