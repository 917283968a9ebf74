#include "sim/core/registry.h"
#include "sim/policy/policy.h"

namespace memsim {

const std::vector<PolicyInfo>& builtin_policies() {
  static const std::vector<PolicyInfo> policies{
      none_policy(),
      keep_all_policy(),
      inplace_policy(),
      checkpoint_sqrt_policy(),
      checkpoint_selective_policy(),
      revolve_policy(),
      bptt_optimal_policy(),
      checkmate_policy(),
      vdnn_policy(),
      swap_lru_policy(),
      swap_budget_policy(),
      capuchin_policy(),
      zero_offload_policy(),
      zero_infinity_policy(),
      dtr_policy(),
      compress_policy(),
      hybrid_policy(),
  };
  return policies;
}

const PolicyInfo* find_policy(std::string_view name) { return find_by_name(builtin_policies(), name); }

}  // namespace memsim
