// Calibration recovers the efficiencies a synthetic trace was generated with: the cost model
// itself times each op on a device with known compute and memory efficiencies per kind and
// a known launch overhead, with +-0.25% deterministic noise on top, and the fit must find
// each efficiency and the overhead within 1%.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/calibrate/calibrate.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/cost/cost_model.h"

using namespace memsim;

namespace {

// The device calibrated: one efficiency for every kind and both terms, a wrong overhead.
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

// The same device as the synthetic trace's ops really ran on. matmul is only ever
// compute-bound and relu only memory-bound; conv2d runs in both regimes, at a different
// efficiency in each; softmax has too few ops for a column of its own and is fitted as the
// memory term's default.
const char* kTruth =
    "name: box\n"
    "devices:\n"
    "  gpu0:\n"
    "    kind: gpu\n"
    "    compute: {fp32: 10TFLOPS}\n"
    "    launch_overhead: 4us\n"
    "    efficiency: {default: 0.5, matmul: 0.62, conv2d: 0.55}\n"
    "    memory_efficiency: {default: 0.3, relu: 0.41, conv2d: 0.35}\n"
    "    tiers:\n"
    "      hbm: {role: compute, capacity: 16GiB, bandwidth: 1TB/s}\n";

const std::map<std::string, double> kComputeTruth{{"matmul", 0.62}, {"conv2d", 0.55}};
const std::map<std::string, double> kMemoryTruth{{"relu", 0.41}, {"conv2d", 0.35}, {"default", 0.3}};
constexpr double kOverheadS = 4e-6;

PlatformSpec platform(const char* text) { return load_platform(ConfigNode::parse_text(text, "box.yaml")); }

struct Synthetic {
  Trace trace;
  std::vector<double> exact_s;  // the truth's durations, before the noise
};

Synthetic synthetic() {
  Synthetic s;
  std::uint64_t rng = 12345;
  auto uniform = [&] {  // a fixed LCG: the same numbers on every run
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(rng >> 11) / static_cast<double>(1ULL << 53);
  };
  const std::vector<std::string> cycle{"matmul", "conv2d", "conv2d", "relu"};
  for (int i = 0; i < 404; ++i) {
    Op op;
    op.kind = i < 400 ? cycle[static_cast<std::size_t>(i) % cycle.size()] : "softmax";
    op.name = op.kind + std::to_string(i);
    // Sizes spread over three decades; FLOPs per byte far on one side of the ridge (15.7
    // for conv2d) or the other.
    const double scale = std::pow(10.0, 3 * uniform());
    op.bytes_moved = 4e4 * scale * (0.5 + uniform());
    const bool compute_bound = op.kind == "matmul" || (op.kind == "conv2d" && uniform() < 0.5);
    op.flops = op.bytes_moved * (compute_bound ? 40 + 160 * uniform() : 0.25 + 4 * uniform());
    s.trace.add_op(std::move(op));
  }
  s.trace.name = "synthetic";
  s.exact_s = op_durations(s.trace, platform(kTruth));
  for (std::size_t i = 0; i < s.trace.ops.size(); ++i)
    s.trace.ops[i].measured_s = s.exact_s[i] * (1 + 0.005 * (uniform() - 0.5));
  return s;
}

}  // namespace

TEST(Calibrate, RecoversKnownComputeAndMemoryEfficienciesWithinOnePercent) {
  const Synthetic s = synthetic();
  const Calibration fit = calibrate(s.trace, platform(kPlatform), "gpu0", 3, Residuals::relative);
  EXPECT_TRUE(fit.converged);
  ASSERT_EQ(fit.compute.size(), kComputeTruth.size());
  ASSERT_EQ(fit.memory.size(), kMemoryTruth.size());
  for (const auto& [kind, e] : kComputeTruth) {
    SCOPED_TRACE("compute " + kind);
    ASSERT_TRUE(fit.compute.count(kind));
    EXPECT_NEAR(fit.compute.at(kind).efficiency / e, 1.0, 0.01);
  }
  for (const auto& [kind, e] : kMemoryTruth) {
    SCOPED_TRACE("memory " + kind);
    ASSERT_TRUE(fit.memory.count(kind));
    EXPECT_NEAR(fit.memory.at(kind).efficiency / e, 1.0, 0.01);
  }
  EXPECT_EQ(fit.compute.at("matmul").samples, 50u);
  EXPECT_EQ(fit.memory.at("relu").samples, 50u);
  EXPECT_EQ(fit.compute.at("conv2d").samples + fit.memory.at("conv2d").samples, 100u);
  EXPECT_GT(fit.compute.at("conv2d").samples, 30u);
  EXPECT_GT(fit.memory.at("conv2d").samples, 30u);
  EXPECT_EQ(fit.memory.at("default").samples, 2u);  // softmax: 2 of its 4 ops
  EXPECT_NEAR(fit.launch_overhead_s / kOverheadS, 1.0, 0.01);
  EXPECT_EQ(fit.fitted_ops, 202u);
  EXPECT_EQ(fit.held_out_ops, 202u);
  EXPECT_LT(fit.held_out_mean_abs_error, 0.005);  // the noise is +-0.25%
  EXPECT_LT(std::abs(fit.held_out_total_error), 0.005);
}

TEST(Calibrate, AbsoluteResidualsRecoverTheSameEfficienciesWithinOnePercent) {
  const Synthetic s = synthetic();
  const Calibration fit = calibrate(s.trace, platform(kPlatform), "gpu0");  // absolute
  EXPECT_TRUE(fit.converged);
  EXPECT_TRUE(fit.at_roofline.empty());
  for (const auto& [kind, e] : kComputeTruth) {
    ASSERT_TRUE(fit.compute.count(kind)) << kind;
    EXPECT_NEAR(fit.compute.at(kind).efficiency / e, 1.0, 0.01) << kind;
  }
  for (const auto& [kind, e] : kMemoryTruth) {
    ASSERT_TRUE(fit.memory.count(kind)) << kind;
    EXPECT_NEAR(fit.memory.at(kind).efficiency / e, 1.0, 0.01) << kind;
  }
  // In seconds the overhead is a sliver of the long ops' time: it is found less exactly.
  EXPECT_NEAR(fit.launch_overhead_s / kOverheadS, 1.0, 0.1);
  EXPECT_LT(std::abs(fit.held_out_total_error), 0.005);
}

TEST(Calibrate, AbsoluteResidualsHoldAnEfficiencyAtTheRoofline) {
  // The synthetic trace plus copies whose measured time is nearly all overhead, and a little
  // less for the larger ones: unbounded, their slope would be negative (an efficiency below
  // zero). The bounds hold them at the roofline; the other kinds keep their fit.
  Synthetic s = synthetic();
  for (int i = 0; i < 40; ++i) {
    Op op;
    op.kind = "copy";
    op.name = "copy" + std::to_string(i);
    op.bytes_moved = 1e3 * (1 + i);
    op.measured_s = kOverheadS * (1.0 - 0.002 * i);
    s.trace.add_op(op);
  }
  const Calibration fit = calibrate(s.trace, platform(kPlatform), "gpu0", 3, Residuals::absolute);
  EXPECT_EQ(fit.at_roofline, std::vector<std::string>{"memory:copy"});
  ASSERT_TRUE(fit.memory.count("copy"));
  EXPECT_DOUBLE_EQ(fit.memory.at("copy").efficiency, 1.0);
  EXPECT_NEAR(fit.compute.at("matmul").efficiency / 0.62, 1.0, 0.01);
  EXPECT_NEAR(fit.memory.at("relu").efficiency / 0.41, 1.0, 0.01);
  // Relative residuals make the same copies an error: no positive efficiency.
  EXPECT_THROW(calibrate(s.trace, platform(kPlatform), "gpu0", 3, Residuals::relative), InputError);
}

TEST(Calibrate, TheCalibratedPlatformReproducesTheTruth) {
  const Synthetic s = synthetic();
  const Calibration fit = calibrate(s.trace, platform(kPlatform), "gpu0");
  const std::string text = calibrated_platform_yaml(kPlatform, "gpu0", fit);
  const PlatformSpec p = load_platform(ConfigNode::parse_text(text, "calibrated.yaml"));
  const DeviceSpec& d = p.devices[*p.find_device("gpu0")];
  for (const auto& [kind, f] : fit.compute) {
    if (kind != "default") EXPECT_NEAR(d.efficiency_for(kind), f.efficiency, 1e-3 * f.efficiency) << kind;
  }
  for (const auto& [kind, f] : fit.memory) {
    if (kind != "default") EXPECT_NEAR(d.memory_efficiency_for(kind), f.efficiency, 1e-3 * f.efficiency) << kind;
  }
  ASSERT_TRUE(d.default_memory_efficiency);
  EXPECT_NEAR(*d.default_memory_efficiency, fit.memory.at("default").efficiency, 1e-3);
  EXPECT_EQ(d.default_efficiency, 0.5);  // no compute-bound op fell to the default: kept
  EXPECT_NEAR(d.launch_overhead_s, fit.launch_overhead_s, 1e-3 * fit.launch_overhead_s);
  const std::vector<double> predicted = op_durations(s.trace, p);
  for (std::size_t i = 0; i < predicted.size(); ++i)
    EXPECT_NEAR(predicted[i] / s.exact_s[i], 1.0, 0.01) << s.trace.ops[i].name;
}

TEST(Calibrate, ARegimeWithoutOpsLeavesItsTableAsItWas) {
  Synthetic s = synthetic();
  Trace compute_only;
  compute_only.name = "compute-only";
  for (const Op& op : s.trace.ops)
    if (op.kind == "matmul") compute_only.add_op(op);
  const Calibration fit = calibrate(compute_only, platform(kPlatform), "gpu0");
  EXPECT_TRUE(fit.memory.empty());
  ASSERT_TRUE(fit.compute.count("matmul"));
  EXPECT_NEAR(fit.compute.at("matmul").efficiency / 0.62, 1.0, 0.01);
  const std::string text = calibrated_platform_yaml(kPlatform, "gpu0", fit);
  EXPECT_EQ(text.find("memory_efficiency"), std::string::npos) << text;
}

TEST(Calibrate, OpsFasterThanTheRooflineAreAnError) {
  Trace t;
  t.name = "too-fast";
  for (int i = 0; i < 20; ++i) {
    Op op;
    op.kind = "matmul";
    op.name = "mm" + std::to_string(i);
    op.flops = 1e9 * (1 + i);
    op.measured_s = 0.5 * op.flops / 10e12 + 1e-6;  // twice the device's peak
    t.add_op(op);
  }
  try {
    calibrate(t, platform(kPlatform), "gpu0", 3, Residuals::relative);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("compute-bound ops of kind 'matmul' ran at 2x the roofline"), std::string::npos)
        << message;
  }
}

TEST(Calibrate, TooFewMeasuredOpsIsAnError) {
  Trace t;
  t.name = "tiny";
  Op op;
  op.kind = "matmul";
  op.flops = 1e9;
  op.measured_s = 1e-3;
  t.add_op(op);
  EXPECT_THROW(calibrate(t, platform(kPlatform), "gpu0"), InputError);
}

// A fit is written as a device file, so it must be one the platform loader reads back
// (bounds.h): an overhead past 1 s or an efficiency below a millionth is an error naming it.
TEST(Calibrate, AFitThePlatformLoaderWouldRefuseIsAnError) {
  auto message = [](const Trace& t) {
    try {
      calibrate(t, platform(kPlatform), "gpu0");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Trace slow;  // every op 2 s, whatever its work: all overhead
  slow.name = "slow";
  for (int i = 0; i < 20; ++i) {
    Op op;
    op.kind = "matmul";
    op.name = "mm" + std::to_string(i);
    op.flops = 1e6 * (1 + i);
    op.measured_s = 2.0;
    slow.add_op(op);
  }
  EXPECT_EQ(message(slow), "slow: the fit gives device 'gpu0' a launch overhead of 2e+06us; a device file's "
                           "launch_overhead is a time from 0 to 1s: the measured times are not of ops a roofline "
                           "with one overhead can time");
  Trace crawling;  // at a hundred-millionth of the peak
  crawling.name = "crawling";
  for (int i = 0; i < 20; ++i) {
    Op op;
    op.kind = "matmul";
    op.name = "mm" + std::to_string(i);
    op.flops = 1e6 * (1 + i);
    op.measured_s = op.flops / (10e12 * 1e-8);
    crawling.add_op(op);
  }
  EXPECT_EQ(message(crawling), "crawling: the fit gives the compute-bound ops of kind 'matmul' an efficiency of "
                               "1e-08; a device file's efficiency is a number from 0.000001 to 1");
}
