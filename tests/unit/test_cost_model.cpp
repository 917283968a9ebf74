// The roofline's two efficiencies: `efficiency` scales the compute term, `memory_efficiency`
// the memory term, and a device without `memory_efficiency` uses `efficiency` for both.
#include <gtest/gtest.h>

#include <string>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/cost/cost_model.h"

using namespace memsim;

namespace {

// 10 TFLOP/s and 1 TB/s; 1 us per op.
PlatformSpec device(const std::string& efficiency_lines) {
  return load_platform(ConfigNode::parse_text(
      "name: box\n"
      "devices:\n"
      "  gpu0:\n"
      "    kind: gpu\n"
      "    compute: {fp32: 10TFLOPS}\n"
      "    launch_overhead: 1us\n" +
          efficiency_lines +
          "    tiers:\n"
          "      hbm: {role: compute, capacity: 16GiB, bandwidth: 1TB/s}\n",
      "box.yaml"));
}

Op op(const std::string& kind, double flops, double bytes) {
  Op o;
  o.kind = kind;
  o.name = kind;
  o.flops = flops;
  o.bytes_moved = bytes;
  return o;
}

double seconds(const PlatformSpec& p, const Op& o) {
  return roofline_s(o, p.devices[0], p.tiers[*p.devices[0].compute_tier]);
}

// 1e10 FLOPs and 1e8 bytes: 1 ms of compute, 0.1 ms of memory at efficiency 1.
const Op kComputeBound = op("matmul", 1e10, 1e8);
// 1e7 FLOPs and 1e9 bytes: 1 us of compute, 1 ms of memory.
const Op kMemoryBound = op("relu", 1e7, 1e9);

}  // namespace

TEST(CostModel, WithoutMemoryEfficiencyOneEfficiencyScalesBothTerms) {
  const PlatformSpec p = device("    efficiency: {default: 0.5, matmul: 0.8}\n");
  const DeviceSpec& d = p.devices[0];
  EXPECT_FALSE(d.default_memory_efficiency);
  for (const char* kind : {"matmul", "relu", "conv2d"})
    EXPECT_EQ(d.memory_efficiency_for(kind), d.efficiency_for(kind)) << kind;
  EXPECT_DOUBLE_EQ(seconds(p, kComputeBound), 1e-3 / 0.8 + 1e-6);
  EXPECT_DOUBLE_EQ(seconds(p, kMemoryBound), 1e-3 / 0.5 + 1e-6);
}

TEST(CostModel, MemoryEfficiencyChangesOnlyTheMemoryTerm) {
  const std::string eff = "    efficiency: {default: 0.5, matmul: 0.8}\n";
  const PlatformSpec before = device(eff);
  const PlatformSpec after = device(eff + "    memory_efficiency: {default: 0.25}\n");
  EXPECT_DOUBLE_EQ(seconds(after, kComputeBound), seconds(before, kComputeBound));
  EXPECT_DOUBLE_EQ(seconds(after, kMemoryBound), 1e-3 / 0.25 + 1e-6);
}

TEST(CostModel, MemoryEfficiencyFallsBackToTheDefaultThenToEfficiency) {
  const std::string eff = "    efficiency: {default: 0.5, matmul: 0.8}\n";
  const DeviceSpec with_default =
      device(eff + "    memory_efficiency: {default: 0.25, relu: 0.4}\n").devices[0];
  EXPECT_EQ(with_default.memory_efficiency_for("relu"), 0.4);
  EXPECT_EQ(with_default.memory_efficiency_for("matmul"), 0.25);
  EXPECT_EQ(with_default.efficiency_for("relu"), 0.5);
  const DeviceSpec kinds_only = device(eff + "    memory_efficiency: {relu: 0.4}\n").devices[0];
  EXPECT_EQ(kinds_only.memory_efficiency_for("relu"), 0.4);
  EXPECT_EQ(kinds_only.memory_efficiency_for("matmul"), 0.8);
  EXPECT_EQ(kinds_only.memory_efficiency_for("conv2d"), 0.5);
}

TEST(CostModel, AMemoryEfficiencyOutsideZeroToOneIsALocatedError) {
  for (const char* value : {"0", "1.5", "fast"}) {
    try {
      device(std::string("    memory_efficiency: {default: 0.5, relu: ") + value + "}\n");
      FAIL() << value;
    } catch (const InputError& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind("box.yaml:7:", 0), 0u) << message;
      EXPECT_NE(message.find("devices.gpu0.memory_efficiency.relu: expected a number"), std::string::npos)
          << message;
    }
  }
  EXPECT_THROW(device("    memory_efficiency: {relu_typo: 0.5}\n"), InputError);
}
