// `memsim plan` end to end: on 16 GPUs, the branch and bound's best layouts are those of
// simulating every valid layout (--exhaustive, the same code with pruning off); each bound
// is below what the simulation reports; a layout the memory bound rejects runs out of memory
// when simulated; a rerun gives the same bytes; bad constraints are refused with exit 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_plan_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

using Row = std::map<std::string, std::string>;

// results.csv as rows of named cells (no cell of these runs holds a comma).
std::vector<Row> read_results(const std::string& path) {
  std::istringstream in(slurp(path));
  std::string line;
  std::vector<std::string> head;
  std::vector<Row> rows;
  auto split = [](const std::string& l) {
    std::vector<std::string> cells;
    std::stringstream s(l);
    for (std::string c; std::getline(s, c, ',');) cells.push_back(c);
    if (!l.empty() && l.back() == ',') cells.push_back("");
    return cells;
  };
  std::getline(in, line);
  head = split(line);
  while (std::getline(in, line)) {
    const auto cells = split(line);
    Row r;
    for (std::size_t i = 0; i < head.size() && i < cells.size(); ++i) r[head[i]] = cells[i];
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string layout_of(const Row& r) {
  return r.at("tp") + "/" + r.at("sp") + "/" + r.at("pp") + "/" + r.at("schedule") + "/" + r.at("dp") + "/" +
         r.at("micro_batch") + "/" + r.at("zero") + "/" + r.at("recompute");
}

// A small GPT on two DGX A100 nodes whose GPUs hold 1150 MiB (956 MiB of it reserved for CUDA and NCCL): the model state of the layouts
// with little sharding does not fit.
const std::string kPlan =
    "plan dgx-a100-superpod gpt-megatron --set nodes=2 --set 'gpu*.hbm.capacity=1150MiB' --set workload.layers=4 "
    "--set workload.hidden=256 --set workload.heads=8 --seq-len 256 --global-batch 32 --zero 0,1 "
    "--recompute none,full --max-micro-batch 2 --max-pp 2 --top 3";

}  // namespace

TEST(Plan, BranchAndBoundFindsTheBestOfEveryLayout) {
  const std::string dir = temp_dir("exhaustive");
  const CliResult all = run_memsim(kPlan + " -j 2 --exhaustive -o " + dir + "/all");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const CliResult plan = run_memsim(kPlan + " -j 2 -o " + dir + "/plan");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;

  const auto every = read_results(dir + "/all/results.csv");
  const auto searched = read_results(dir + "/plan/results.csv");
  ASSERT_EQ(every.size(), searched.size());
  ASSERT_GT(every.size(), 50u);
  EXPECT_NE(plan.out.find(std::to_string(every.size()) + " valid"), std::string::npos) << plan.out;

  // The best three of every layout, by simulated step time.
  std::vector<std::pair<double, std::string>> times;
  std::size_t memory_rejected = 0, pruned = 0;
  std::map<std::string, std::string> status_of;
  for (const Row& r : every) {
    status_of[layout_of(r)] = r.at("status");
    if (r.at("status") != "ok") continue;
    const double t = std::stod(r.at("iteration_time_s"));
    times.emplace_back(t, layout_of(r));
    // The time bound is below the simulated step of every layout that ran.
    EXPECT_LE(std::stod(r.at("time_bound_s")), t) << layout_of(r);
    // So is the step's longest path, which --exhaustive works out for every layout.
    ASSERT_FALSE(r.at("path_bound_s").empty()) << layout_of(r);
    EXPECT_LE(std::stod(r.at("path_bound_s")), t) << layout_of(r);
    EXPECT_GE(std::stod(r.at("path_bound_s")), std::stod(r.at("time_bound_s")) * (1 - 1e-6)) << layout_of(r);
    EXPECT_LE(std::stoull(r.at("memory_bound_bytes")), std::stoull(r.at("peak_bytes"))) << layout_of(r);
  }
  std::sort(times.begin(), times.end());
  ASSERT_GE(times.size(), 3u);
  std::vector<std::pair<double, std::string>> found;
  for (const Row& r : searched) {
    if (r.at("status") == "over_memory_bound") {
      ++memory_rejected;
      // What the bound rejects does not fit when simulated.
      EXPECT_EQ(status_of[layout_of(r)], "oom") << layout_of(r);
    }
    if (r.at("status") == "over_time_bound") ++pruned;
    if (r.at("status") == "ok") found.emplace_back(std::stod(r.at("iteration_time_s")), layout_of(r));
  }
  std::sort(found.begin(), found.end());
  ASSERT_GE(found.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(found[k].second, times[k].second) << k;
    EXPECT_EQ(found[k].first, times[k].first) << k;
  }
  EXPECT_GT(memory_rejected, 0u);  // the bounds did reject something
  EXPECT_GT(pruned, 0u);
  // The printed best is the exhaustive best.
  const std::string best_line = all.out.substr(all.out.find("\n  1 ") + 1, all.out.find('\n', all.out.find("\n  1 ") + 1) -
                                                                         all.out.find("\n  1 ") - 1);
  EXPECT_NE(plan.out.find(best_line), std::string::npos) << best_line << "\n" << plan.out;

  // A rerun finds every run done and writes the same bytes.
  const std::string csv = slurp(dir + "/plan/results.csv");
  const CliResult again = run_memsim(kPlan + " -j 1 -o " + dir + "/plan");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(slurp(dir + "/plan/results.csv"), csv);
  EXPECT_EQ(again.out, plan.out);
  std::istringstream lines(again.err);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("[")) EXPECT_NE(line.find("(done before)"), std::string::npos) << line;
}

TEST(Plan, HsdpAddsTheZeroThreeLayoutsShardedWithinANode) {
  // Two nodes of 8 GPUs: tp 1 (dp 16) and tp 2 with and without sp (dp 8) at zero 3, and with
  // --hsdp each of them sharded within its node's data-parallel ranks too (8 of them at tp 1,
  // 4 at tp 2): twice the layouts, each HSDP one holding more of the state than its twin.
  // gpt-megatron reduces its gradients once after the backward (ddp: local), which zero 3
  // cannot: the layouts here reduce them as PyTorch's FSDP does.
  const std::string dir = temp_dir("hsdp");
  const std::string plan =
      "plan dgx-a100-superpod gpt-megatron --set parallel.ddp=overlapped --set nodes=2 --set workload.layers=4 "
      "--set workload.hidden=256 "
      "--set workload.heads=8 --seq-len 256 --global-batch 32 --zero 3 --recompute none --max-tp 2 --max-pp 1 "
      "--max-micro-batch 1 --exhaustive -j 2";
  const CliResult plain = run_memsim(plan + " -o " + dir + "/plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const CliResult hybrid = run_memsim(plan + " --hsdp -o " + dir + "/hsdp");
  ASSERT_EQ(hybrid.exit_code, 0) << hybrid.err;
  const auto without = read_results(dir + "/plain/results.csv");
  const auto with = read_results(dir + "/hsdp/results.csv");
  EXPECT_EQ(without.size(), 3u);
  ASSERT_EQ(with.size(), 6u);
  std::map<std::string, std::uint64_t> full_peak;
  for (const Row& r : with)
    if (r.at("hsdp") == "0") full_peak[layout_of(r)] = std::stoull(r.at("peak_bytes"));
  int hybrids = 0;
  for (const Row& r : with) {
    ASSERT_EQ(r.at("status"), "ok") << layout_of(r) << " " << r.at("error");
    if (r.at("hsdp") == "0") continue;
    ++hybrids;
    EXPECT_EQ(r.at("hsdp"), r.at("tp") == "1" ? "8" : "4") << layout_of(r);
    ASSERT_EQ(full_peak.count(layout_of(r)), 1u) << layout_of(r);
    EXPECT_GT(std::stoull(r.at("peak_bytes")), full_peak[layout_of(r)]) << layout_of(r);
  }
  EXPECT_EQ(hybrids, 3);
  EXPECT_NE(hybrid.out.find("zero 3 hsdp 8"), std::string::npos) << hybrid.out;
  // The layout's own key: a --set of it is refused, as the other keys a layout sets.
  const CliResult fixed = run_memsim("plan dgx-a100 gpt-megatron --set parallel.hsdp=4");
  EXPECT_EQ(fixed.exit_code, 2);
  EXPECT_NE(fixed.err.find("memsim plan chooses parallel.hsdp for each layout"), std::string::npos) << fixed.err;
}

TEST(Plan, BadConstraintsAreRefusedWithWhereAndWhat) {
  const CliResult zero = run_memsim("plan dgx-a100 gpt-megatron --zero 0,5");
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_NE(zero.err.find("--zero: expected ZeRO stages from 0 to 3 separated by commas (like 0,1), got '5' in '0,5'"),
            std::string::npos)
      << zero.err;
  const CliResult recompute = run_memsim("plan dgx-a100 gpt-megatron --recompute some");
  EXPECT_EQ(recompute.exit_code, 1);
  EXPECT_NE(recompute.err.find("--recompute: expected none, selective or full"), std::string::npos) << recompute.err;
  // 7 GPUs at global batch 16: dp 7 does not divide the batch, and tp 7 not the 16 heads.
  const CliResult gpus = run_memsim("plan dgx-a100 gpt-megatron --gpus 7 --global-batch 16");
  EXPECT_EQ(gpus.exit_code, 1);
  EXPECT_NE(gpus.err.find("no valid layout of gpt on 7 GPUs of dgx-a100, global batch 16"), std::string::npos)
      << gpus.err;
  EXPECT_NE(gpus.err.find("parallel.tp: expected a divisor of the 16 attention heads"), std::string::npos) << gpus.err;
  // 6 GPUs at global batch 4 with tp at most 2 and one stage: dp 3 or 6 divides no batch of 4.
  const CliResult none = run_memsim("plan dgx-a100 gpt-megatron --gpus 6 --global-batch 4 --max-tp 2 --max-pp 1");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("--gpus 6 --global-batch 4: no layout of gpt"), std::string::npos) << none.err;
  const CliResult many = run_memsim("plan dgx-a100 gpt-megatron --gpus 16");
  EXPECT_EQ(many.exit_code, 1);
  EXPECT_NE(many.err.find("--gpus 16: platform dgx-a100 has 8 GPUs; --set nodes=2 makes 16 (8 a node)"),
            std::string::npos)
      << many.err;
  const CliResult fixed = run_memsim("plan dgx-a100 gpt-megatron --set parallel.tp=2");
  EXPECT_EQ(fixed.exit_code, 2);
  EXPECT_NE(fixed.err.find("memsim plan chooses parallel.tp for each layout"), std::string::npos) << fixed.err;
  const CliResult trace = run_memsim("plan dgx-a100 resnet50");
  EXPECT_EQ(trace.exit_code, 1);
  EXPECT_NE(trace.err.find("memsim plan lays out transformers"), std::string::npos) << trace.err;
}

// GPT (24 x 1024, materialized attention) at batch 10 runs out of a V100's 16 GiB; selective
// recomputation of the attention's seq x seq tensors fits, faster than every policy, and the
// advice says so with its run.
TEST(Plan, OomAdviceProposesRecomputationWhenItBeatsEveryPolicy) {
  const std::string dir = temp_dir("advice");
  const CliResult r =
      run_memsim("run v100-16gb gpt-megatron --set workload.recompute=none --set workload.batch=10 --quiet -o " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(slurp(dir + "/summary.json"));
  ASSERT_EQ(summary["status"], "oom");
  const auto& advice = summary["oom"]["advice"];
  double by_recompute = 0;
  std::string point;
  for (const auto& f : advice["would_fit"])
    if (f["change"] == "recompute") {
      EXPECT_EQ(f["recompute"], "selective");
      EXPECT_EQ(f["policy"], "none");
      by_recompute = f["iteration_time_s"];
      point = f["point"];
    }
  ASSERT_GT(by_recompute, 0) << advice.dump(2);
  std::size_t fitting = 0;
  for (const auto& t : advice["policies_tried"])
    if (t["status"] == "ok") {
      ++fitting;
      EXPECT_LT(by_recompute, t["iteration_time_s"].get<double>()) << t.dump();
    }
  EXPECT_GT(fitting, 0u);
  // Its run is what the advice quotes: attention_impl selective, no oom.
  const auto run = nlohmann::json::parse(slurp(point + "/summary.json"));
  EXPECT_EQ(run["status"], "ok");
  EXPECT_EQ(run["iteration_time_s"].get<double>(), by_recompute);
  EXPECT_NE(r.out.find("recompute: selective (policy none, batch 10): "), std::string::npos) << r.out;
}

// Llama 7B cut to 4 layers with plain data parallelism (dp 8, zero 0) runs out of a 16 GiB
// V100's memory on its model state; the advice searches the layouts of the same 8 GPUs and
// global batch as memsim plan does, and its fastest that fits is a run of its own that fits,
// with the --set overrides that make it.
TEST(Plan, OomAdviceSearchesTheLayoutsOfTheSameGpus) {
  const std::string dir = temp_dir("layout_advice");
  const CliResult r = run_memsim("run dgx-a100 llama-7b --set workload.layers=4 --set workload.seq_len=512 "
                                 "--set parallel.dp=8 --set gpu0.hbm.capacity=4GiB --quiet -o " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(slurp(dir + "/summary.json"));
  ASSERT_EQ(summary["status"], "oom");
  const nlohmann::json* layout = nullptr;
  for (const auto& f : summary["oom"]["advice"]["would_fit"])
    if (f["change"] == "layout") layout = &f;
  ASSERT_NE(layout, nullptr) << summary["oom"]["advice"].dump(2);
  EXPECT_EQ((*layout)["gpus"], 8);
  EXPECT_EQ((*layout)["global_batch"], 8);
  const auto run = nlohmann::json::parse(slurp((*layout)["point"].get<std::string>() + "/summary.json"));
  EXPECT_EQ(run["status"], "ok");
  EXPECT_EQ(run["iteration_time_s"], (*layout)["iteration_time_s"]);
  EXPECT_EQ(run["throughput"]["mfu"], (*layout)["mfu"]);
  EXPECT_EQ(run["throughput"]["gpus"], 8);
  EXPECT_EQ(run["throughput"]["samples_per_step"], 8);
  // The overrides given again make that run: same step time.
  std::string sets;
  for (const auto& s : (*layout)["sets"]) sets += " --set " + s.get<std::string>();
  const std::string again = temp_dir("layout_advice_again");
  const CliResult rerun = run_memsim("run dgx-a100 llama-7b --set workload.layers=4 --set workload.seq_len=512 "
                                     "--set gpu0.hbm.capacity=4GiB" + sets + " --quiet --no-advice -o " + again);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  const auto rerun_summary = nlohmann::json::parse(slurp(again + "/summary.json"));
  EXPECT_EQ(rerun_summary["status"], "ok");
  EXPECT_EQ(rerun_summary["iteration_time_s"], (*layout)["iteration_time_s"]);
  EXPECT_NE(r.out.find("(memsim plan over 8 GPUs, global batch 8)"), std::string::npos) << r.out;
}
