// Data-parallel training from the command line: the questions of issue 15, asked as a user
// asks them, answered by runs of the binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_par_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

json run_json(const std::string& args, const std::string& out) {
  const CliResult r = run_memsim(args + " --out " + out);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  return json::parse(slurp(out + "/summary.json"));
}

// Where a and b differ ("" where they do not), numbers by more than a relative 1e-12: two
// runs whose streams the engine ran in different groupings (its deferral, docs/parallel.md)
// sum the same durations in another order, which moves the last bits.
std::string json_difference(const json& a, const json& b, const std::string& at = "") {
  if (a.is_number_float() || b.is_number_float()) {
    if (!a.is_number() || !b.is_number()) return at + ": " + a.dump() + " vs " + b.dump();
    const double x = a.get<double>(), y = b.get<double>();
    return std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y)) ? "" : at + ": " + a.dump() + " vs " + b.dump();
  }
  if (a.type() != b.type() || a.size() != b.size()) return at + ": " + a.dump() + " vs " + b.dump();
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key())) return at + "." + it.key() + ": missing";
      if (auto d = json_difference(it.value(), b[it.key()], at + "." + it.key()); !d.empty()) return d;
    }
    return "";
  }
  if (a.is_array()) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (auto d = json_difference(a[i], b[i], at + "[" + std::to_string(i) + "]"); !d.empty()) return d;
    return "";
  }
  return a == b ? "" : at + ": " + a.dump() + " vs " + b.dump();
}

// The rows of a CSV file as maps from its header.
std::vector<std::map<std::string, std::string>> csv(const std::string& path) {
  std::istringstream in(slurp(path));
  std::string line;
  std::getline(in, line);
  auto split = [](const std::string& l) {
    std::vector<std::string> out;
    std::string cell;
    std::istringstream s(l);
    while (std::getline(s, cell, ',')) out.push_back(cell);
    if (!l.empty() && l.back() == ',') out.emplace_back();
    return out;
  };
  const auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto cells = split(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

TEST(Parallel, Llama7BTrainsOnEightH100sWithZero3AndNotWithDdp) {
  const std::string out = temp_dir("llama_z3");
  const CliResult r = run_memsim("run dgx-h100 llama-7b --set parallel.dp=8 --set parallel.zero=3 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s = json::parse(slurp(out + "/summary.json"));
  EXPECT_EQ(s["status"], "ok");
  EXPECT_EQ(s["ranks"]["count"], 8);
  // The per-GPU peak, the same on every rank, with the gathered parameters and the CUDA
  // context and NCCL buffers as their own categories.
  const json& gpu0 = s["tiers"]["gpu0.hbm"];
  EXPECT_EQ(gpu0["peak_allocated_bytes"], s["tiers"]["gpu7.hbm"]["peak_allocated_bytes"]);
  EXPECT_GT(gpu0["peak_by_category"]["comm"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(gpu0["peak_by_category"]["runtime"].get<std::uint64_t>(), (700ull + 256ull) << 20);
  EXPECT_GT(s["exposed_comm_time_s"].get<double>(), 0.0);
  EXPECT_LT(s["exposed_comm_time_s"].get<double>(), s["comm_time_s"].get<double>());
  std::uint64_t nvswitch = 0;
  for (const json& l : s["links"])
    if (l["name"].get<std::string>().rfind("nvlink", 0) == 0) nvswitch += l["bytes_forward"].get<std::uint64_t>();
  EXPECT_GT(nvswitch, 0u);
  EXPECT_NE(r.out.find("gpu0-7.hbm  peak"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exposed comm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("links       nvlink0-7"), std::string::npos) << r.out;

  // DDP keeps 16 bytes per parameter on every GPU: 107.8 GB of model state on an 80 GiB GPU.
  const CliResult ddp = run_memsim("run dgx-h100 llama-7b --set parallel.dp=8 --set parallel.zero=0 --out " +
                                   temp_dir("llama_ddp"));
  ASSERT_EQ(ddp.exit_code, 0) << ddp.err;
  EXPECT_NE(ddp.out.find("status      oom"), std::string::npos) << ddp.out;
  EXPECT_NE(ddp.out.find("start of iteration: resident buffers"), std::string::npos) << ddp.out;
}

TEST(Parallel, DdpResNet50AllReducesItsGradientsAndWaitsForTheLastBucket) {
  const std::string out = temp_dir("ddp_r50");
  const json s = run_json("run dgx-a100 resnet50 --set parallel.dp=8", out);
  ASSERT_EQ(s["status"], "ok");
  std::uint64_t all_reduced = 0;
  for (const json& c : s["collectives"])
    if (c["kind"] == "all_reduce") all_reduced += c["bytes"].get<std::uint64_t>();
  EXPECT_EQ(all_reduced, 25'557'032ull * 4);  // every fp32 gradient, once
  // The last bucket goes out after the last gradient is made; backward has nothing left to
  // hide it behind, so the step is at least the compute plus that bucket's tail.
  double last_backward_end = 0, last_all_reduce_end = 0;
  for (const auto& row : csv(out + "/timeline.csv")) {
    if (row.at("device") != "gpu0") continue;
    const double end = std::stod(row.at("end_s"));
    if (row.at("kind") == "compute" && row.at("phase") == "backward") last_backward_end = std::max(last_backward_end, end);
    if (row.at("kind") == "comm" && row.at("op_kind") == "all_reduce") last_all_reduce_end = std::max(last_all_reduce_end, end);
  }
  ASSERT_GT(last_all_reduce_end, last_backward_end);
  EXPECT_GE(s["iteration_time_s"].get<double>() + 1e-12,
            s["compute_time_s"].get<double>() + (last_all_reduce_end - last_backward_end));
}

TEST(Parallel, DeferredOpsGiveTheEventsOfTheExactRunInTheSameOrder) {
  // The engine sums the ops a stream runs while no other stream can act before they end, and
  // hands SimGrid the sum; --exact makes every op its own activity. Every event, every
  // memory sample and the summary must be the same, in the same order, but for rounding.
  const std::string tiny = temp_dir("defer_tiny") + ".yaml";
  std::ofstream(tiny) << "model: gpt\nlayers: 4\nhidden: 128\nheads: 8\nvocab: 512\nseq_len: 64\nbatch: 2\n"
                         "dtype: bf16\nmixed_precision: true\noptimizer: adam\nmax_positions: 64\n"
                         "parallel: {tp: 1, pp: 2, dp: 2, schedule: interleaved, virtual_stages: 2, micro_batches: 2, "
                         "zero: 0, fused_accumulation: true}\n";
  const std::vector<std::string> runs = {
      // a pipeline of 8 ranks simulated each: 16 streams, sends, receives and TP collectives
      "run dgx-h100 gpt2-medium --set parallel.pp=2 --set parallel.tp=2 --set parallel.dp=2 "
      "--set parallel.micro_batches=4 --set parallel.symmetric=false",
      // an interleaved pipeline with sequence parallelism, symmetric
      "run dgx-h100 llama-7b --set workload.layers=8 --set parallel.pp=2 --set parallel.virtual_stages=2 "
      "--set parallel.micro_batches=4 --set parallel.schedule=interleaved --set parallel.tp=4 --set parallel.sp=true",
      // ZeRO 3's gathers on the communication stream beside the compute
      "run dgx-a100 bert-base --set workload.batch=8 --set parallel.dp=8 --set parallel.zero=3",
      // copies in flight and an optimizer step on the host
      "run dgx-a100 gpt2-medium --policy zero-offload --set parallel.dp=2",
      // an interleaved pipeline whose data-parallel all-reduce waits for the last gradient
      // update: a stream woken with the others but not free to go on must not let another
      // run ahead of it (it started its all-reduce an op early)
      "run dgx-h100 " + tiny,
      // two nodes: each stage's tensor-parallel group alone on its node's NVLink, its
      // collectives slept at the time measured at their first run (CollectiveRunner::plan_replay)
      "run dgx-h100-superpod llama3-70b --set nodes=2 --set parallel.tp=8 --set parallel.sp=true --set parallel.pp=2 "
      "--set parallel.zero=1 --set workload.layers=8 --set parallel.global_batch=4",
  };
  // Where collectives are slept, two that end at one instant (a stage's send and receive)
  // may be recorded in the other order: their rows may change places, and nothing else.
  const std::size_t slept_from = runs.size() - 1;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string fast = temp_dir("defer_" + std::to_string(i)), exact = temp_dir("exact_" + std::to_string(i));
    const json a = run_json(runs[i] + " --no-advice", fast);
    const json b = run_json(runs[i] + " --no-advice --exact", exact);
    ASSERT_EQ(a["status"], "ok") << runs[i];
    EXPECT_EQ(json_difference(a, b), "") << runs[i];
    for (const char* file : {"/timeline.csv", "/memory.csv", "/peak.csv"}) {
      const auto x = csv(fast + file);
      auto y = csv(exact + file);
      ASSERT_EQ(x.size(), y.size()) << runs[i] << file;
      ASSERT_GT(x.size(), 10u) << runs[i] << file;
      for (std::size_t r = 0; r < x.size(); ++r) {
        if (i >= slept_from && std::string(file) == "/timeline.csv" && x[r].at("op") != y[r].at("op")) {
          const double end = std::stod(y[r].at("end_s"));
          for (std::size_t j = r + 1; j < y.size() && std::abs(std::stod(y[j].at("end_s")) - end) <= 1e-12 * std::max(1.0, end); ++j)
            if (y[j].at("op") == x[r].at("op")) {
              std::swap(y[r], y[j]);
              break;
            }
        }
        ASSERT_EQ(x[r].size(), y[r].size());
        for (const auto& [column, value] : x[r]) {
          const std::string& other = y[r].at(column);
          if (value == other) continue;
          // Only a time may differ, and only in its last bits (a duration, the difference of
          // two times, by as much as they do).
          const double u = std::stod(value), v = std::stod(other);
          ASSERT_LE(std::abs(u - v), 1e-12 * std::max({std::abs(u), std::abs(v), 1.0}))
              << runs[i] << file << " row " << r + 1 << " " << column << ": " << value << " vs " << other;
        }
      }
    }
  }
}

TEST(Parallel, SymmetricRanksGiveTheAnswerOfEveryRankSimulated) {
  // Rank 0 alone with its peers' traffic on the links, against all eight ranks simulated.
  for (int zero = 0; zero <= 3; ++zero) {
    const std::string base = "run dgx-a100 bert-base --set workload.batch=8 --set parallel.dp=8 --set parallel.zero=" +
                             std::to_string(zero);
    const json one = run_json(base, temp_dir("sym_one_" + std::to_string(zero)));
    const json all = run_json(base + " --set parallel.symmetric=false", temp_dir("sym_all_" + std::to_string(zero)));
    EXPECT_EQ(one["ranks"]["symmetric"], true);
    EXPECT_EQ(all["ranks"]["symmetric"], false);
    for (const char* key : {"iteration_time_s", "compute_time_s", "comm_time_s", "exposed_comm_time_s", "links", "collectives"})
      EXPECT_EQ(json_difference(one[key], all[key], key), "") << "zero " << zero;
    for (const char* tier : {"gpu0.hbm", "gpu7.hbm"})
      EXPECT_EQ(one["tiers"][tier]["peak_allocated_bytes"], all["tiers"][tier]["peak_allocated_bytes"])
          << tier << ", zero " << zero;
  }
}

TEST(Parallel, ADataParallelStepNeedsAsManyDevicesAsRanks) {
  const CliResult r = run_memsim("run a100-40gb resnet18 --set parallel.dp=8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("runs on 8 ranks (dp 8, zero 0), but platform a100-40gb has 1 compute device(s)"), std::string::npos) << r.err;
  const CliResult bad = run_memsim("run dgx-a100 resnet18 --set parallel.zero=4");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("parallel.zero"), std::string::npos) << bad.err;
}

TEST(Parallel, ASuperPodOfManyNodesIsAFewLines) {
  const CliResult r = run_memsim("info dgx-h100-superpod --set nodes=4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_NE(r.out.find("gpu31"), std::string::npos);
  EXPECT_EQ(r.out.find("gpu32"), std::string::npos);
  (void)j;
}

TEST(Parallel, A3DLayoutOfLlama3On64H100sFitsAndStageZeroHoldsTheMost) {
  // Llama 3 70B as Megatron-LM trains it on eight DGX H100s: TP 8 with sequence parallelism
  // in a node, a 1F1B pipeline of 4 stages over nodes, ZeRO-1 over 2 replicas, selective
  // recompute. Stage 0 holds the most (p micro-batches in flight, the embedding), and each
  // stage's peers are copies of its first rank.
  const std::string out = temp_dir("llama3_3d");
  const json s = run_json(
      "run dgx-h100-superpod llama3-70b --set nodes=8 --set parallel.tp=8 --set parallel.sp=true "
      "--set parallel.pp=4 --set parallel.dp=2 --set parallel.zero=1 --set parallel.micro_batches=8 "
      "--set parallel.fused_accumulation=true --set workload.attention_impl=selective --set workload.main_grads=fp32",
      out);
  EXPECT_EQ(s["status"], "ok");
  EXPECT_EQ(s["ranks"]["count"], 64);
  ASSERT_EQ(s["pipeline"]["stages"].size(), 4u);
  EXPECT_EQ(s["pipeline"]["schedule"], "1f1b");
  const auto peak = [&](int gpu) {
    return s["tiers"]["gpu" + std::to_string(gpu) + ".hbm"]["peak_allocated_bytes"].get<std::uint64_t>();
  };
  // Stage s is ranks 16 s .. 16 s + 15.
  for (int stage = 0; stage < 4; ++stage)
    for (int peer : {1, 8, 15}) EXPECT_EQ(peak(16 * stage + peer), peak(16 * stage)) << stage << " " << peer;
  EXPECT_GT(peak(0), peak(16));
  EXPECT_GT(peak(16), peak(48) * 1.0) << "stage 1 keeps 3 micro-batches, stage 3 one";
  EXPECT_LT(peak(0), 80ull << 30);
  // Activations and their gradients cross between stages: 8 micro-batches each way.
  std::map<std::string, int> kinds;
  for (const auto& c : s["collectives"]) kinds[c["kind"]] = c["count"];
  EXPECT_EQ(kinds["send"], 8);
  for (const auto& st : s["pipeline"]["stages"]) {
    EXPECT_GT(st["bubble_fraction"].get<double>(), 0.0);
    EXPECT_LT(st["bubble_fraction"].get<double>(), 1.0);
  }
}

TEST(Parallel, OverlappedTensorParallelCommunicationHidesTheCollectives) {
  // Llama 7B's layers, tp 8 with sp on a DGX H100, batch 4: with tp_comm_overlap the
  // all-gathers and reduce-scatters of the forward and the backward run beside their GEMMs, so
  // the step is shorter and less of its communication is exposed; the memory is the same to the
  // byte (the same buffers, made at the same points of the step).
  const std::string dir = temp_dir("tp_overlap");
  const std::string run = "run dgx-h100 llama-7b --set workload.layers=4 --set workload.batch=4 --set parallel.tp=8 "
                          "--set parallel.sp=true --no-advice --quiet";
  const json plain = run_json(run, dir + "/plain");
  const json overlapped = run_json(run + " --set parallel.tp_comm_overlap=true", dir + "/overlapped");
  ASSERT_EQ(plain["status"], "ok");
  ASSERT_EQ(overlapped["status"], "ok");
  EXPECT_EQ(overlapped["tiers"]["gpu0.hbm"]["peak_allocated_bytes"], plain["tiers"]["gpu0.hbm"]["peak_allocated_bytes"]);
  const double t0 = plain["iteration_time_s"], t1 = overlapped["iteration_time_s"];
  const double e0 = plain["exposed_comm_time_s"], e1 = overlapped["exposed_comm_time_s"];
  EXPECT_LT(t1, t0);
  EXPECT_LT(e1, e0);
  // What it saves is exposed communication, never more than there was.
  EXPECT_NEAR(t0 - t1, e0 - e1, 0.25 * (e0 - e1));
  EXPECT_NE(std::string(overlapped["description"]).find("tp 8 sp overlapped"), std::string::npos)
      << overlapped["description"];
}

TEST(Parallel, PipelineSplitsThatCannotBeAreLocatedErrors) {
  const CliResult uneven = run_memsim("run dgx-h100 llama-7b --set parallel.pp=5");
  EXPECT_EQ(uneven.exit_code, 1);
  EXPECT_NE(uneven.err.find("--set parallel.pp=5"), std::string::npos) << uneven.err;
  EXPECT_NE(uneven.err.find("its 32 layers do not split evenly into 5 pipeline stage(s)"), std::string::npos) << uneven.err;
  const CliResult unnumbered = run_memsim("run dgx-h100 mlp --set parallel.pp=2");
  EXPECT_EQ(unnumbered.exit_code, 1);
  EXPECT_NE(unnumbered.err.find("no op of this model belongs to one"), std::string::npos) << unnumbered.err;
  const CliResult chunks = run_memsim("run dgx-h100 llama-7b --set parallel.pp=4 --set parallel.virtual_stages=2");
  EXPECT_EQ(chunks.exit_code, 1);
  EXPECT_NE(chunks.err.find("virtual stages need schedule: interleaved"), std::string::npos) << chunks.err;
}

TEST(Parallel, PlacementShowsWhereEachGroupRuns) {
  // TP innermost within a node, DP across the two nodes of a stage, stages a node pair apart.
  const CliResult r = run_memsim(
      "info dgx-h100-superpod llama3-70b --set nodes=8 --set parallel.tp=8 --set parallel.pp=4 --set parallel.dp=2 "
      "--placement");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("64 ranks (tp 8, dp 2, pp 4)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage 1   ranks 16-31 on gpu16-31 (2 nodes)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tp groups of 8 (each within a node): gpu16-23, gpu24-31"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dp groups of 2 (across nodes): gpu16+gpu24,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("to the rank 16 above it (across nodes)"), std::string::npos) << r.out;
  const CliResult missing = run_memsim("info dgx-h100 llama-7b");
  EXPECT_EQ(missing.exit_code, 2);  // a usage error, as elsewhere
  EXPECT_NE(missing.err.find("needs --placement"), std::string::npos) << missing.err;
}

TEST(Parallel, CheckpointingAcrossMicroBatchesIsRefusedNotMisplanned) {
  // The recomputation schedules plan one forward and one backward pass per device; a step
  // of several micro-batches is an input error naming the ops, not a crash.
  const CliResult r = run_memsim(
      "run dgx-h100 llama-7b --set workload.layers=4 --set workload.seq_len=512 --set parallel.dp=2 "
      "--set parallel.micro_batches=2 --policy checkpoint-sqrt --no-advice");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("plans one forward and one backward pass per device"), std::string::npos) << r.err;
  // Runtime policies take such a step: DTR on a pipeline.
  const CliResult dtr = run_memsim(
      "run dgx-h100 llama-7b --set workload.layers=4 --set workload.seq_len=512 --set parallel.pp=4 "
      "--set parallel.micro_batches=4 --policy dtr --no-advice --out " + temp_dir("pp_dtr"));
  EXPECT_EQ(dtr.exit_code, 0) << dtr.err;
}

// Llama with its head tied to the token embedding against the same model untied, with
// pipeline parallelism and several micro-batches (the repros: two stages of dp 8 on
// two nodes, eight stages on one; and an interleaved layout): the same peak on every GPU to
// the byte (the tied weight on the last stage takes the head's place; the first stage makes
// its embedding gradient as the untied model does), and a step longer by no more than the
// embedding's reduction on its own.
TEST(Parallel, ATiedPipelineCostsTheUntiedOnePlusTheEmbeddingsReduction) {
  const std::string dir = temp_dir("tied");
  fs::create_directories(dir);
  int k = 0;
  for (const std::string parallel : {"{pp: 2, dp: 8, global_batch: 16, schedule: 1f1b}",
                                     "{pp: 8, micro_batches: 8, schedule: 1f1b}",
                                     "{pp: 4, dp: 2, micro_batches: 8, schedule: interleaved, virtual_stages: 2}"}) {
    SCOPED_TRACE(parallel);
    json summary[2];
    double reduction = 0;
    for (const bool tied : {false, true}) {
      const std::string spec = dir + "/" + std::to_string(k) + (tied ? "tied" : "untied") + ".yaml";
      std::ofstream(spec) << "model: llama\nlayers: 8\nhidden: 256\nheads: 8\nintermediate: 512\nvocab: 32000\n"
                             "seq_len: 128\nbatch: 1\ndtype: bf16\nmixed_precision: true\noptimizer: adam\n"
                          << "tie_embeddings: " << (tied ? "true" : "false") << "\nparallel: " << parallel << "\n";
      const std::string out = spec + ".out";
      summary[tied] = run_json("run dgx-h100-superpod " + spec + " --set nodes=2 --no-advice", out);
      if (tied)
        for (const auto& row : csv(out + "/timeline.csv"))
          if (row.at("op").find("embed_tokens.weight.grad.all_reduce") != std::string::npos)
            reduction = std::max(reduction, std::stod(row.at("duration_s")));
    }
    ++k;
    ASSERT_EQ(summary[0]["status"], "ok");
    ASSERT_EQ(summary[1]["status"], "ok");
    for (const auto& [tier, t] : summary[0]["tiers"].items())
      EXPECT_EQ(t["peak_allocated_bytes"], summary[1]["tiers"][tier]["peak_allocated_bytes"]) << tier;
    const double untied_s = summary[0]["iteration_time_s"], tied_s = summary[1]["iteration_time_s"];
    EXPECT_GT(reduction, 0.0);
    EXPECT_GE(tied_s, untied_s);
    EXPECT_LE(tied_s, untied_s + reduction + 1e-9);
  }
}

TEST(Parallel, DgxA100NodesShareTheirInfinibandAlikeWithAndWithoutSymmetricRanks) {
  // dgx-a100 --set nodes=2: 800 Gb/s a node, 12.5 GB/s for each GPU. At tp 8 x dp 2 the eight
  // data-parallel rings cross between the nodes at once; simulating rank 0 alone (its groups'
  // flows only) must give the step of every rank simulated, and the all-reduce must pay the
  // GPU's share of the node's InfiniBand, not NVLink's rate.
  const std::string dir = temp_dir("dgx_a100_nodes");
  const std::string run =
      "run dgx-a100 gpt-megatron --set nodes=2 --set workload.layers=4 --set workload.hidden=4096 "
      "--set workload.heads=32 --set workload.seq_len=1024 --set parallel.tp=8 --set parallel.dp=2 "
      "--set parallel.global_batch=2 --no-advice --outputs summary";
  const json sym = run_json(run, dir + "/sym");
  const json all = run_json(run + " --set parallel.symmetric=false", dir + "/all");
  ASSERT_EQ(sym["status"], "ok");
  ASSERT_EQ(all["status"], "ok");
  EXPECT_NEAR(sym["iteration_time_s"].get<double>(), all["iteration_time_s"].get<double>(),
              1e-9 * all["iteration_time_s"].get<double>());
  // Gradients (fp16) of 4 layers of 12 h^2 / 8 parameters plus the embeddings' share, all-reduced
  // once after the backward (gpt-megatron: ddp local) over 2 ranks: 2 (n-1)/n x bytes / 12.5 GB/s
  // is the least the exposed communication can be beyond the tensor-parallel all-reduces.
  const double grad_bytes = 2.0 * (4 * 12.0 * 4096 * 4096 / 8 + 50304.0 * 4096 / 8);
  const double one_node = run_json("run dgx-a100 gpt-megatron --set workload.layers=4 --set workload.hidden=4096 "
                                   "--set workload.heads=32 --set workload.seq_len=1024 --set parallel.tp=8 "
                                   "--set parallel.global_batch=1 --no-advice --outputs summary",
                                   dir + "/one")["exposed_comm_time_s"];
  EXPECT_GT(sym["exposed_comm_time_s"].get<double>() - one_node, grad_bytes / 12.5e9);
}
