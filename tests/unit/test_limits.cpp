// Bounds on the work an input asks for (sim/core/limits.h) and the check every run's summary
// passes before it is written (sim/run/sanity.h), without SimGrid.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/run/sanity.h"
#include "sim/workload/parallel.h"
#include "sim/workload/workload.h"

using namespace memsim;

namespace {

Trace small_llama(const std::string& parallel) {
  return generate_workload(ConfigNode::parse_text(
      "model: llama\nlayers: 2\nhidden: 64\nheads: 2\nintermediate: 128\nvocab: 100\nseq_len: 16\n" + parallel,
      "test.yaml"));
}

// A run of one tier that fit: iteration 10 ms = compute 6 + stall 1 + recompute 1 + idle 2.
Summary fitting() {
  Summary s;
  s.iteration_time_s = 0.010;
  s.compute_time_s = 0.006;
  s.stall_time_s = 0.001;
  s.recompute_time_s = 0.001;
  s.idle_time_s = 0.002;
  s.ops_total = s.ops_run = 10;
  TierSummary t;
  t.name = "gpu0.hbm";
  t.usage.capacity_bytes = 1000;
  t.usage.peak_allocated_bytes = t.usage.peak_reserved_bytes = 1000;
  s.tiers.push_back(t);
  return s;
}

std::string check_message(const Summary& s) {
  try {
    check_summary(s);
  } catch (const InternalError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Limits, CountsAreWholeNumbersInDigitsOrPowersOfTen) {
  std::uint64_t n = 0;
  EXPECT_TRUE(parse_count("50000000", n));
  EXPECT_EQ(n, 50'000'000u);
  EXPECT_TRUE(parse_count("5e7", n));
  EXPECT_EQ(n, 50'000'000u);
  for (const char* bad : {"", "0", "-5", "1.5", "1e100", "nan", "inf", "12abc", "1e-3", " 7"})
    EXPECT_FALSE(parse_count(bad, n)) << bad;
  EXPECT_EQ(format_count(4'000'001), "4e6");
  EXPECT_EQ(format_count(2.6e9), "2.6e9");
  EXPECT_EQ(format_count(999'999), "999999");
  EXPECT_EQ(format_count(9.96e7), "1e8");
  EXPECT_EQ(format_limit(10'000'000), "1e7");
  EXPECT_EQ(format_limit(12'345'678), "12345678");  // as typed back, never rounded
}

TEST(Limits, DefaultsAndTheEnvironment) {
  ::unsetenv("MEMSIM_MAX_OPS");
  ::unsetenv("MEMSIM_MAX_POINTS");
  // Every shipped preset and test fits: the largest, the 10^6-layer chain, is 4,000,001 ops.
  EXPECT_EQ(op_limit(), 10'000'000u);
  EXPECT_FALSE(over_op_limit(4'000'001));
  EXPECT_EQ(point_limit(), 10'000u);
  set_op_limit(1000);
  EXPECT_EQ(op_limit(), 1000u);
  EXPECT_TRUE(over_op_limit(1001));
  EXPECT_EQ(ops_over_limit(2.6e9), "about 2.6e9 ops; the limit is 1000 (raise it with --max-ops N or MEMSIM_MAX_OPS=N)");
  ::setenv("MEMSIM_MAX_OPS", "many", 1);
  try {
    op_limit();
    ADD_FAILURE() << "no error for MEMSIM_MAX_OPS=many";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "MEMSIM_MAX_OPS=many: expected a number of ops from 1 to 2^53, like 1e7");
  }
  ::unsetenv("MEMSIM_MAX_OPS");
}

TEST(Limits, TheParallelEstimateCountsMicroBatchesAndSimulatedRanks) {
  const Trace step = small_llama("");
  const Trace four = small_llama("parallel: {micro_batches: 4}\n");
  ParallelSettings s;
  s.micro_batches = 4;
  const double estimate = parallel_op_estimate(step, s);
  // About the ops it makes (its buckets and accumulations are counted at their most).
  EXPECT_GE(estimate, static_cast<double>(four.ops.size()));
  EXPECT_LE(estimate, 1.2 * static_cast<double>(four.ops.size()));
  s.dp = 8;
  s.tp = 2;
  EXPECT_DOUBLE_EQ(parallel_op_estimate(step, s), estimate);  // symmetric: one rank simulated
  s.symmetric = false;
  EXPECT_DOUBLE_EQ(parallel_op_estimate(step, s), 16 * estimate);
}

TEST(Limits, AGeneratorPastTheLimitIsRefusedWhileItBuilds) {
  // A chain of 100 layers is 401 ops; with a limit of 60 the builder stops at the 61st.
  set_op_limit(60);
  try {
    generate_workload(ConfigNode::parse_text("model: chain\nlayers: 100\nwidth: 8\n", "chain.yaml"));
    ADD_FAILURE() << "no error past the limit";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "chain.yaml: model chain: the step has more than 60 ops, the limit (raise it with "
                           "--max-ops N or MEMSIM_MAX_OPS=N)");
  }
  // A decoder's layers are counted before it is built, and refused at the key.
  try {
    small_llama("");
    ADD_FAILURE() << "no error past the limit";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "test.yaml:2:9: layers: 2 layers make about 101 ops; the limit is 60 (raise it with "
                           "--max-ops N or MEMSIM_MAX_OPS=N)");
  }
  ::unsetenv("MEMSIM_MAX_OPS");
}

TEST(SummaryCheck, ASaneRunPasses) {
  EXPECT_EQ(check_message(fitting()), "");
  Summary oom = fitting();
  oom.status = "oom";
  oom.oom = OomReport{};
  oom.tiers[0].usage.peak_allocated_bytes = 2000;  // the allocation that did not fit
  oom.idle_time_s = 0;                             // stopped: its parts need not add up
  EXPECT_EQ(check_message(oom), "");
}

TEST(SummaryCheck, EachAbsurdFigureIsNamedWithItsValue) {
  Summary s = fitting();
  s.iteration_time_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(check_message(s), "summary check: iteration_time_s is nan (expected a finite time >= 0 s)");
  s = fitting();
  s.stall_time_s = -0.001;
  EXPECT_EQ(check_message(s), "summary check: stall_time_s is -0.001 (expected a finite time >= 0 s)");
  s = fitting();
  s.links.push_back({"pcie0", 1e9, true, 1, 1, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(check_message(s), "summary check: link pcie0 utilisation is inf (expected a finite share >= 0)");
  s = fitting();
  s.tiers[0].usage.peak_allocated_bytes = 1001;
  EXPECT_EQ(check_message(s),
            "summary check: gpu0.hbm peak_allocated_bytes 1001 is more than the 1000 bytes it may hold, in a run "
            "that fit");
  s = fitting();
  s.tiers[0].usage.budget_bytes = 500;  // a budget is what the run may hold
  EXPECT_EQ(check_message(s),
            "summary check: gpu0.hbm peak_allocated_bytes 1000 is more than the 500 bytes it may hold, in a run "
            "that fit");
  s = fitting();
  s.idle_time_s = 0.003;
  EXPECT_EQ(check_message(s),
            "summary check: the iteration time 0.01 s is not the sum of its parts 0.011 s (compute 0.006 + host 0 + "
            "stall 0.001 + recompute 0.001 + exposed comm 0 + idle 0.003)");
  s = fitting();
  s.compute_time_s = 0.02;
  s.status = "oom";
  s.oom = OomReport{};
  EXPECT_EQ(check_message(s),
            "summary check: compute 0.02 + stall 0.001 + recompute 0.001 s is more than the iteration time 0.01 s");
  s = fitting();
  s.pipeline.push_back({1, 4, 0.001, 0, 1.5});
  EXPECT_EQ(check_message(s), "summary check: pipeline stage 1 bubble_fraction is 1.5 (expected a fraction from 0 to 1)");
  s = fitting();
  s.status = "ok";
  s.oom = OomReport{};
  EXPECT_EQ(check_message(s), "summary check: status is ok but the run has an oom report");
}
