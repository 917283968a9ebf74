#include <algorithm>
#include <cctype>
#include <cmath>

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

void apply_budget(PlatformSpec& platform, const Budget& budget, std::uint64_t baseline_peak) {
  const double cap = budget.is_fraction ? std::floor(budget.value * static_cast<double>(baseline_peak))
                                        : budget.value;
  for (std::size_t d : platform.compute_devices()) {
    TierSpec& tier = platform.tiers[*platform.devices[d].compute_tier];
    tier.capacity_bytes = std::min<std::uint64_t>(tier.capacity_bytes, static_cast<std::uint64_t>(cap));
    if (tier.allocator == "tiled") {
      // A tiled tier keeps its tile count; each tile shrinks in proportion.
      tier.tile_bytes = std::max<std::uint64_t>(1, tier.capacity_bytes / tier.tiles);
      tier.capacity_bytes = tier.tile_bytes * tier.tiles;
    }
  }
}

}  // namespace memsim
