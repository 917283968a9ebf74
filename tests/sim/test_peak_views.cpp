// A summary's peak list names its buffers by views into text the report keeps: the names
// outlive the run they came from (its step, recorder and result), in copies too.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/inputs/inputs.h"
#include "sim/inputs/policy_args.h"
#include "sim/report/peak.h"
#include "sim/report/writers.h"
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

// A symmetric run's ranks held what the simulated rank held: their reports share its list of
// live buffers (one list, not one per rank: at 8,192 GPUs the copies were 41 MB), and
// summary.json, whose tiers are written one at a time, is the whole document's own dump(2).
TEST(PeakViews, SymmetricRanksShareOneListAndTheSummaryIsTheDocumentsDump) {
  const auto policy = make_policy_arg("none", {});
  RunInputs in;
  in.platform = load_platform_arg("dgx-a100", {});
  in.workloads.push_back(test::workload(
      "model: chain\nlayers: 12\nwidth: 64\nbatch: 8\ndtype: fp32\noptimizer: sgd\nparallel: {dp: 8}\n"));
  in.policy = policy.get();
  const RunResult r = run(in);
  const Summary& s = r.summary;
  auto tier = [&](const std::string& name) {
    for (std::size_t t = 0; t < s.tiers.size(); ++t)
      if (s.tiers[t].name == name) return t;
    ADD_FAILURE() << "no tier " << name;
    return std::size_t{0};
  };
  const PeakBuffers& simulated = s.peak(tier("gpu0.hbm")).live;
  const PeakBuffers& peer = s.peak(tier("gpu7.hbm")).live;
  ASSERT_GT(simulated.size(), 12u);
  EXPECT_EQ(peer.size(), simulated.size());
  EXPECT_EQ(peer.begin(), simulated.begin()) << "one list, shared";

  const std::string text = summary_json(s);
  const auto doc = nlohmann::ordered_json::parse(text);
  EXPECT_EQ(doc.dump(2) + "\n", text);
  ASSERT_EQ(doc["tiers"].size(), s.tiers.size());
  EXPECT_EQ(doc["tiers"].begin().key(), s.tiers.front().name);
  EXPECT_EQ(doc["tiers"]["gpu7.hbm"]["peak_allocated_bytes"], doc["tiers"]["gpu0.hbm"]["peak_allocated_bytes"]);
  EXPECT_EQ(doc["tiers"]["gpu7.hbm"]["peak_buffers"], doc["tiers"]["gpu0.hbm"]["peak_buffers"]);
  // The keys after the tiers are where the document puts them.
  EXPECT_EQ(std::prev(doc.end()).key(), doc.contains("oom") ? "oom" : "tiers");
}
