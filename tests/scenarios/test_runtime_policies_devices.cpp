// Runtime policies (swap-lru, capuchin, dtr) on several GPUs, dense and mixture-of-experts:
// every run ends, and ten runs of one command write the same bytes.
//
// With several streams at once (replicas on each GPU, a communication stream beside the
// compute one) the engine once shared state between streams' actors: the hook actions being
// applied (exit 3 or SIGSEGV, varying between runs), the op being prepared (a demand copy on
// the communication stream named the compute stream's op, so capuchin's fallback evicted the
// gradient a reduce-scatter was fetching, which fetched it back, for ever), and a prefetch
// placed before a backward op ran on the communication stream ahead of the buffer it moved
// ("moves buffer '...router.weights', which is in no tier", exit 3).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

struct Case {
  const char* name;
  const char* args;
};

// Small steps (two layers), so that ten runs of each take seconds; at a budget of 0.95 of the
// step's peak under none (the reserve on top) each of them acts on every case.
constexpr Case kCases[] = {
    {"Dense2Gpus", "dgx-h100 llama-7b --devices gpu0,gpu1"},
    {"Dense8Gpus", "dgx-h100 llama-7b --devices gpu0,gpu1,gpu2,gpu3,gpu4,gpu5,gpu6,gpu7"},
    {"MoeExpertParallel2",
     "dgx-h100 mixtral-8x7b --set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=2 --set workload.batch=4"},
    {"MoeExpertParallel8", "dgx-h100 mixtral-8x7b --set parallel.dp=8 --set parallel.ep=8 --set parallel.zero=2"},
    {"MoeZero3", "dgx-h100 mixtral-8x7b --set parallel.dp=8 --set parallel.zero=3"},
};
constexpr const char* kPolicies[] = {"swap-lru", "capuchin", "dtr"};
constexpr int kRuns = 10;
const char* const kFiles[] = {"summary.json", "timeline.csv", "memory.csv", "peak.csv"};

std::string fmt_args(const Case& c, const std::string& policy) {
  return std::string("run ") + c.args + " --set workload.layers=2 --policy " + policy + " --set policy.budget=0.95 --no-advice";
}

class RuntimePolicyOnDevices : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(RuntimePolicyOnDevices, EndsAndWritesTheSameBytesEveryRun) {
  const Case& c = kCases[std::get<0>(GetParam())];
  const std::string policy = kPolicies[std::get<1>(GetParam())];
  const std::string args = fmt_args(c, policy);
  SCOPED_TRACE(args);
  std::string first[std::size(kFiles)];
  for (int run = 0; run < kRuns; ++run) {
    const fs::path out = fs::path(::testing::TempDir()) /
                         ("memsim_rtdev_" + std::to_string(::getpid()) + "_" + std::to_string(run));
    fs::remove_all(out);
    const CliResult r = run_memsim(args + " --out " + out.string());
    ASSERT_EQ(r.exit_code, 0) << "run " << run << ": " << r.err;
    for (std::size_t f = 0; f < std::size(kFiles); ++f) {
      const std::string bytes = slurp((out / kFiles[f]).string());
      ASSERT_FALSE(bytes.empty()) << kFiles[f];
      if (run == 0)
        first[f] = bytes;
      else
        ASSERT_TRUE(bytes == first[f]) << kFiles[f] << " of run " << run << " differs from run 0's";
    }
    if (run == 0) {
      // It fit, and the policy acted: a swapping policy moved bytes, dtr recomputed.
      EXPECT_NE(first[0].find("\"status\": \"ok\""), std::string::npos) << first[0].substr(0, 300);
      if (policy == "dtr")
        EXPECT_EQ(first[0].find("\"recompute_flops\": 0.0,"), std::string::npos);
      else
        EXPECT_EQ(first[0].find("\"swap_out_bytes\": 0,"), std::string::npos);
    }
    fs::remove_all(out);
  }
}

INSTANTIATE_TEST_SUITE_P(All, RuntimePolicyOnDevices,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kCases))),
                                            ::testing::Range(0, static_cast<int>(std::size(kPolicies)))),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
                           std::string p = kPolicies[std::get<1>(info.param)];
                           for (char& ch : p)
                             if (ch == '-') ch = '_';
                           return std::string(kCases[std::get<0>(info.param)].name) + "_" + p;
                         });

}  // namespace

namespace {

// Every actor's stack was reserved at SimGrid's default of 8 MiB: ZeRO-Offload's copies of
// Llama 7B (hundreds in flight at once) reserved gigabytes of address space for an 80 MB
// run, and under a limit of 1.5 GB SimGrid aborted ("Failed to allocate stack", signal 6).
// Streams' and copies' stacks are now sized to what they run.
TEST(ActorStacks, AManyCopiesRunFitsUnderAGigabyteOfAddressSpace) {
  const fs::path out = fs::path(::testing::TempDir()) / ("memsim_stacks_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const CliResult r = run_memsim("run dgx-h100 llama-7b --policy zero-offload --no-advice --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string summary = slurp((out / "summary.json").string());
  ASSERT_NE(summary.find("\"status\": \"ok\""), std::string::npos) << r.out;
  // The same run under `ulimit -v` (1 GB): a subshell, so the limit is the run's alone.
  fs::remove_all(out);
  const std::string cmd = std::string("cd '") + MEMSIM_SOURCE_DIR + "' && (ulimit -v 1000000 && '" + MEMSIM_BINARY +
                          "' run dgx-h100 llama-7b --policy zero-offload --no-advice --out '" + out.string() +
                          "' >/dev/null 2>&1)";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(slurp((out / "summary.json").string()), summary);
  fs::remove_all(out);
}

}  // namespace
