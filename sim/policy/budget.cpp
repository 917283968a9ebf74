#include <algorithm>
#include <cctype>
#include <cmath>

#include "sim/core/units.h"
#include "sim/memory/allocator.h"
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

void apply_budget(PlatformSpec& platform, const Budget& budget, std::uint64_t baseline_peak) {
  apply_budget(platform, budget,
               std::vector<std::uint64_t>(platform.compute_devices().size(), baseline_peak));
}

void apply_budget(PlatformSpec& platform, const Budget& budget,
                  const std::vector<std::uint64_t>& baseline_peaks) {
  const auto devices = platform.compute_devices();
  for (std::size_t k = 0; k < devices.size(); ++k) {
    const std::uint64_t peak = k < baseline_peaks.size() ? baseline_peaks[k] : 0;
    if (budget.is_fraction && peak == 0) continue;
    const double cap = budget.is_fraction ? std::floor(budget.value * static_cast<double>(peak))
                                          : budget.value;
    TierSpec& tier = platform.tiers[*platform.devices[devices[k]].compute_tier];
    // The allocator applies the cap and says what it then holds (a tiled tier keeps its tile
    // count, each tile shrinking in proportion).
    tier.capacity_bytes = make_allocator(tier.allocator, tier.allocator_params, tier.capacity_bytes,
                                         static_cast<std::uint64_t>(cap))
                              ->capacity_bytes();
  }
}

}  // namespace memsim
