// A workload that recomputes itself (`recompute: full`, selective attention) pays for it in
// the iteration line's recompute term and in summary.json's recompute_time_s, as a policy's
// recomputation does (issue 30: the line said "recompute 0 s"). The term is the summed time
// of the forward ops run again, read back from timeline.csv; nothing is counted twice when a
// policy recomputes too.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_workload_recompute_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// Summed durations of timeline.csv's rows on gpu0 (stream 0), by what ran.
struct Sums {
  double compute_s = 0;    // kind compute, not a re-run
  double rerun_s = 0;      // kind compute, an op the workload runs again (NAME@recompute, NAME.recompute.*)
  double recompute_s = 0;  // kind recompute: the policy's re-runs
  int reruns = 0;
};

Sums sums(const std::string& dir) {
  std::istringstream lines(slurp(dir + "/timeline.csv"));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "kind,start_s,end_s,duration_s,device,stream,op,op_kind,phase,buffer,bytes,src_tier,dst_tier");
  Sums s;
  while (std::getline(lines, line)) {
    std::vector<std::string> f;
    std::istringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) f.push_back(c);
    EXPECT_EQ(line.find('"'), std::string::npos) << line;  // no quoted cells in these names
    if (f.size() < 7 || f[4] != "gpu0" || f[5] != "stream0") continue;
    const double d = std::stod(f[3]);
    const std::string& op = f[6];
    const bool rerun = op.ends_with("@recompute") || op.find(".recompute.") != std::string::npos;
    if (f[0] == "compute") {
      (rerun ? s.rerun_s : s.compute_s) += d;
      s.reruns += rerun;
    } else if (f[0] == "recompute") {
      s.recompute_s += d;
    }
  }
  return s;
}

const std::string kGpt = "a100-40gb workloads/gpt-megatron.yaml --set workload.layers=4 --no-advice";

TEST(WorkloadRecompute, FullRecomputationIsRecomputeTimeAndTheComparisonIsComputeAlone) {
  const std::string out = temp_dir("full");
  const CliResult r = run_memsim("run " + kGpt + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s = json::parse(slurp(out + "/summary.json"));
  ASSERT_EQ(s["status"], "ok");
  const Sums t = sums(out);
  // Each layer's forward ops run again in the backward: their time is recompute, not compute.
  EXPECT_GT(t.reruns, 0);
  EXPECT_EQ(t.recompute_s, 0);  // no policy
  const double recompute = s["recompute_time_s"].get<double>();
  EXPECT_GT(recompute, 0);
  EXPECT_NEAR(recompute, t.rerun_s, 1e-9 * recompute);
  EXPECT_NEAR(s["compute_time_s"].get<double>(), t.compute_s, 1e-9 * t.compute_s);
  EXPECT_GT(s["recompute_flops"].get<double>(), 0);
  // The line shows it and says what it compares with.
  EXPECT_EQ(r.out.find("recompute 0 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("slower than compute alone)"), std::string::npos) << r.out;

  // Compute alone is the step without the recomputation: the same model with `recompute: none`
  // computes as long, and its step takes that long.
  const std::string plain = temp_dir("none");
  const CliResult n = run_memsim("run " + kGpt + " --set workload.recompute=none --outputs summary --out " + plain);
  ASSERT_EQ(n.exit_code, 0) << n.err;
  const json ns = json::parse(slurp(plain + "/summary.json"));
  EXPECT_EQ(ns["recompute_time_s"].get<double>(), 0);
  EXPECT_NEAR(ns["compute_time_s"].get<double>(), s["compute_time_s"].get<double>(),
              1e-9 * ns["compute_time_s"].get<double>());
  fs::remove_all(out);
  fs::remove_all(plain);
}

TEST(WorkloadRecompute, APolicysRecomputationAddsToTheWorkloadsOnce) {
  // Selective attention and full recomputation in the model, and dtr dropping and remaking
  // buffers under a budget (some of them the workload's own remakes): the term is the
  // workload's re-runs plus the policy's, each run counted once.
  const std::string out = temp_dir("dtr");
  const CliResult r = run_memsim("run " + kGpt +
                                 " --set workload.batch=8 --set workload.vocab=8192 --set workload.attention_impl=selective"
                                 " --policy dtr --set policy.budget=0.9 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s = json::parse(slurp(out + "/summary.json"));
  ASSERT_EQ(s["status"], "ok");
  const Sums t = sums(out);
  EXPECT_GT(t.rerun_s, 0);
  EXPECT_GT(t.recompute_s, 0);
  const double recompute = s["recompute_time_s"].get<double>();
  EXPECT_NEAR(recompute, t.rerun_s + t.recompute_s, 1e-9 * recompute);
  EXPECT_NEAR(s["compute_time_s"].get<double>(), t.compute_s, 1e-9 * t.compute_s);
  const double sum = s["compute_time_s"].get<double>() + s["stall_time_s"].get<double>() + recompute +
                     s["exposed_host_time_s"].get<double>() + s["idle_time_s"].get<double>();
  EXPECT_NEAR(sum, s["iteration_time_s"].get<double>(), 1e-9 * sum);
  fs::remove_all(out);
}

TEST(WorkloadRecompute, APipelinesStagesShowTheirRecomputation) {
  // Two stages of a recomputing GPT: the stage that speaks for the line recomputes, and the
  // line still adds up with its communication.
  const std::string out = temp_dir("pp");
  const CliResult r = run_memsim(
      "run dgx-a100 workloads/gpt-megatron.yaml --set workload.layers=4 --set parallel.pp=2 "
      "--set parallel.global_batch=4 --no-advice --outputs summary --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s = json::parse(slurp(out + "/summary.json"));
  ASSERT_EQ(s["status"], "ok");
  const double recompute = s["recompute_time_s"].get<double>();
  EXPECT_GT(recompute, 0);
  const double sum = s["compute_time_s"].get<double>() + s["stall_time_s"].get<double>() + recompute +
                     s["exposed_comm_time_s"].get<double>() + s["exposed_host_time_s"].get<double>() +
                     s["idle_time_s"].get<double>();
  EXPECT_NEAR(sum, s["iteration_time_s"].get<double>(), 1e-9 * sum);
  EXPECT_EQ(r.out.find("recompute 0 s"), std::string::npos) << r.out;
  fs::remove_all(out);
}

}  // namespace
