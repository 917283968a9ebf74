// `memsim info [DEVICE] WORKLOAD --op-kinds` and the efficiency keys a run leaves unused:
// which entries of a device's efficiency tables a workload's ops take.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_opkinds_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

std::set<std::string> kinds_of(const json& j) {
  std::set<std::string> kinds;
  for (const json& k : j["op_kinds"]) kinds.insert(k["kind"].get<std::string>());
  return kinds;
}

std::vector<std::string> unused_of(const json& j) { return j["unused_efficiency_keys"].get<std::vector<std::string>>(); }

bool has(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

}  // namespace

// GPT's layers are `linear` (a device's `matmul` entry times none of them), and the kinds'
// ops and FLOPs add up to what `memsim info` counts.
TEST(OpKinds, Gpt2SmallEmitsLinearNotMatmulAndTheKindsAddUp) {
  const CliResult r = run_memsim("info gpt2-small --op-kinds --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const auto kinds = kinds_of(j);
  EXPECT_TRUE(kinds.contains("linear"));
  EXPECT_TRUE(kinds.contains("linear_backward"));
  EXPECT_FALSE(kinds.contains("matmul"));
  EXPECT_FALSE(kinds.contains("matmul_backward"));
  const CliResult info = run_memsim("info gpt2-small --json");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const json totals = json::parse(info.out);
  std::uint64_t ops = 0;
  double flops = 0, last = INFINITY;
  for (const json& k : j["op_kinds"]) {
    ops += k["ops"].get<std::uint64_t>();
    flops += k["flops"].get<double>();
    EXPECT_LE(k["flops"].get<double>(), last) << "sorted by FLOPs, the most first: " << k["kind"];
    last = k["flops"].get<double>();
    EXPECT_FALSE(k["phases"].empty()) << k["kind"];
  }
  EXPECT_EQ(ops, totals["ops"].get<std::uint64_t>());
  EXPECT_EQ(j["ops"], totals["ops"]);
  EXPECT_NEAR(flops, totals["flops"].get<double>(), 1e-9 * totals["flops"].get<double>());
  EXPECT_NEAR(j["flops"].get<double>(), totals["flops"].get<double>(), 1e-9 * totals["flops"].get<double>());
  // The table says the same, its total row and all.
  const CliResult text = run_memsim("info gpt2-small --op-kinds");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(": " + std::to_string(ops) + " ops of " + std::to_string(kinds.size()) + " kinds"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("\n  total "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\n  linear_backward "), std::string::npos) << text.out;
}

TEST(OpKinds, WithADeviceEachKindShowsTheEntryThatTimesIt) {
  const CliResult r = run_memsim("info dgx-a100 gpt2-small --op-kinds --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["device"], "gpu0");
  EXPECT_EQ(j["platform"], "dgx-a100");
  for (const json& k : j["op_kinds"])
    if (k["kind"] == "linear") {
      EXPECT_EQ(k["efficiency"]["key"], "efficiency.default");  // dgx-a100 keys matmul, not linear
      EXPECT_EQ(k["efficiency"]["value"], 0.859);  // the preset's GEMM rate, measured on an A100 SXM (docs/time-model.md)
      EXPECT_EQ(k["memory_efficiency"]["key"], "memory_efficiency.default");
    }
  const auto unused = unused_of(j);
  for (const char* key : {"gpu0.efficiency.matmul", "gpu0.efficiency.matmul_backward", "gpu0.efficiency.conv2d",
                          "gpu0.efficiency.conv2d_backward"})
    EXPECT_TRUE(has(unused, key)) << key;
  const CliResult text = run_memsim("info dgx-a100 gpt2-small --op-kinds");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("gpu0's efficiency keys conv2d, conv2d_backward, flash_attention, flash_attention_backward, "
                          "matmul, matmul_backward match no kind"),
            std::string::npos)
      << text.out;
}

// A run reports the keys its ops never reached, in summary.json and on stderr, one line for
// the eight identical GPUs.
TEST(OpKinds, ARunListsTheEfficiencyKeysNoOpReached) {
  const std::string out = temp_dir("gpt");
  const CliResult r = run_memsim("run dgx-a100 gpt2-small --set workload.batch=1 --set workload.seq_len=128 "
                                 "--outputs summary --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s = json::parse(slurp(out + "/summary.json"));
  const auto unused = unused_of(s);
  EXPECT_TRUE(has(unused, "gpu0.efficiency.matmul")) << s["unused_efficiency_keys"];
  EXPECT_TRUE(has(unused, "gpu7.efficiency.matmul")) << s["unused_efficiency_keys"];
  EXPECT_FALSE(has(unused, "gpu0.efficiency.default"));
  EXPECT_NE(r.err.find("memsim: gpu0-7: efficiency keys conv2d, conv2d_backward, flash_attention, "
                       "flash_attention_backward, matmul, matmul_backward match no op of this run (its kinds: memsim info dgx-a100 gpt2-small --set workload.batch=1 "
                       "--set workload.seq_len=128 --op-kinds)\n"),
            std::string::npos)
      << r.err;
}

// ResNet's convolutions take the conv2d entries: only the keys of kinds it lacks are listed.
TEST(OpKinds, ResNetTakesTheConvolutionEntries) {
  const std::string out = temp_dir("resnet");
  const CliResult r = run_memsim("run dgx-a100 resnet50 --set workload.batch=2 --devices gpu0 --outputs summary --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto unused = unused_of(json::parse(slurp(out + "/summary.json")));
  EXPECT_FALSE(has(unused, "gpu0.efficiency.conv2d"));
  EXPECT_FALSE(has(unused, "gpu0.efficiency.conv2d_backward"));
  EXPECT_TRUE(has(unused, "gpu0.efficiency.matmul"));  // its classifier is `linear`
  EXPECT_EQ(unused.size(), 4u) << json(unused);  // and the FlashAttention entries
  EXPECT_NE(r.err.find("memsim: gpu0: efficiency keys flash_attention, flash_attention_backward, matmul, "
                       "matmul_backward match no op"),
            std::string::npos)
      << r.err;
  const json kinds = json::parse(run_memsim("info dgx-a100 resnet50 --op-kinds --json").out);
  for (const json& k : kinds["op_kinds"])
    if (k["kind"] == "conv2d") EXPECT_EQ(k["efficiency"]["key"], "efficiency.conv2d");
}

// FlashAttention takes its own entries, fitted to the published kernel rates (docs/time-model.md):
// FlashAttention-2 on the A100 presets, cuDNN's fused attention on the H100 ones.
TEST(OpKinds, FusedAttentionTakesTheFlashAttentionEntries) {
  for (const auto& [platform, forward, backward] :
       {std::tuple{"dgx-a100", 0.620, 0.620}, std::tuple{"dgx-h100", 0.554, 0.536}}) {
    const CliResult r = run_memsim(std::string("info ") + platform +
                                   " llama-7b --set workload.layers=2 --set workload.attention_impl=fused --op-kinds --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    int seen = 0;
    for (const json& k : j["op_kinds"]) {
      if (k["kind"] == "flash_attention") {
        EXPECT_EQ(k["efficiency"]["key"], "efficiency.flash_attention");
        EXPECT_EQ(k["efficiency"]["value"], forward) << platform;
        ++seen;
      } else if (k["kind"] == "flash_attention_backward") {
        EXPECT_EQ(k["efficiency"]["key"], "efficiency.flash_attention_backward");
        EXPECT_EQ(k["efficiency"]["value"], backward) << platform;
        ++seen;
      }
    }
    EXPECT_EQ(seen, 2) << platform;
    EXPECT_FALSE(has(unused_of(j), "gpu0.efficiency.flash_attention")) << platform;
  }
}

TEST(OpKinds, UsageErrors) {
  const CliResult alone = run_memsim("info dgx-a100 --op-kinds");
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_EQ(alone.err, "memsim: info dgx-a100 --op-kinds: the kinds are a workload's: memsim info dgx-a100 WORKLOAD "
                       "--op-kinds\n");
  const CliResult swapped = run_memsim("info gpt2-small dgx-a100 --op-kinds");
  EXPECT_EQ(swapped.exit_code, 2);
  EXPECT_NE(swapped.err.find("the device comes first: memsim info dgx-a100 gpt2-small --op-kinds"), std::string::npos)
      << swapped.err;
  const CliResult both = run_memsim("info dgx-a100 gpt2-small --op-kinds --placement");
  EXPECT_EQ(both.exit_code, 2);
  const CliResult neither = run_memsim("info dgx-a100 gpt2-small");
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_NE(neither.err.find("needs --placement or --op-kinds"), std::string::npos) << neither.err;
}
