// Hostile combinations of parallel keys and policies (issue 26): each ends in a located
// error or a result that passes the summary check (sim/run/sanity.h), never an absurd
// figure with exit 0 or an internal error.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_combos_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

}  // namespace

// With a pipeline, the rank that communicates longest is not the stream that speaks for the
// iteration: its exposed communication added to that stream's compute made the iteration
// line longer than the iteration (gpt2-small over 4 stages: 111 ms = compute 91.6 ms +
// exposed comm 57.4 ms). And communication while the stream stalled counted twice (capuchin
// under a budget on 4 ranks: parts 41 us longer than the iteration).
TEST(HostileCombinations, TheIterationLineAddsUpWithPipelinesAndStalls) {
  const std::string out = temp_dir("pipeline");
  for (const char* parallel : {"--set parallel.pp=4 --set parallel.micro_batches=8",
                               "--set parallel.pp=2 --set parallel.dp=4 --set parallel.zero=3 --set parallel.symmetric=false",
                               "--set parallel.tp=4 --set parallel.sp=true --set parallel.pp=2",
                               "--set parallel.dp=4 --set parallel.micro_batches=2 --policy capuchin --set policy.budget=0.6"}) {
    SCOPED_TRACE(parallel);
    CliResult r = run_memsim(std::string("run dgx-h100 gpt2-small ") + parallel +
                             " --outputs summary --no-advice --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json s = json::parse(slurp(out + "/summary.json"));
    const double parts = s["compute_time_s"].get<double>() + s["exposed_host_time_s"].get<double>() +
                         s["stall_time_s"].get<double>() + s["recompute_time_s"].get<double>() +
                         s["exposed_comm_time_s"].get<double>() + s["idle_time_s"].get<double>();
    EXPECT_NEAR(parts, s["iteration_time_s"].get<double>(), 1e-6 * s["iteration_time_s"].get<double>());
    EXPECT_LE(s["exposed_comm_time_s"].get<double>(), s["comm_time_s"].get<double>());
  }
}

// zero-offload moved ZeRO-1/2's all-gather of the updated weights to the host beside the
// steps, and the old weights died before the next reader: an internal error ("reads buffer
// ... which was freed before its last use") or, with every rank simulated, a deadlock.
TEST(HostileCombinations, ZeroOffloadWithShardedOptimizerStateIsALocatedError) {
  const std::string out = temp_dir("offload");
  for (const char* zero : {"1", "2"}) {
    CliResult r = run_memsim(std::string("run dgx-h100 mlp --set parallel.dp=2 --set parallel.zero=") + zero +
                             " --policy zero-offload --no-advice --out " + out);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err, "mlp: zero-offload with the weights all-gathered after the optimizer step ('gpu0:bucket0.all_gather', "
                     "parallel.zero 1 or 2) is not modelled; use parallel.zero 0 or 3\n");
  }
  CliResult r = run_memsim("run dgx-h100 mlp --set parallel.dp=2 --set parallel.zero=3 --policy zero-offload "
                           "--no-advice --outputs summary --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}
