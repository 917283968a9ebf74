// A summary's peak list names its buffers by views into text the report keeps: the names
// outlive the run they came from (its step, recorder and result), in copies too.
#include <gtest/gtest.h>

#include "sim/inputs/inputs.h"
#include "sim/inputs/policy_args.h"
#include "sim/report/peak.h"
#include "sim/run/run.h"
#include "tests/model_helpers.h"

using namespace memsim;

TEST(PeakViews, TheNamesOutliveTheRun) {
  const auto policy = make_policy_arg("none", {});
  RunInputs in;
  in.platform = load_platform_arg("a100-40gb", {});
  in.workloads.push_back(test::generate("model: chain\nlayers: 40\nwidth: 64\nbatch: 8\ndtype: fp32\noptimizer: sgd\n"));
  in.policy = policy.get();
  Summary copy;
  {
    const Summary s = run(in).summary;  // the result, its step and recorder are gone
    copy = s;
  }
  ASSERT_FALSE(copy.peaks.empty());
  const PeakReport& p = copy.peaks[0];
  ASSERT_GT(p.live.size(), 40u);
  ASSERT_TRUE(p.text);
  std::size_t weights = 0, made = 0;
  for (const PeakBuffer& b : p.live) {
    if (b.category == Category::weight) {
      ++weights;
      EXPECT_EQ(b.name, "layers." + std::to_string(weights - 1) + ".weight") << "in the order the step made them";
    }
    if (b.producer.empty()) continue;
    ++made;
    EXPECT_EQ(b.producer.substr(0, 7), "layers.") << b.name;
    EXPECT_EQ(b.producer.substr(0, b.layer.size()), b.layer) << "the layer is the producer's module";
    EXPECT_EQ(b.layer, layer_of(std::string(b.producer)));
  }
  EXPECT_EQ(weights, 40u);
  EXPECT_GT(made, 0u);
  // Largest first, then in the order the step made them.
  for (std::size_t k = 1; k < p.live.size(); ++k) EXPECT_GE(p.live[k - 1].bytes, p.live[k].bytes);
}
