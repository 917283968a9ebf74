// What a new user tripped over (issue 30): a value set on every GPU at once, presets for the
// machines people have, errors that say what to do next, and outputs that cannot mislead.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_first_use_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// The capacity `memsim info` prints for each tier whose name starts with `prefix`.
std::vector<std::string> capacities(const std::string& info, const std::string& prefix) {
  std::vector<std::string> out;
  const std::regex tier("tier +(" + prefix + "[^ ]*) +[a-z]+ +([0-9.]+ [KMGT]?i?B)");
  for (auto it = std::sregex_iterator(info.begin(), info.end(), tier); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str() + " " + (*it)[2].str());
  return out;
}

TEST(FirstUse, AGlobOverDeviceNamesSetsTheKeyOnEveryDeviceItMatches) {
  const CliResult r = run_memsim("info dgx-h100 --set 'gpu*.hbm.capacity=12GiB'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto hbm = capacities(r.out, "gpu");
  ASSERT_EQ(hbm.size(), 8u) << r.out;
  for (std::size_t i = 0; i < hbm.size(); ++i) EXPECT_EQ(hbm[i], "gpu" + std::to_string(i) + ".hbm 12 GiB");
  // The host is no GPU: its DRAM keeps its size.
  EXPECT_EQ(capacities(r.out, "host.dram"), std::vector<std::string>{"host.dram 2 TiB"});
  // A glob anywhere in the device's name; a '*' after the first part is a name, not a glob.
  const CliResult seven = run_memsim("info dgx-h100 --set '*7.hbm.capacity=3GiB'");
  ASSERT_EQ(seven.exit_code, 0) << seven.err;
  const auto h = capacities(seven.out, "gpu");
  ASSERT_EQ(h.size(), 8u);
  EXPECT_EQ(h[6], "gpu6.hbm 80 GiB");
  EXPECT_EQ(h[7], "gpu7.hbm 3 GiB");
}

TEST(FirstUse, AGlobMatchingNoDeviceIsALocatedError) {
  const CliResult r = run_memsim("info dgx-h100 --set 'tpu*.hbm.capacity=12GiB'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--set tpu*.hbm.capacity=12GiB: 'tpu*' matches no device of platform "
                   "configs/devices/dgx-h100.yaml (built in) (devices: gpu0, gpu1, gpu2, gpu3, gpu4, gpu5, "
                   "gpu6, gpu7, host)\n");
  // A glob that matches devices lacking the tier says which.
  const CliResult tier = run_memsim("info dgx-h100 --set '*.hbm.capacity=12GiB'");
  EXPECT_EQ(tier.exit_code, 1);
  EXPECT_EQ(tier.err, "--set *.hbm.capacity=12GiB: no tier 'hbm' on host (tiers: dram, nvme)\n");
}

TEST(FirstUse, TheA100_80GBNodePresetIsTheSuperPODsNode) {
  // One node of 8 A100 80GB GPUs without 8 --set flags, and the same node the SuperPOD
  // replicates: the two files must not drift apart.
  const std::string root = std::string(MEMSIM_SOURCE_DIR) + "/configs/devices/";
  const YAML::Node node = YAML::LoadFile(root + "dgx-a100-80gb.yaml");
  const YAML::Node pod = YAML::LoadFile(root + "dgx-a100-superpod.yaml");
  for (const char* key : {"devices", "switches", "links", "collectives"})
    EXPECT_EQ(YAML::Dump(node[key]), YAML::Dump(pod[key])) << key;
  EXPECT_FALSE(node["nodes"]);
  EXPECT_FALSE(node["fabric"]);
  const CliResult r = run_memsim("info dgx-a100-80gb");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto hbm = capacities(r.out, "gpu");
  ASSERT_EQ(hbm.size(), 8u);
  EXPECT_EQ(hbm[7], "gpu7.hbm 80 GiB");
}

TEST(FirstUse, TheA100PresetsShareOneTimeModel) {
  // dgx-a100's time model (docs/time-model.md, round 3: the measured GEMM rate, the host's
  // times fitted on the shared steps) is the 80 GB node's too, and so the SuperPOD's (above):
  // a recalibration of one that forgets the other fails here.
  const std::string root = std::string(MEMSIM_SOURCE_DIR) + "/configs/devices/";
  const YAML::Node a40 = YAML::LoadFile(root + "dgx-a100.yaml");
  const YAML::Node a80 = YAML::LoadFile(root + "dgx-a100-80gb.yaml");
  for (const auto& device : a40["devices"]) {
    const std::string name = device.first.as<std::string>();
    if (device.second["kind"].as<std::string>() != "gpu") continue;
    for (const char* key :
         {"compute", "launch_overhead", "copy_engines", "efficiency", "memory_efficiency", "gemm", "host_overhead"})
      EXPECT_EQ(YAML::Dump(device.second[key]), YAML::Dump(a80["devices"][name][key])) << name << "." << key;
  }
  EXPECT_EQ(YAML::Dump(a40["collectives"]), YAML::Dump(a80["collectives"]));
  EXPECT_EQ(a40["devices"]["gpu0"]["efficiency"]["default"].as<double>(), 0.859);  // mamf-finder's A100 SXM
}

TEST(FirstUse, TheH100PresetsCarryTheA100TimeModelWithTheirOwnGemmRate) {
  // docs/time-model.md, "The H100 presets": every GPU of dgx-h100, dgx-h100-superpod and
  // h100-80gb has dgx-a100's memory-bound efficiency, launch and host times, the H100's
  // measured GEMM rate over its 132 SMs; the DGX presets have dgx-a100's NCCL protocols with
  // their own SM share. A refit of dgx-a100 that forgets them fails here.
  const std::string root = std::string(MEMSIM_SOURCE_DIR) + "/configs/devices/";
  const YAML::Node a100 = YAML::LoadFile(root + "dgx-a100.yaml");
  const YAML::Node& a100_gpu = a100["devices"]["gpu0"];
  for (const char* preset : {"dgx-h100", "dgx-h100-superpod", "h100-80gb"}) {
    const YAML::Node h = YAML::LoadFile(root + preset + ".yaml");
    int gpus = 0;
    for (const auto& device : h["devices"]) {
      if (device.second["kind"].as<std::string>() != "gpu") continue;
      ++gpus;
      const std::string at = std::string(preset) + "." + device.first.as<std::string>();
      for (const char* key : {"launch_overhead", "memory_efficiency", "host_overhead"})
        EXPECT_EQ(YAML::Dump(device.second[key]), YAML::Dump(a100_gpu[key])) << at << "." << key;
      EXPECT_EQ(device.second["efficiency"]["default"].as<double>(), 0.801) << at;  // mamf-finder's H100 SXM
      EXPECT_EQ(device.second["gemm"]["sms"].as<int>(), 132) << at;
      EXPECT_EQ(YAML::Dump(device.second["gemm"]["tile"]), YAML::Dump(a100_gpu["gemm"]["tile"])) << at;
    }
    EXPECT_GE(gpus, 1) << preset;
    if (std::string(preset) == "h100-80gb") continue;  // one GPU: no collectives
    for (const char* key : {"floor_per_step", "ring_fill", "protocols"})
      EXPECT_EQ(YAML::Dump(h["collectives"][key]), YAML::Dump(a100["collectives"][key])) << preset << "." << key;
    EXPECT_EQ(h["collectives"]["sm_share"].as<double>(), 0.242) << preset;  // 32 of 132 SMs
  }
}

TEST(FirstUse, TooFewDevicesSaysHowToGetMore) {
  // One GPU, four ranks: the presets with enough devices, and the clusters that grow.
  CliResult r = run_memsim("run a100-80gb mlp --set parallel.dp=4 --no-advice --out " + temp_dir("few"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--set parallel.dp=4: parallel.dp: mlp: the step runs on 4 ranks (dp 4, zero 0), but platform "
                   "a100-80gb has 1 compute device(s); for 4: a preset with more (box4-v100-shared-pcie 4, "
                   "dgx-a100-80gb 8, dgx-h100 8) or a cluster preset with --set nodes=N "
                   "(dgx-a100-superpod, dgx-a100, dgx-h100-superpod: up to 8 a node)\n");
  // On a cluster: how many nodes it takes.
  r = run_memsim("run dgx-h100-superpod mlp --set nodes=1 --set parallel.dp=17 --no-advice --out " + temp_dir("few"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("platform dgx-h100-superpod has 8 compute device(s); --set nodes=3 makes 24 (8 a node)\n"),
            std::string::npos)
      << r.err;
  // `info --placement` says the same.
  r = run_memsim("info a100-80gb mlp --set parallel.dp=4 --placement");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("has 1 compute device(s); for 4: a preset with more ("), std::string::npos) << r.err;
}

// FSDP on 2 nodes with the optimizer step offloaded: each node's ranks use their own node's
// host, and the symmetric run (node 0's ranks for all) and the per-rank run agree.
TEST(FirstUse, OffloadOnTwoNodesUsesEachNodesHostAndSymmetricAgreesWithPerRank) {
  auto run = [](const std::string& policy, bool symmetric) {
    const std::string out = temp_dir(policy + (symmetric ? "_sym" : "_each"));
    const CliResult r = run_memsim("run dgx-h100-superpod gpt2-small --set nodes=2 --set parallel.dp=16 "
                                   "--set parallel.zero=3 --set workload.batch=2 --set parallel.symmetric=" +
                                   std::string(symmetric ? "true" : "false") + " --policy " + policy +
                                   " --json --no-advice --outputs summary --out " + out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  for (const std::string policy : {"zero-offload", "zero-infinity"}) {
    const auto sym = run(policy, true), each = run(policy, false);
    ASSERT_EQ(sym["status"], "ok") << policy;
    ASSERT_EQ(each["status"], "ok") << policy;
    // Node 1's ranks offload to host1, as much as node 0's to host0.
    const auto& tiers = each["tiers"];
    EXPECT_GT(tiers["host1.dram"]["peak_allocated_bytes"].get<double>(), 0) << policy;
    EXPECT_EQ(tiers["host1.dram"]["peak_allocated_bytes"], tiers["host0.dram"]["peak_allocated_bytes"]) << policy;
    for (const auto& [name, tier] : tiers.items())
      EXPECT_EQ(sym["tiers"][name]["peak_allocated_bytes"], tier["peak_allocated_bytes"]) << policy << " " << name;
    // zero-offload's steps are alike on every node; zero-infinity's NVMe reads meet the
    // collectives a little differently when node 1's ranks run too (within 2%).
    const double a = sym["iteration_time_s"].get<double>(), b = each["iteration_time_s"].get<double>();
    EXPECT_NEAR(a, b, (policy == "zero-offload" ? 1e-9 : 0.02) * b) << policy;
  }
}

// One step on every GPU of a cluster (no parallel keys): the nodes are copies of one
// description and the replicas share nothing across them, so node 0's are simulated and the
// other nodes hold what node 0 holds. 8,000 replicas of 1,000 nodes ran out of time or
// aborted in SimGrid (issue 26); simulating every device (--devices) gives the same answer.
TEST(FirstUse, ReplicasOnEveryNodeSimulateNodeZeroAndAgreeWithEveryDevice) {
  std::string every;
  for (int k = 0; k < 24; ++k) every += (k ? ",gpu" : "gpu") + std::to_string(k);
  for (const std::string policy : {"none", "swap-lru --set policy.budget=0.7", "zero-offload", "zero-infinity"}) {
    auto run = [&](const std::string& devices) {
      const CliResult r = run_memsim("run dgx-h100-superpod mlp --set nodes=3 --policy " + policy + devices +
                                     " --json --no-advice --outputs summary --out " + temp_dir("replicas"));
      EXPECT_EQ(r.exit_code, 0) << r.err;
      return r;
    };
    const CliResult node0 = run(""), all = run(" --devices " + every);
    EXPECT_NE(node0.err.find("nodes 1-2 of dgx-h100-superpod run the same replicas as node 0"), std::string::npos)
        << policy << ": " << node0.err;
    EXPECT_EQ(all.err.find("the same replicas"), std::string::npos) << policy << ": " << all.err;
    const auto a = nlohmann::json::parse(node0.out), b = nlohmann::json::parse(all.out);
    ASSERT_EQ(a["status"], "ok") << policy;
    EXPECT_EQ(a["iteration_time_s"], b["iteration_time_s"]) << policy;
    ASSERT_EQ(a["tiers"].size(), b["tiers"].size()) << policy;
    for (const auto& [name, tier] : b["tiers"].items()) {
      EXPECT_EQ(a["tiers"][name]["peak_allocated_bytes"], tier["peak_allocated_bytes"]) << policy << " " << name;
      EXPECT_EQ(a["tiers"][name]["peak_time_s"], tier["peak_time_s"]) << policy << " " << name;
    }
    // Every node's host held something under the offloading policies, node 2's as node 0's.
    if (policy != "none")
      EXPECT_GT(a["tiers"]["host2.dram"]["peak_allocated_bytes"].get<double>(), 0) << policy;
  }
}

// Where a node's GPUs reach a host only across the fabric, the replicas of every node swap to
// the same host (the widest route's first): they meet there, and every device is simulated.
TEST(FirstUse, ReplicasThatMeetAcrossTheFabricRunOnEveryNode) {
  const std::string dir = temp_dir("far_hosts");
  const std::string platform = dir + "/far-hosts.yaml";
  std::ofstream(platform) << R"(name: far-hosts
nodes: 2
devices:
  gpu0: {kind: gpu, compute: {fp32: 10TFLOPS}, tiers: {hbm: {role: compute, capacity: 16MiB, bandwidth: 1000GB/s}}}
  host: {kind: cpu, tiers: {dram: {role: offload, capacity: 64GiB, bandwidth: 100GB/s}}}
fabric:
  switches: [rail, spine]
  links:
    ib0: {endpoints: [gpu0.hbm, rail], bandwidth: 25GB/s, latency: 2us}
    hl: {endpoints: [host.dram, spine], bandwidth: 25GB/s, latency: 2us}
    up: {endpoints: [rail, spine], bandwidth: 25GB/s, latency: 1us}
)";
  // gpu1 swaps to host0 (no plan step names that route; the engine once had none for it).
  const CliResult r = run_memsim("run " + platform + " mlp --policy swap-lru --set policy.budget=0.7 --json "
                                 "--no-advice --outputs summary --out " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("the same replicas"), std::string::npos) << r.err;
  const auto s = nlohmann::json::parse(r.out);
  ASSERT_EQ(s["status"], "ok");
  EXPECT_EQ(s["tiers"]["host1.dram"]["peak_allocated_bytes"], 0);
  EXPECT_EQ(s["tiers"]["gpu1.hbm"]["peak_allocated_bytes"], s["tiers"]["gpu0.hbm"]["peak_allocated_bytes"]);
  // Both replicas' buffers were in host0 at once: more than either GPU's swapped-out share.
  EXPECT_GT(s["tiers"]["host0.dram"]["peak_allocated_bytes"].get<double>(),
            s["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].get<double>());
}

// A host (and zero-infinity's NVMe tier) named on a cluster is named as the node description
// has it, node 0's: each node's ranks use their own node's copy, as with `auto` (every rank
// used host0). Another node's host is refused with what to write instead.
TEST(FirstUse, ANamedHostOnTwoNodesIsEachNodesOwn) {
  const std::string base = "run dgx-h100-superpod gpt2-small --set nodes=2 --set parallel.dp=16 --set parallel.zero=3 "
                           "--set workload.batch=2 --set parallel.symmetric=false --json --no-advice --outputs summary ";
  for (const std::string policy : {"zero-offload --set policy.host=host0",
                                   "zero-infinity --set policy.host=host0 --set policy.nvme=host0.nvme"}) {
    const CliResult r = run_memsim(base + "--policy " + policy + " --out " + temp_dir("named"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto s = nlohmann::json::parse(r.out);
    ASSERT_EQ(s["status"], "ok") << policy;
    for (const std::string tier : {"dram", "nvme"}) {
      const auto& zero = s["tiers"]["host0." + tier]["peak_allocated_bytes"];
      const auto& one = s["tiers"]["host1." + tier]["peak_allocated_bytes"];
      if (tier == "nvme" && policy.starts_with("zero-offload")) continue;
      EXPECT_GT(one.get<double>(), 0) << policy << " " << tier;
      EXPECT_EQ(one, zero) << policy << " " << tier;
    }
  }
  CliResult r = run_memsim(base + "--policy zero-offload --set policy.host=host1 --out " + temp_dir("named"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--set policy.host=host1: host: zero-offload: 'host1' is node 1's host; on platform "
                   "'dgx-h100-superpod' of 2 nodes each node's ranks use their own node's: name it as node 0 has it "
                   "('host0', and each node uses its copy) or leave it auto\n");
  r = run_memsim(base + "--policy zero-infinity --set policy.nvme=host1.nvme --out " + temp_dir("named"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--set policy.nvme=host1.nvme: nvme: zero-infinity: 'host1.nvme' is node 1's tier; on "
                   "platform 'dgx-h100-superpod' of 2 nodes each node's ranks use their own node's: name it as node 0 "
                   "has it ('host0.nvme', and each node uses its copy) or leave it auto\n");
}

// README's sample of the OOM advice is what memsim prints for the V100 above, every line of
// it (the policies it could not run and did not try included).
TEST(FirstUse, ReadmeOomAdviceSampleIsWhatMemsimPrints) {
  const std::string readme = slurp(std::string(MEMSIM_SOURCE_DIR) + "/README.md");
  const auto at = readme.find("\n    needs       ");
  ASSERT_NE(at, std::string::npos);
  std::string sample;
  std::istringstream lines(readme.substr(at + 1));
  for (std::string line; std::getline(lines, line) && line.starts_with("    ");) sample += line.substr(4) + "\n";
  const std::string out = temp_dir("readme_oom");
  const CliResult r = run_memsim("run v100-16gb resnet50 --set workload.batch=256 --out " + out + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string printed = r.out;
  for (std::size_t p; (p = printed.find(out + "/")) != std::string::npos;) printed.erase(p, out.size() + 1);
  const auto begin = printed.find("needs       "), end = printed.find("\niteration ");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(sample, printed.substr(begin, end + 1 - begin)) << "update README.md's sample OOM advice";
}

// policy.budget as a fraction is of the step's own bytes (its peak under `none`: `memsim info
// --json`'s baseline_peak_bytes); what the device reserves outside the allocator comes on top.
// On dgx-h100 (a 700 MiB CUDA context per GPU) a small step under budget 1.0 ran out of memory
// before its first op: the reserve was taken out of the budget.
TEST(FirstUse, AFractionBudgetLeavesTheStepItsBytesWithTheReserveOnTop) {
  const CliResult info = run_memsim("info mlp --json");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const auto baseline = nlohmann::json::parse(info.out)["baseline_peak_bytes"].get<std::uint64_t>();
  const std::uint64_t reserve = 700ull << 20;  // dgx-h100.yaml's cuda_context (an mlp sends nothing: no nccl)
  for (const std::string fraction : {"1.0", "0.7"}) {
    const std::string out = temp_dir("budget" + fraction);
    const CliResult r = run_memsim("run dgx-h100 mlp --devices gpu0 --policy swap-lru --set policy.budget=" +
                                   fraction + " --outputs summary --no-advice --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto s = nlohmann::json::parse(slurp(out + "/summary.json"));
    const auto& hbm = s["tiers"]["gpu0.hbm"];
    const auto step = static_cast<std::uint64_t>(std::stod(fraction) * static_cast<double>(baseline));
    const auto budget = hbm["budget_bytes"].get<std::uint64_t>();
    // As the caching allocator rounds it, to less than one of its 2 MiB segments.
    EXPECT_LE(budget, reserve + step) << fraction;
    EXPECT_GT(budget + (2u << 20), reserve + step) << fraction;
    EXPECT_LE(hbm["peak_allocated_bytes"].get<std::uint64_t>(), budget) << fraction;
    EXPECT_EQ(s["status"], "ok") << fraction << ": " << r.out;
  }
}

}  // namespace
