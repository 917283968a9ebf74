// DTR in the engine: what it evicts on small graphs worked by hand, and the published DTR
// simulator's figures on its linear-chain benchmark (N = 1,000 here; N = 10,000 in
// bench/dtr_bench.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "sim/core/config.h"
#include "sim/engine/engine.h"
#include "sim/policy/impl/dtr_chain.h"
#include "sim/policy/policy.h"
#include "sim/workload/models/builder.h"

using namespace memsim;

namespace {

std::unique_ptr<Policy> dtr(const std::string& heuristic, const std::string& budget = "1.0") {
  auto node = ConfigNode::parse_text("{heuristic: " + heuristic + ", budget: '" + budget + "'}", "test");
  const PolicyInfo* info = find_policy("dtr");
  return info->create(Params(node, info->params, "policy dtr"));
}

// The chain at `units` of memory (1 MiB each): total compute over the baseline's 2N units.
struct ChainRun {
  Summary summary;
  double overhead = 0;  // (compute + recompute) / compute
};
ChainRun run_chain(std::size_t n, std::uint64_t units, const std::string& heuristic = "full") {
  const Trace t = dtr_unit_chain(n);
  auto p = dtr(heuristic);
  Recorder rec;
  ChainRun r;
  r.summary = simulate(dtr_unit_platform(units * kDtrUnitBytes), t, *p, rec);
  r.overhead = (r.summary.compute_time_s + r.summary.recompute_time_s) / r.summary.compute_time_s;
  return r;
}

std::uint64_t units_at(double fraction, std::size_t n) {
  return static_cast<std::uint64_t>(std::floor(fraction * static_cast<double>(n + 1)));
}

}  // namespace

TEST(DtrChain, BaselinePeakIsNPlusOneUnits) {
  EXPECT_EQ(baseline_peak_bytes(dtr_unit_chain(1000)), 1001 * kDtrUnitBytes);
  ChainRun r = run_chain(1000, 1001);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_EQ(r.summary.recompute_time_s, 0.0);
  EXPECT_NEAR(r.summary.compute_time_s, 2000 * 1e-3, 1e-9);
}

TEST(DtrChain, HalfBudgetWithinDtrFigure) {
  ChainRun r = run_chain(1000, units_at(0.5, 1000));
  ASSERT_EQ(r.summary.status, "ok");
  RecordProperty("overhead", std::to_string(r.overhead));
  std::printf("budget 0.5: overhead %.4f\n", r.overhead);
  EXPECT_LE(r.overhead, 1.25);
  EXPECT_LE(r.summary.tiers[0].usage.peak_allocated_bytes, units_at(0.5, 1000) * kDtrUnitBytes);
}

TEST(DtrChain, QuarterBudgetWithinDtrFigure) {
  ChainRun r = run_chain(1000, units_at(0.25, 1000));
  ASSERT_EQ(r.summary.status, "ok");
  std::printf("budget 0.25: overhead %.4f\n", r.overhead);
  EXPECT_LE(r.overhead, 1.375);
}

TEST(DtrChain, TwoSqrtNBudgetWithinDtrFigure) {
  const auto units = static_cast<std::uint64_t>(2 * std::sqrt(1000.0));  // 63
  ChainRun r = run_chain(1000, units);
  ASSERT_EQ(r.summary.status, "ok");
  std::printf("budget 2 sqrt(N) = %llu units: overhead %.4f\n", static_cast<unsigned long long>(units),
              r.overhead);
  EXPECT_LE(r.overhead, 1.55);
}
