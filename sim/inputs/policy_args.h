#pragma once
// Choosing a policy: `--policy NAME` or `--policy FILE.yaml` (a map with `policy: NAME` and
// its parameters), then --set policy.KEY=VALUE on top.
#include <memory>
#include <string>
#include <vector>

#include "sim/inputs/inputs.h"
#include "sim/policy/policy.h"

namespace memsim {

std::unique_ptr<Policy> make_policy_arg(const std::string& arg,
                                        const std::vector<Override>& overrides);

}  // namespace memsim
