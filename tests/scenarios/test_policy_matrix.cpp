// Every registered policy on every shipped trace (workloads/traces) and on the published
// training traces (../shared/validation/external, where present): each run ends, ok or oom,
// within its bound. A policy that needs a shape the trace lacks (revolve and bptt-optimal: a
// chain) may refuse it, saying so. Checkmate runs small here (graphs of at most 80 nodes, each
// solve stopped after 200 branch-and-bound nodes or 2,000 simplex iterations, without a time
// limit: limits of work, so the verdict is the same on a loaded machine).
// And the two shapes of imported trace that made zero-offload's copies chase each other.
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "sim/policy/policy.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Per run, against hangs only: the slowest here takes under 3 s on an idle machine, and no
// verdict depends on the time a run takes (checkmate's solves are bounded by work).
constexpr int kBoundSeconds = 600;

// run_memsim under coreutils' timeout: a run past the bound is killed (exit 124), not waited
// for, and its err then says which run and why.
CliResult run_bounded(const std::string& args) {
  static int counter = 0;
  const std::string err_file = std::string(::testing::TempDir()) + "memsim_matrix_stderr_" +
                               std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::string cmd = fmt::format("cd '{}' && timeout {} '{}' {} 2>'{}'", MEMSIM_SOURCE_DIR, kBoundSeconds,
                                      MEMSIM_BINARY, args, err_file);
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(err_file);
  std::remove(err_file.c_str());
  if (r.exit_code == 124)
    r.err += fmt::format("memsim {}: still running after {} s, killed by the test's bound on a run (a hang, or "
                         "work that grows without bound)\n",
                         args, kBoundSeconds);
  return r;
}

std::vector<std::string> traces() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(MEMSIM_SOURCE_DIR) / "workloads/traces"))
    if (e.path().string().ends_with(".et.json")) out.push_back(fs::relative(e.path(), MEMSIM_SOURCE_DIR).string());
  const fs::path external = fs::path(MEMSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "external";
  if (fs::is_directory(external))
    for (const char* t : {"facebookresearch-param@1e115ff/et_replay/tests/inputs/linear_et.json.gz",
                          "facebookresearch-param@9b1946f/et_replay/tests/inputs/resnet_et.json.gz",
                          "facebookresearch-param@1e115ff/et_replay/tests/inputs/dlrm_pytorch_et.tar.gz",
                          "facebookresearch-param@1e115ff/et_replay/tests/inputs/hf_GPT2_et.json.tar.gz",
                          "facebookresearch-param@1e115ff/et_replay/tests/inputs/1.0.3-chakra.0.0.4/resnet_1gpu_et.json.gz",
                          "facebookresearch-param@1e115ff/et_replay/tests/inputs/1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz",
                          "facebookresearch-param@1e115ff/et_replay/tests/inputs/resnet_et.json.gz",
                          "facebookresearch-param@1e115ff/et_replay/tests/inputs/resnet_1gpu_et.json.tar.gz",
                          "astra-sim-tutorials@ead2d5d/hoti2024/demo3/pytorch_traces/pytorch_et_0.json",
                          "mlcommons-chakra@21585d8/tests/data/feeder_tests_trace.tar.gz"})
      out.push_back((external / t).string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string settings(const std::string& policy) {
  if (policy == "swap-budget") return " --set policy.budget=0.5";
  if (policy == "checkmate")
    return " --set policy.seconds=none --set policy.nodes=200 --set policy.iterations=2000 --set policy.max_nodes=80";
  return "";
}

class PolicyMatrix : public ::testing::TestWithParam<std::string> {};

TEST_P(PolicyMatrix, EveryPolicyEndsOkOrOomWithinItsBound) {
  const std::string trace = GetParam();
  const std::string out = std::string(::testing::TempDir()) + "memsim_matrix_" + std::to_string(::getpid());
  for (const auto& p : memsim::builtin_policies()) {
    SCOPED_TRACE(p.name);
    CliResult r = run_bounded(fmt::format("run a100-40gb-nvme '{}' --policy {}{} --out '{}' --json", trace, p.name,
                                         settings(p.name), out));
    ASSERT_NE(r.exit_code, 124) << r.err;
    if (r.exit_code == 1 && (p.name == "revolve" || p.name == "bptt-optimal")) {
      EXPECT_NE(r.err.find("needs a chain-shaped trace"), std::string::npos) << r.err;
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string status = json::parse(r.out)["status"];
    EXPECT_TRUE(status == "ok" || status == "oom") << status;
  }
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(Traces, PolicyMatrix, ::testing::ValuesIn(traces()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = fs::path(info.param).filename().string();
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name + "_" + std::to_string(info.index);
                         });

// Before the fix, zero-offload moved these optimizer ops to the host, where they ran beside
// the accelerator ops that needed the same weights: the copies went back and forth forever.
TEST(ZeroOffload, OptimizerOpsAnAcceleratorStillNeedsStayThere) {
  const std::string out = std::string(::testing::TempDir()) + "memsim_zero_" + std::to_string(::getpid());
  // Optimizer ops issued before the backward ops that read the same weights (the order an
  // importer that walked one thread after the other produced): nothing goes to the host.
  CliResult r = run_bounded("run a100-40gb tests/scenarios/data/step_before_backward.json --policy zero-offload --out '" +
                           out + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json s = json::parse(r.out);
  EXPECT_EQ(s["status"], "ok");
  EXPECT_EQ(s["host_compute_time_s"], 0.0);
  // An optimizer op that waits for nothing (Adam's empty_like(param) for its state) stays; the
  // step, which waits for the gradient, goes.
  r = run_bounded("run a100-40gb tests/scenarios/data/state_init_before_step.json --policy zero-offload --out '" + out +
                 "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  s = json::parse(r.out);
  EXPECT_EQ(s["status"], "ok");
  EXPECT_GT(s["host_compute_time_s"].get<double>(), 0.0);
  fs::remove_all(out);
}

}  // namespace

// The iteration line adds up for every policy: compute + host + stall + recompute + idle of
// the stream that speaks for the step is its iteration time, on a run whose capped tier
// makes policies swap and recompute, and on one whose optimizer step can go to the host;
// and with exposed communication, on data-parallel ranks.
TEST(IterationLine, AddsUpForEveryPolicy) {
  const std::string out = std::string(::testing::TempDir()) + "memsim_sums_" + std::to_string(::getpid());
  int with_host = 0;
  for (const auto& p : memsim::builtin_policies())
    for (const char* inputs : {"a100-40gb-nvme resnet18 --set workload.batch=64 --set gpu0.hbm.capacity=1GiB",
                               "a100-40gb-nvme gpt2-small --set workload.batch=2"}) {
      SCOPED_TRACE(p.name + " on " + inputs);
      CliResult r = run_bounded(fmt::format("run {} --policy {}{} --no-advice --out '{}'", inputs, p.name,
                                           settings(p.name), out));
      if (r.exit_code == 1 && (p.name == "revolve" || p.name == "bptt-optimal")) continue;  // not a chain
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const json s = json::parse(slurp(out + "/summary.json"));
      const double total = s["compute_time_s"].get<double>() + s["exposed_host_time_s"].get<double>() +
                           s["stall_time_s"].get<double>() + s["recompute_time_s"].get<double>() +
                           s["idle_time_s"].get<double>();
      // An OOM has no step time: its line adds up to where it stopped.
      const double step = (s["status"] == "oom" ? s["stopped_at_s"] : s["iteration_time_s"]).get<double>();
      EXPECT_NEAR(total, step, 1e-9 * step);
      // The terminal shows the terms there are.
      const bool host = s["exposed_host_time_s"].get<double>() > 0;
      with_host += host;
      EXPECT_EQ(r.out.find(" + host ") != std::string::npos, host) << r.out;
      EXPECT_EQ(r.out.find(" + idle ") != std::string::npos, s["idle_time_s"].get<double>() > 0) << r.out;
    }
  EXPECT_GE(with_host, 1);  // zero-offload's step on the host CPU
  // Data-parallel ranks: exposed communication is a term too.
  CliResult r = run_bounded(fmt::format("run dgx-a100 resnet18 --set parallel.dp=8 --set workload.batch=32 --out '{}'", out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s = json::parse(slurp(out + "/summary.json"));
  EXPECT_GT(s["exposed_comm_time_s"].get<double>(), 0.0);
  EXPECT_NE(r.out.find(" + exposed comm "), std::string::npos) << r.out;
  EXPECT_NEAR(s["compute_time_s"].get<double>() + s["exposed_host_time_s"].get<double>() +
                  s["stall_time_s"].get<double>() + s["recompute_time_s"].get<double>() +
                  s["exposed_comm_time_s"].get<double>() + s["idle_time_s"].get<double>(),
              s["iteration_time_s"].get<double>(), 1e-9 * s["iteration_time_s"].get<double>());
  fs::remove_all(out);
}
