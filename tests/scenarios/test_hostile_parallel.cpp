// What fuzz/hostile_parallel.py found: command lines over parallel layouts that a user may
// type, each with the exit code and the exact message it must give.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_hpar_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

}  // namespace

// A split the model cannot make was a message without its place ("model llama has no experts
// to split over expert-parallel ranks (parallel.ep 2)"): now it names the --set that asked.
TEST(HostileParallel, ASplitTheModelCannotMakeNamesTheSetThatAskedForIt) {
  CliResult r = run_memsim("run dgx-h100 llama-7b --set parallel.dp=2 --set parallel.ep=2 --out " + temp_dir("ep"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--set parallel.ep=2: parallel.ep: model llama has no experts to split over expert-parallel ranks\n");
  r = run_memsim("run dgx-h100 mobilenet_v2 --set parallel.tp=2 --out " + temp_dir("tp"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--set parallel.tp=2: parallel.tp: model mobilenet_v2 does not split over tensor-parallel ranks; "
                   "the transformers (bert, gpt2, gpt, llama) do\n");
}

// Runtime policies on data-parallel replicas: one list of hook actions was shared by every
// stream's actor, and a hook that ran while another stream's copy waited for room rewrote the
// actions being applied — "asked at run time for a compute step" or "moves buffer ..., which
// is in no tier" (exit 3). Each hook call now applies its own actions.
TEST(HostileParallel, RuntimePoliciesOnReplicasApplyEachHooksOwnActions) {
  for (const char* args : {"run dgx-a100 bert-base --set workload.batch=4 --policy swap-lru --set policy.budget=0.5",
                           "run dgx-a100 gpt2-small --set workload.batch=2 --policy swap-budget --set policy.budget=0.3"}) {
    SCOPED_TRACE(args);
    const std::string out = temp_dir("hooks");
    const CliResult r = run_memsim(std::string(args) + " --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string summary = slurp(out + "/summary.json");
    EXPECT_NE(summary.find("\"status\": \"ok\""), std::string::npos) << summary.substr(0, 200);
    EXPECT_EQ(summary.find("\"swap_out_bytes\": 0,"), std::string::npos);  // it did swap
  }
}

// keep-all on a pipeline: its frees came after the last op, so they ran on the last stage's
// stream while the first stages still computed ("... reads ..., which was freed before its
// last use", exit 3). Each device's frees now follow the last op it issues.
TEST(HostileParallel, KeepAllOnAPipelineFreesEachStagesBuffersAfterItsOwnLastOp) {
  for (const char* args : {"run dgx-a100 bert-base --policy keep-all --set parallel.pp=2",
                           "run dgx-a100 bert-base --policy keep-all --set parallel.pp=4 --set parallel.dp=2 "
                           "--set parallel.symmetric=false"}) {
    SCOPED_TRACE(args);
    const CliResult r = run_memsim(std::string(args) + " --no-advice --out " + temp_dir("keepall"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("status      ok"), std::string::npos) << r.out;
  }
}
