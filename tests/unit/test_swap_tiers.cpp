// Where each device of a step swaps to (policy/impl/swap_common.h): the slots the step's ops
// and buffers name, not every GPU of the platform. A rank of a pipeline on a 1,000-node
// SuperPOD searched 8,000 GPUs' routes to their hosts before it ran (55 s).
#include <gtest/gtest.h>

#include "sim/platform/platform.h"
#include "sim/policy/impl/swap_common.h"
#include "sim/workload/models/models.h"
#include "tests/model_helpers.h"
#include "tests/platform_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

PlatformSpec superpod(const std::string& nodes) { return test::preset_platform("dgx-h100-superpod", nodes); }

}  // namespace

TEST(SwapTiers, OnlyTheSlotsTheStepUsesEachWithItsOwnNodesHost) {
  const PlatformSpec p = superpod("4");  // 32 GPUs
  const Trace one = generate("{model: chain, layers: 4, width: 64, batch: 4}");
  std::vector<std::string> names;
  for (int k = 0; k < 11; ++k) names.push_back("gpu" + std::to_string(k));
  for (std::size_t n : {1u, 3u, 11u}) {
    SCOPED_TRACE(n);
    const Trace t = n == 1 ? one : combine_per_device(std::vector<Trace>(n, one), {names.begin(), names.begin() + n});
    const std::vector<SwapTiers> tiers = swap_tiers(p, t);
    ASSERT_EQ(tiers.size(), n);
    const auto devices = p.op_devices();
    for (std::size_t k = 0; k < n; ++k) {
      EXPECT_EQ(tiers[k].compute, *p.devices[devices[k]].operand_tier());
      ASSERT_TRUE(tiers[k].offload.has_value());
      const auto host = *p.find_device(p.tiers[*tiers[k].offload].device);
      EXPECT_EQ(p.devices[host].node, p.devices[devices[k]].node) << k;
      EXPECT_TRUE(tiers[k].out.has_value() && tiers[k].in.has_value());
    }
  }
}
