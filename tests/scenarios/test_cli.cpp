// Golden runs of the memsim command line: what a new user types first.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

}  // namespace

TEST(Cli, DefaultRunPrintsASummaryAndWritesThreeFiles) {
  const std::string out = temp_dir("default");
  CliResult r = run_memsim("run --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("resnet50 (batch 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on a100-40gb, policy none"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status      ok"), std::string::npos) << r.out;
  for (const char* f : {"summary.json", "timeline.csv", "memory.csv"})
    EXPECT_TRUE(fs::exists(fs::path(out) / f)) << f;
  json s = json::parse(slurp(out + "/summary.json"));
  for (const char* key : {"status", "iteration_time_s", "compute_time_s", "stall_time_s",
                          "recompute_time_s", "swap_out_bytes", "swap_in_bytes", "recompute_flops",
                          "tiers"})
    EXPECT_TRUE(s.contains(key)) << key;
  const json& hbm = s["tiers"]["gpu0.hbm"];
  for (const char* key : {"capacity_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
                          "peak_time_s", "peak_by_category"})
    EXPECT_TRUE(hbm.contains(key)) << key;
  EXPECT_TRUE(s["tiers"].contains("host.dram"));
  EXPECT_EQ(s["status"], "ok");
  EXPECT_GT(hbm["peak_allocated_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_LE(hbm["peak_allocated_bytes"].get<std::uint64_t>(), hbm["capacity_bytes"].get<std::uint64_t>());
  // The weights are resident from the start and stay: they are part of the peak.
  EXPECT_EQ(hbm["peak_by_category"]["weight"].get<std::uint64_t>(), 25'557'032u * 4);
}

TEST(Cli, OutputsWritesOnlyTheFilesNamed) {
  const std::string out = temp_dir("outputs");
  CliResult r = run_memsim("run a100-40gb mlp --outputs summary,memory --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out + "/summary.json"));
  EXPECT_TRUE(fs::exists(out + "/memory.csv"));
  for (const char* f : {"timeline.csv", "peak.csv", "trace.pftrace", "trace.json", "events.csv"})
    EXPECT_FALSE(fs::exists(fs::path(out) / f)) << f;
  EXPECT_NE(r.out.find("/ summary.json memory.csv\n"), std::string::npos) << r.out;  // what it wrote
  // A name it does not know is a usage error naming the ones it does.
  r = run_memsim("run a100-40gb mlp --outputs summary,plots --out " + temp_dir("outputs_bad"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "memsim: --outputs 'summary,plots': expected names separated by commas from summary, timeline, "
            "memory, peak, tiles, trace, events, all, got 'plots'\n");
}

TEST(Cli, SameCommandGivesByteIdenticalFiles) {
  const std::string a = temp_dir("det_a"), b = temp_dir("det_b");
  ASSERT_EQ(run_memsim("run a100-40gb resnet18 --set workload.batch=16 --out " + a).exit_code, 0);
  ASSERT_EQ(run_memsim("run a100-40gb resnet18 --set workload.batch=16 --out " + b).exit_code, 0);
  for (const char* f : {"summary.json", "timeline.csv", "memory.csv"}) {
    const std::string x = slurp(a + "/" + f), y = slurp(b + "/" + f);
    EXPECT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == y) << f << " differs between two identical runs";
  }
}

TEST(Cli, InfoReportsTorchvisionParameterCounts) {
  const std::pair<const char*, std::uint64_t> expected[] = {
      {"workloads/resnet18.yaml", 11'689'512},  {"workloads/resnet34.yaml", 21'797'672},
      {"workloads/resnet50.yaml", 25'557'032},  {"workloads/resnet101.yaml", 44'549'160},
      {"workloads/resnet152.yaml", 60'192'808}};
  for (const auto& [file, params] : expected) {
    CliResult r = run_memsim(std::string("info ") + file + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["parameters"].get<std::uint64_t>(), params) << file;
    EXPECT_GT(j["ops"].get<std::uint64_t>(), 0u);
  }
}

TEST(Cli, JsonFlagPrintsTheSummary) {
  CliResult r = run_memsim("run a100-40gb mlp --json --out " + temp_dir("json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json s = json::parse(r.out);
  EXPECT_EQ(s["status"], "ok");
  EXPECT_EQ(s["policy"], "none");
}

TEST(Cli, OomIsASuccessOfTheSimulator) {
  CliResult r = run_memsim("run a100-40gb resnet50 --set gpu0.hbm.capacity=2GiB --json --out " +
                           temp_dir("oom"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json s = json::parse(r.out);
  EXPECT_EQ(s["status"], "oom");
  EXPECT_EQ(s["tiers"]["gpu0.hbm"]["capacity_bytes"].get<std::uint64_t>(), 2ull << 30);
  ASSERT_TRUE(s.contains("oom"));
  EXPECT_EQ(s["oom"]["tier"], "gpu0.hbm");
  EXPECT_GT(s["oom"]["requested_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_FALSE(s["oom"]["largest_live_buffers"].empty());
}

TEST(Cli, KeepAllNeedsMoreThanNone) {
  json none = json::parse(run_memsim("run a100-40gb resnet18 --json --out " + temp_dir("n")).out);
  json keep = json::parse(
      run_memsim("run a100-40gb resnet18 --policy keep-all --json --out " + temp_dir("k")).out);
  EXPECT_GT(keep["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].get<std::uint64_t>(),
            none["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].get<std::uint64_t>());
  EXPECT_EQ(keep["iteration_time_s"], none["iteration_time_s"]);  // no swapping, same ops
}

TEST(Cli, TraceRoundTripRunsTheSame) {
  const std::string dir = temp_dir("trace");
  fs::create_directories(dir);
  ASSERT_EQ(run_memsim("trace resnet18 --set workload.batch=8 -o " + dir + "/r18.json").exit_code, 0);
  json direct = json::parse(
      run_memsim("run a100-40gb resnet18 --set workload.batch=8 --json --out " + dir + "/a").out);
  json traced = json::parse(run_memsim("run a100-40gb " + dir + "/r18.json --json --out " + dir + "/b").out);
  EXPECT_EQ(direct["iteration_time_s"], traced["iteration_time_s"]);
  EXPECT_EQ(direct["tiers"], traced["tiers"]);
  CliResult info = run_memsim("info " + dir + "/r18.json --json");
  EXPECT_EQ(json::parse(info.out)["parameters"].get<std::uint64_t>(), 11'689'512u);
}

TEST(Cli, BadOverrideIsBadInput) {
  CliResult r = run_memsim("run a100-40gb resnet50 --set workload.batch=abc --out " + temp_dir("bad"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find(':', 5)), "--set workload.batch=abc");
  EXPECT_NE(r.err.find("expected an integer"), std::string::npos) << r.err;
  CliResult p = run_memsim("run a100-40gb resnet50 --set policy.budget=0.5 --out " + temp_dir("bad2"));
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_NE(p.err.find("policy none takes no parameters"), std::string::npos) << p.err;
  CliResult d = run_memsim("run a100-40gb resnet50 --set gpu9.hbm.capacity=1GiB --out " + temp_dir("bad3"));
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_NE(d.err.find("gpu9.hbm.capacity"), std::string::npos) << d.err;
  CliResult m = run_memsim("run no-such-device resnet50");
  EXPECT_EQ(m.exit_code, 1);
  EXPECT_NE(m.err.find("no such file, and no built-in preset"), std::string::npos) << m.err;
}

TEST(Cli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(run_memsim("").exit_code, 2);
  EXPECT_EQ(run_memsim("frobnicate").exit_code, 2);
  EXPECT_EQ(run_memsim("run --no-such-flag").exit_code, 2);
  EXPECT_EQ(run_memsim("run --set nonsense").exit_code, 2);
}

TEST(Cli, HelpOnEveryCommandAndVersion) {
  for (const char* cmd : {"--help", "run --help", "info --help", "validate --help",
                          "trace --help", "list --help"}) {
    CliResult r = run_memsim(cmd);
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd;
  }
  CliResult v = run_memsim("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.substr(0, 7), "memsim ");
}

TEST(Cli, ListShowsPoliciesModelsAndPresets) {
  CliResult r = run_memsim("list");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* s : {"none", "keep-all", "ideal", "resnet", "mlp", "chain", "a100-40gb",
                        "v100-16gb", "h100-80gb"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

TEST(Cli, EveryPresetValidates) {
  CliResult r = run_memsim(
      "validate configs/devices/*.yaml workloads/*.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(Cli, EveryDevicePresetLoadsAndRunsAWorkload) {
  CliResult list = run_memsim("list");
  const std::string marker = "built-in devices:";
  const auto at = list.out.find(marker);
  ASSERT_NE(at, std::string::npos);
  std::istringstream names(list.out.substr(at + marker.size(), list.out.find('\n', at) - at - marker.size()));
  std::string name;
  int count = 0;
  while (names >> name) {
    CliResult r = run_memsim("run " + name + " mlp --json --out " + temp_dir("preset_" + name));
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    json s = json::parse(r.out);
    EXPECT_EQ(s["status"], "ok") << name;
    EXPECT_GT(s["iteration_time_s"].get<double>(), 0) << name;
    ++count;
  }
  EXPECT_GE(count, 13);
}

TEST(Cli, TiledDeviceWritesTilesCsv) {
  const std::string out = temp_dir("ipu");
  CliResult r = run_memsim("run ipu-gc200 mlp --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string tiles = slurp(out + "/tiles.csv");
  EXPECT_EQ(tiles.substr(0, tiles.find('\n')), "tier,tile,peak_bytes");
  EXPECT_EQ(std::count(tiles.begin(), tiles.end(), '\n'), 1 + 1472);
  json s = json::parse(slurp(out + "/summary.json"));
  EXPECT_EQ(s["tiers"]["ipu0.sram"]["tiles"]["count"], 1472);
  EXPECT_GT(s["tiers"]["ipu0.sram"]["tiles"]["fullest_tile_peak_bytes"].get<std::uint64_t>(), 0u);
}

TEST(Cli, OneWorkloadRunsOnEveryDeviceOfAPlatform) {
  CliResult r = run_memsim("run dgx-a100 mlp --json --out " + temp_dir("dgx"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json s = json::parse(r.out);
  for (int i = 0; i < 8; ++i) {
    const std::string tier = "gpu" + std::to_string(i) + ".hbm";
    EXPECT_EQ(s["tiers"][tier]["peak_allocated_bytes"], s["tiers"]["gpu0.hbm"]["peak_allocated_bytes"]) << tier;
  }
  CliResult wrong = run_memsim("run dgx-a100 mlp resnet18 --out " + temp_dir("dgx2"));
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("8 compute devices"), std::string::npos) << wrong.err;
}

TEST(Cli, ABudgetFractionIsOfEachDevicesOwnWorkload) {
  // Two GPUs, two workloads: policy.budget=0.5 caps each GPU at half the baseline peak of
  // the workload it runs (it was once half of the first workload's on both).
  auto peak_alone = [](const std::string& workload) {
    CliResult r = run_memsim("run a100-40gb " + workload + " --json --out " + temp_dir("alone_" + workload));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out)["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].get<std::uint64_t>();
  };
  const std::uint64_t mlp = peak_alone("mlp"), resnet = peak_alone("resnet18");
  ASSERT_NE(mlp, resnet);
  CliResult r = run_memsim("run dgx-a100 mlp resnet18 --devices gpu3,gpu6 --policy swap-lru "
                           "--set policy.budget=0.5 --json --out " + temp_dir("budgets"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json s = json::parse(r.out);
  EXPECT_EQ(s["tiers"]["gpu3.hbm"]["budget_bytes"].get<std::uint64_t>(), mlp / 2);
  EXPECT_EQ(s["tiers"]["gpu6.hbm"]["budget_bytes"].get<std::uint64_t>(), resnet / 2);
  EXPECT_TRUE(s["tiers"]["gpu0.hbm"]["budget_bytes"].is_null());  // idle: no budget
  // The hardware's capacity stays beside the budget.
  for (const char* gpu : {"gpu0.hbm", "gpu3.hbm", "gpu6.hbm"})
    EXPECT_EQ(s["tiers"][gpu]["capacity_bytes"].get<std::uint64_t>(), 40ull << 30) << gpu;
}

TEST(Cli, ANameLongerThanAFileNameCanBeIsAnUnknownName) {
  // Over 255 bytes, std::filesystem::exists throws "File name too long": each argument is
  // asked without exceptions, and is then simply no file and no preset.
  const std::string long_name(300, 'x');
  CliResult w = run_memsim("run a100-40gb " + long_name);
  EXPECT_EQ(w.exit_code, 1) << w.err;
  EXPECT_NE(w.err.find(long_name + ": no such file, and no built-in preset of that name"), std::string::npos) << w.err;
  CliResult d = run_memsim("run " + long_name + " resnet50");
  EXPECT_EQ(d.exit_code, 1) << d.err;
  EXPECT_NE(d.err.find(long_name + ": no such file, and no built-in preset of that name"), std::string::npos) << d.err;
  CliResult p = run_memsim("run a100-40gb mlp --policy " + long_name);
  EXPECT_EQ(p.exit_code, 1) << p.err;
  EXPECT_NE(p.err.find("--policy " + long_name + ": no such policy"), std::string::npos) << p.err;
}

TEST(Cli, ABudgetIsShownBesideTheCapacity) {
  // The budget caps the tier the run may use; the hardware's capacity is still what the
  // device has, on the terminal and in summary.json.
  const std::string dir = temp_dir("budget_beside");
  CliResult r = run_memsim("run h200-141gb resnet50 --policy swap-budget --set policy.budget=0.5 --out " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" of 141 GiB (budget "), std::string::npos) << r.out;
  const json s = json::parse(slurp(dir + "/summary.json"));
  const auto& hbm = s["tiers"]["gpu0.hbm"];
  EXPECT_EQ(hbm["capacity_bytes"].get<std::uint64_t>(), 141ull << 30);
  EXPECT_LT(hbm["budget_bytes"].get<std::uint64_t>(), hbm["capacity_bytes"].get<std::uint64_t>());
  EXPECT_LE(hbm["peak_allocated_bytes"].get<std::uint64_t>(), hbm["budget_bytes"].get<std::uint64_t>());
  EXPECT_TRUE(s["tiers"]["host.dram"]["budget_bytes"].is_null());
}

TEST(Cli, CalibrateFitsSeveralTracesTogether) {
  const std::string dir = temp_dir("calib");
  fs::create_directories(dir);
  const std::string out = dir + "/cpu-fit.yaml";
  CliResult r = run_memsim("calibrate cpu workloads/traces/resnet18-b8.et.json workloads/traces/mlp-b64.et.json "
                           "--residuals absolute -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("resnet18-b8+mlp-b64 on cpu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("matmul"), std::string::npos) << r.out;  // a kind only the MLP has
  CliResult run = run_memsim("run " + out + " workloads/traces/mobilenet_v2-b8.et.json --out " + temp_dir("calib_run"));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  CliResult bad = run_memsim("calibrate cpu workloads/traces/mlp-b64.et.json --residuals squared");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--residuals"), std::string::npos) << bad.err;
}

// A parallel layout the model or the platform cannot take is blamed on the key that asked
// for it: --set parallel.pp (not the first --set under parallel:), and for a rank count the
// platform cannot hold, each key whose product it is, at its line or its --set.
TEST(Cli, AParallelErrorNamesTheKeyThatCausedIt) {
  CliResult r = run_memsim("run dgx-a100 gpt2-small --set parallel.dp=2 --set parallel.pp=5 --no-advice --out " +
                           temp_dir("pp_key"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--set parallel.pp=5: parallel.pp: gpt2: its 12 layers do not split evenly into 5 "
                   "pipeline stage(s)\n");
  r = run_memsim("run dgx-a100 mlp --set parallel.dp=16 --no-advice --out " + temp_dir("dp_key"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--set parallel.dp=16: parallel.dp: mlp: the step runs on 16 ranks (dp 16, zero 0), but "
                   "platform dgx-a100 has 8 compute device(s); --set nodes=2 makes 16 (8 a node)\n");
  const std::string dir = temp_dir("ranks_file");
  fs::create_directories(dir);
  const std::string spec = dir + "/gpt.yaml";
  std::ofstream(spec) << "model: gpt2\nvariant: small\nseq_len: 128\nbatch: 2\nparallel:\n  tp: 4\n  dp: 4\n";
  const std::string at = spec + ":6:7: parallel.tp, " + spec + ":7:7: parallel.dp: ";
  r = run_memsim("run dgx-a100 " + spec + " --no-advice --out " + dir + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, at.size()), at) << r.err;
  EXPECT_NE(r.err.find("the step runs on 16 ranks"), std::string::npos) << r.err;
  r = run_memsim("info dgx-a100 " + spec + " --placement");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, at.size()), at) << r.err;
}

// memsim fit's errors are errors: on standard error, with exit code 1.
TEST(Cli, FitErrorsGoToStandardError) {
  CliResult r = run_memsim("fit a100-40gb no-such-model --out " + temp_dir("fit_error"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("memsim fit: policy none: at batch 1: no-such-model: no such file, and no built-in preset"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("no such file"), std::string::npos) << r.out;
}
