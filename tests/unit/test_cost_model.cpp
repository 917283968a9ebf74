// The roofline's two efficiencies: `efficiency` scales the compute term, `memory_efficiency`
// the memory term, and a device without `memory_efficiency` uses `efficiency` for both.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

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

// FlashAttention on a device with `flash_attention: {fixed_keys: [F, B]}`: its efficiency entry
// times w / (w + F) forward, w / (w + B) backward, w the keys a query attends to (FLOPs over 4
// of the query's elements forward, over 10 backward).
namespace {

// A FlashAttention op of `dtype` queries of `elements` elements attending to `keys` keys each.
Trace flash_trace(double elements, double keys, bool backward, DType dtype) {
  Trace t;
  // The query a view of a fused q/k/v buffer (grouped-query: 1.5 times the query), the output
  // and its gradient of the query's shape.
  const double size = dtype_bytes(dtype);
  const BufferId qkv = t.add_buffer("qkv", static_cast<std::uint64_t>(1.5 * size * elements), Category::activation);
  const BufferId out = t.add_buffer("out", static_cast<std::uint64_t>(size * elements), Category::activation);
  const BufferId g = t.add_buffer("g", static_cast<std::uint64_t>(size * elements), Category::activation_grad);
  Op o;
  o.id = 0;
  o.name = backward ? "attn.backward" : "attn";
  o.kind = backward ? "flash_attention_backward" : "flash_attention";
  o.dtype = dtype;
  o.inputs = backward ? std::vector<BufferId>{g, qkv, out} : std::vector<BufferId>{qkv};
  if (!backward) o.outputs = std::vector<BufferId>{out};
  o.flops = (backward ? 10.0 : 4.0) * elements * keys;
  t.ops.push_back(o);
  return t;
}

// device() (10 TFLOP/s fp32, 1 us per op) with FlashAttention at 0.5 forward, 0.4 backward.
PlatformSpec flash_device(const std::string& flash_line) {
  return device("    efficiency: {default: 1, flash_attention: 0.5, flash_attention_backward: 0.4}\n" + flash_line);
}

}  // namespace

TEST(CostModel, FlashAttentionPaysAFixedWorkPerBlockOfQueries) {
  const PlatformSpec flat = flash_device("");
  const PlatformSpec fixed = flash_device("    flash_attention: {fixed_keys: [250, 1000]}\n");
  for (const double keys : {250.0, 1000.0, 4000.0}) {
    const Trace f = flash_trace(1e6, keys, false, DType::fp32), b = flash_trace(1e6, keys, true, DType::fp32);
    const double flops_f = f.ops[0].flops, flops_b = b.ops[0].flops;
    EXPECT_NEAR(op_durations(f, flat)[0], flops_f / (10e12 * 0.5) + 1e-6, 1e-12);
    EXPECT_NEAR(op_durations(b, flat)[0], flops_b / (10e12 * 0.4) + 1e-6, 1e-12);
    EXPECT_NEAR(op_durations(f, fixed)[0], flops_f / (10e12 * 0.5 * keys / (keys + 250)) + 1e-6, 1e-12) << keys;
    EXPECT_NEAR(op_durations(b, fixed)[0], flops_b / (10e12 * 0.4 * keys / (keys + 1000)) + 1e-6, 1e-12) << keys;
  }
  // Other kinds are untouched.
  Trace other = flash_trace(1e6, 250, false, DType::fp32);
  other.ops[0].kind = "bmm";
  EXPECT_DOUBLE_EQ(op_durations(other, fixed)[0], op_durations(other, flat)[0]);
}

TEST(CostModel, FlashAttentionFixedKeysAreCheckedWhereTheyAreRead) {
  for (const char* bad : {"    flash_attention: {fixed_keys: [250]}\n", "    flash_attention: {fixed_keys: [250, -1]}\n",
                          "    flash_attention: {fixed_key: [250, 250]}\n"}) {
    try {
      flash_device(bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("box.yaml:8:", 0), 0u) << e.what();  // the flash_attention line
    }
  }
  // A list of the wrong length says how long it is.
  try {
    flash_device("    flash_attention: {fixed_keys: [250]}\n");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expected [forward, backward]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("got a list of 1 item"), std::string::npos) << e.what();
  }
}

// The presets' FlashAttention reproduces the published curves it was fitted to: FlashAttention-2
// forward + backward on an A100 (causal, head dim 128, 16k tokens; arXiv 2307.08691 fig. 4) and
// cuDNN's forward (causal) and backward (non-causal) on an H100 (arXiv 2407.08608 figs. 5d, 6b),
// each within 2%.
TEST(CostModel, ThePresetsFlashAttentionFollowsThePublishedRates) {
  const auto preset = [](const std::string& name) {
    return load_platform(ConfigNode::parse_file(std::string(MEMSIM_SOURCE_DIR) + "/configs/devices/" + name + ".yaml"));
  };
  const double elements = 16384.0 * 2048;  // 16k tokens of hidden 2048
  const auto tflops = [&](const PlatformSpec& p, double keys, bool backward) {
    const Trace t = flash_trace(elements, keys, backward, DType::bf16);
    return t.ops[0].flops / (op_durations(t, p)[0] - p.devices[0].launch_overhead_s) / 1e12;
  };
  const PlatformSpec a100 = preset("dgx-a100");
  const std::vector<std::pair<double, double>> fa2 = {{512, 99},  {1024, 133}, {2048, 155},
                                                      {4096, 173}, {8192, 182}, {16384, 189}};
  for (const auto& [seq, published] : fa2) {
    // Forward and backward together: 3.5 forwards' FLOPs in the time of both passes.
    const Trace f = flash_trace(elements, seq / 2, false, DType::bf16);
    const Trace b = flash_trace(elements, seq / 2, true, DType::bf16);
    const double both = (f.ops[0].flops + b.ops[0].flops) /
                        (op_durations(f, a100)[0] + op_durations(b, a100)[0] - 2 * a100.devices[0].launch_overhead_s) / 1e12;
    EXPECT_NEAR(both / published, 1.0, 0.02) << seq << ": " << both;
  }
  const PlatformSpec h100 = preset("dgx-h100");
  const std::vector<std::tuple<double, double, double>> cudnn = {
      {2048, 484, 465}, {4096, 518, 499}, {8192, 529, 518}, {16384, 539, 516}};
  for (const auto& [seq, forward, backward] : cudnn) {
    EXPECT_NEAR(tflops(h100, seq / 2, false) / forward, 1.0, 0.02) << seq;
    EXPECT_NEAR(tflops(h100, seq, true) / backward, 1.0, 0.02) << seq;
  }
}
