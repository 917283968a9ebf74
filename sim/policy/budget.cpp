#include <algorithm>
#include <cctype>

#include "sim/core/units.h"
#include "sim/policy/policy.h"

namespace memsim {

ParamSpec budget_param(const std::string& default_value) {
  return {"budget",
          "cap on each compute tier: a fraction of the baseline peak (0.5) or a size (12GiB)",
          default_value};
}

Budget read_budget(const Params& params) {
  const ConfigNode n = params.get("budget");
  if (n.is_scalar()) {
    const std::string text = n.as_string();
    if (auto bytes = parse_bytes(text)) {
      if (*bytes == 0) n.fail_expected("a budget above zero");
      return Budget{false, static_cast<double>(*bytes)};
    }
    if (!text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) {
      const double f = n.as_double();
      if (f > 0 && f <= 1) return Budget{true, f};
    }
  }
  n.fail_expected("a fraction of the baseline peak in (0, 1] like 0.5, or a size like '12GiB'");
}

std::vector<std::uint64_t> PlanningContext::device_caps() const {
  std::vector<std::uint64_t> caps;
  for (std::size_t d : platform.op_devices()) caps.push_back(tier_caps[*platform.devices[d].operand_tier()]);
  return caps;
}

}  // namespace memsim
