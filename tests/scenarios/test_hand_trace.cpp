// A hand-written three-op trace file (tests/scenarios/data/three_ops.json) on a platform
// with round numbers (data/testbox.yaml), through the command line, against numbers worked
// out by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli.h"

using nlohmann::json;

namespace {

json run(const std::string& policy, const std::string& extra = "") {
  const std::string out = std::string(::testing::TempDir()) + "memsim_hand_" + policy + "_" +
                          std::to_string(::getpid());
  CliResult r = run_memsim("run tests/scenarios/data/testbox.yaml tests/scenarios/data/three_ops.json"
                           " --json --policy " + policy + " --out " + out + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

// Roofline: proj max(2e9/1e12, 7000/1e11) + 1e-6 = 2.001e-3 s; act max(0, 5000/1e11) + 1e-6
// = 1.05e-6 s; head max(1e6/0.5e12, 10000/0.5e11) + 1e-6 = 3e-6 s.
constexpr double kIteration = 2.001e-3 + 1.05e-6 + 3e-6;

}  // namespace

TEST(HandTrace, PeakUnderNone) {
  // w + x = 5000 at the start; +a = 7000; +b +workspace = 10600; -workspace -a = 8000;
  // +c = 11000 (the peak); after head b, x and c die.
  json s = run("none");
  EXPECT_EQ(s["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].get<std::uint64_t>(), 11000u);
  EXPECT_NEAR(s["iteration_time_s"].get<double>(), kIteration, 1e-15);
  EXPECT_NEAR(s["tiers"]["gpu0.hbm"]["peak_time_s"].get<double>(), 2.001e-3 + 1.05e-6, 1e-15);
}

TEST(HandTrace, PeakUnderKeepAll) {
  // Nothing is freed before the end: 5000 + 2000 + 3000 + 600 = 10600; the workspace goes
  // after act (10000); + c = 13000.
  json s = run("keep-all");
  EXPECT_EQ(s["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].get<std::uint64_t>(), 13000u);
  EXPECT_NEAR(s["iteration_time_s"].get<double>(), kIteration, 1e-15);
}

TEST(HandTrace, CapacityBetweenTheTwoPeaks) {
  json none = run("none", "--set gpu0.hbm.capacity=12000B");
  json keep = run("keep-all", "--set gpu0.hbm.capacity=12000B");
  EXPECT_EQ(none["status"], "ok");
  EXPECT_EQ(keep["status"], "oom");
  EXPECT_EQ(keep["oom"]["op"], "head");
  EXPECT_EQ(keep["oom"]["requested_bytes"].get<std::uint64_t>(), 3000u);
  EXPECT_EQ(keep["oom"]["allocated_bytes"].get<std::uint64_t>(), 10000u);
}
