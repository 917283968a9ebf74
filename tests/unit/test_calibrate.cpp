// Calibration recovers the efficiencies a synthetic trace was generated with: op durations
// are the cost model's roofline at known per-kind efficiencies plus a launch overhead, with
// +-0.5% deterministic noise, and the fit must find each efficiency within 1%.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/calibrate/calibrate.h"
#include "sim/core/config.h"
#include "sim/core/error.h"

using namespace memsim;

namespace {

const char* kPlatform =
    "name: box\n"
    "devices:\n"
    "  gpu0:\n"
    "    kind: gpu\n"
    "    compute: {fp32: 10TFLOPS}\n"
    "    launch_overhead: 1us\n"
    "    efficiency: {default: 0.5}\n"
    "    tiers:\n"
    "      hbm: {role: compute, capacity: 16GiB, bandwidth: 1TB/s}\n";

struct Synthetic {
  Trace trace;
  std::map<std::string, double> truth;
  double overhead_s = 4e-6;
};

Synthetic synthetic() {
  Synthetic s;
  s.truth = {{"matmul", 0.72}, {"conv2d", 0.55}, {"relu", 0.31}, {"layer_norm", 0.42}};
  const std::vector<std::string> kinds{"matmul", "conv2d", "relu", "layer_norm"};
  std::uint64_t rng = 12345;
  auto uniform = [&] {  // a fixed LCG: the same numbers on every run
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(rng >> 11) / static_cast<double>(1ULL << 53);
  };
  const double peak = 10e12, bandwidth = 1e12;
  for (int i = 0; i < 400; ++i) {
    Op op;
    op.kind = kinds[static_cast<std::size_t>(i) % kinds.size()];
    op.name = op.kind + std::to_string(i);
    // Compute-bound or memory-bound, spread over three decades.
    const double scale = std::pow(10.0, 3 * uniform());
    op.flops = op.kind == "relu" || op.kind == "layer_norm" ? 1e5 * scale : 1e8 * scale;
    op.bytes_moved = 4e4 * scale * (0.5 + uniform());
    const double roofline = std::max(op.flops / peak, op.bytes_moved / bandwidth) / s.truth[op.kind];
    op.measured_s = (roofline + s.overhead_s) * (1 + 0.01 * (uniform() - 0.5));
    s.trace.add_op(std::move(op));
  }
  s.trace.name = "synthetic";
  return s;
}

PlatformSpec platform() { return load_platform(ConfigNode::parse_text(kPlatform, "box.yaml")); }

}  // namespace

TEST(Calibrate, RecoversKnownEfficienciesWithinOnePercent) {
  const Synthetic s = synthetic();
  const Calibration fit = calibrate(s.trace, platform(), "gpu0");
  ASSERT_EQ(fit.kinds.size(), s.truth.size());
  for (const auto& [kind, e] : s.truth) {
    SCOPED_TRACE(kind);
    ASSERT_TRUE(fit.kinds.count(kind));
    EXPECT_NEAR(fit.kinds.at(kind).efficiency / e, 1.0, 0.01);
    EXPECT_EQ(fit.kinds.at(kind).samples, 50u);
  }
  EXPECT_NEAR(fit.launch_overhead_s / s.overhead_s, 1.0, 0.05);
  EXPECT_EQ(fit.fitted_ops, 200u);
  EXPECT_EQ(fit.held_out_ops, 200u);
  EXPECT_LT(fit.held_out_mean_abs_error, 0.01);  // the noise is +-0.5%
  EXPECT_LT(std::abs(fit.held_out_total_error), 0.01);
}

TEST(Calibrate, WritesALoadablePlatform) {
  const Synthetic s = synthetic();
  const Calibration fit = calibrate(s.trace, platform(), "gpu0");
  const std::string text = calibrated_platform_yaml(kPlatform, "gpu0", fit);
  PlatformSpec p = load_platform(ConfigNode::parse_text(text, "calibrated.yaml"));
  const DeviceSpec& d = p.devices[*p.find_device("gpu0")];
  for (const auto& [kind, f] : fit.kinds) EXPECT_NEAR(d.efficiency_for(kind), f.efficiency, 1e-3 * f.efficiency);
  EXPECT_NEAR(d.launch_overhead_s, fit.launch_overhead_s, 1e-3 * fit.launch_overhead_s);
}

TEST(Calibrate, TooFewMeasuredOpsIsAnError) {
  Trace t;
  t.name = "tiny";
  Op op;
  op.kind = "matmul";
  op.flops = 1e9;
  op.measured_s = 1e-3;
  t.add_op(op);
  EXPECT_THROW(calibrate(t, platform(), "gpu0"), InputError);
}
