// Every captured trace shipped in workloads/traces/ runs, and memsim's predicted peak is
// within 5% of the peak measured on the real training step (its NAME.measured.json), or
// docs/fidelity.md explains the gap under a heading naming the trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<std::string> captures() {
  std::vector<std::string> names;
  const fs::path dir = fs::path(MEMSIM_SOURCE_DIR) / "workloads/traces";
  if (fs::exists(dir))
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string f = e.path().filename().string();
      const std::string suffix = ".measured.json";
      if (f.size() > suffix.size() && f.ends_with(suffix)) names.push_back(f.substr(0, f.size() - suffix.size()));
    }
  std::sort(names.begin(), names.end());
  return names;
}

class Capture : public ::testing::TestWithParam<std::string> {};

TEST_P(Capture, PredictedPeakWithinFivePercentOrExplained) {
  const std::string name = GetParam();
  const json measured = json::parse(slurp(std::string(MEMSIM_SOURCE_DIR) + "/workloads/traces/" + name + ".measured.json"));
  const std::string trace = "workloads/traces/" + measured["trace"].get<std::string>();
  const std::string out = std::string(::testing::TempDir()) + "memsim_fidelity_" + name + "_" + std::to_string(::getpid());
  CliResult r = run_memsim("run cpu " + trace + " --json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s = json::parse(r.out);
  EXPECT_EQ(s["status"], "ok");
  const double predicted = s["tiers"]["host.dram"]["peak_allocated_bytes"].get<double>();
  const double real = measured["peak_bytes"].get<double>();
  ASSERT_GT(real, 0);
  const double error = std::abs(predicted - real) / real;
  if (error > 0.05) {
    const std::string doc = slurp(std::string(MEMSIM_SOURCE_DIR) + "/docs/fidelity.md");
    EXPECT_NE(doc.find("### " + name), std::string::npos)
        << name << ": predicted " << predicted << " B against measured " << real << " B ("
        << 100 * error << "%), and docs/fidelity.md has no '### " << name << "' explaining it";
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, Capture, ::testing::ValuesIn(captures()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(Captures, AHandfulAreShipped) { EXPECT_GE(captures().size(), 3u); }

}  // namespace

// `memsim trace` converts an Execution Trace to the native format, which reads back to the
// same workload.
TEST(Captures, ConvertToTheNativeFormat) {
  const std::string native = std::string(::testing::TempDir()) + "memsim_native_mlp_" + std::to_string(::getpid()) + ".json";
  CliResult conv = run_memsim("trace workloads/traces/mlp-b64.et.json -o " + native);
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  CliResult a = run_memsim("info workloads/traces/mlp-b64.et.json --json");
  CliResult b = run_memsim("info " + native + " --json");
  std::remove(native.c_str());
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const json ja = json::parse(a.out), jb = json::parse(b.out);
  EXPECT_EQ(ja["baseline_peak_bytes"], jb["baseline_peak_bytes"]);
  EXPECT_EQ(ja["ops"], jb["ops"]);
  EXPECT_EQ(ja["bytes_by_category"], jb["bytes_by_category"]);
  EXPECT_EQ(ja["parameters"].get<std::uint64_t>(), 3962890u);  // torch: 784x1024 + 3 x 1024x1024 + 1024x10, with biases
}
