// The traces other projects published (../shared/validation/external, its README says what
// each is): every file imports, or is refused at once saying what it is and what to pass
// instead. The training traces come out as they ran: phases in order, the model's parameter
// count, weights and optimizer state, their collectives; a Kineto trace times its ET's ops.
// Skipped, with a message, where ../shared is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "cli.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

fs::path external() { return fs::path(MEMSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "external"; }

#define REQUIRE_EXTERNAL()                                                                                 \
  if (!fs::is_directory(external()))                                                                       \
  GTEST_SKIP() << external().string() << " is absent: the published traces are not on this machine"

const std::string kParam = "facebookresearch-param@1e115ff/et_replay/tests/inputs/";
const std::string kHta = "facebookresearch-HolisticTraceAnalysis@f4d0062/tests/data/execution_trace/";

struct Expect {
  std::size_t ops = 0;           // 0: refused
  std::uint64_t parameters = 0;  // the model's, counted from its shapes
  std::map<std::string, std::size_t> comm;
  std::string refusal;           // what the message says after "FILE: "
  bool training = false;         // forward, backward and optimizer ops, in that order
};

const std::string kKineto =
    "a Kineto trace (torch.profiler's traceEvents: when each op and kernel ran), not a trace of a training step's "
    "memory; pass it with the Execution Trace recorded in the same run: memsim run DEVICE TRACE.json --kineto ";

// ResNet-50 (torchvision): 25,557,032 parameters; under DDP each step all-reduces 5 buckets
// and broadcasts the BN buffers twice.
Expect resnet50_ddp(std::size_t ops) { return {ops, 25557032, {{"all_reduce", 5}, {"broadcast", 2}}, "", true}; }

const std::map<std::string, Expect>& expected() {
  static const std::map<std::string, Expect> e{
      {"astra-sim-astra-sim@518bd51/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce.0.et",
       {35, 0, {{"send", 14}, {"recv", 14}}}},
      {"astra-sim-astra-sim@518bd51/examples/workload/microbenchmarks/all_reduce/4npus_1MB/all_reduce.0.et",
       {1, 0, {{"all_reduce", 1}}}},
      {"astra-sim-astra-sim@518bd51/examples/workload/microbenchmarks/all_to_all/4npus_1MB/all_to_all.0.et",
       {1, 0, {{"all_to_all", 1}}}},
      {"astra-sim-tutorials@ead2d5d/hoti2024/demo3/pytorch_traces/pytorch_et_0.json", resnet50_ddp(908)},
      {"astra-sim-tutorials@ead2d5d/hoti2024/demo3/pytorch_traces/pytorch_et_1.json", resnet50_ddp(908)},
      {"astra-sim-tutorials@ead2d5d/micro2024/astra-sim-demo/demo1/allreduce/allreduce.0.et", {1, 0, {{"all_reduce", 1}}}},
      {"astra-sim-tutorials@ead2d5d/micro2024/astra-sim-demo/demo2/workload/MLP_ModelParallel.0.et",
       {29, 0, {{"all_gather", 6}, {"all_reduce", 5}}}},
      {"astra-sim-tutorials@ead2d5d/micro2024/astra-sim-demo/demo2/workload/MLP_ModelParallel.4.et",
       {29, 0, {{"all_gather", 6}, {"all_reduce", 5}}}},
      {kHta + "benchmark_simple_add_et.json.gz", {6, 0, {}}},
      {kHta + "benchmark_simple_add_trace.json.gz", {0, 0, {}, kKineto}},
      {kParam + "1.0.3-chakra.0.0.4/resnet_1gpu_et.json.gz", resnet50_ddp(909)},
      {kParam + "1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz", resnet50_ddp(909)},
      // TorchRec DLRM, rank 0: the dense MLPs (621,313) and its embedding shard (640,649,648
      // rows x dims, updated by FBGEMM's fused Adagrad).
      {kParam + "dlrm_pytorch_et.tar.gz", {326, 621313 + 640649648, {{"all_to_all", 5}, {"all_reduce", 3}}, "", true}},
      // GPT-2 large: 774,030,080 (wte 50257 x 1280 tied with the LM head, wpe 1024 x 1280,
      // 36 blocks of 21,245,440, the final LayerNorm).
      {kParam + "hf_GPT2_et.json.tar.gz", {4441, 774030080, {}, "", true}},
      // 21 x Linear(1024, 1024).
      {kParam + "linear_et.json.gz", {218, 21 * (1024 * 1024 + 1024), {}, "", true}},
      {kParam + "linear_kineto.json.gz", {0, 0, {}, kKineto}},
      {kParam + "pt2_et.json", {2, 0, {}}},
      {kParam + "resnet_1gpu_et.json.tar.gz", resnet50_ddp(909)},
      {kParam + "resnet_et.json.gz", resnet50_ddp(909)},
      // ResNet-18: 11,689,512.
      {"facebookresearch-param@9b1946f/et_replay/tests/inputs/resnet_et.json.gz", {173, 11689512, {}, "", true}},
      {"mlcommons-chakra@21585d8/tests/data/1.0.2-chakra.0.0.4.tgz", {50, 0, {{"all_gather", 10}}}},
      // chakra_converter's output: 3,643 COMP and 21 COMM_COLL nodes.
      {"mlcommons-chakra@21585d8/tests/data/feeder_tests_trace.tar.gz",
       {3664, 0, {{"all_reduce", 15}, {"broadcast", 6}}}},
      {"mlcommons-chakra@21585d8/tests/data/json_trace.tar.gz",
       {0, 0, {},
        "the Chakra feeder's JSON test format (workload_graph), not a trace memsim imports; pass the Chakra protobuf "
        "trace (chakra_converter's .et output) or the PyTorch Execution Trace it came from"}},
  };
  return e;
}

std::string path_of(const std::string& relative) { return (external() / relative).string(); }

// The bytes of a (gzip-compressed or plain) file once decompressed.
std::uint64_t decompressed_bytes(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return 0;
  std::uint64_t n = 0;
  char buf[1 << 16];
  for (int got; (got = gzread(f, buf, sizeof buf)) > 0;) n += static_cast<std::uint64_t>(got);
  gzclose(f);
  return n;
}

}  // namespace

TEST(ExternalTraces, EachImportsOrIsRefusedAtOnceSayingWhatItIs) {
  REQUIRE_EXTERNAL();
  std::size_t seen = 0;
  for (const auto& entry : fs::recursive_directory_iterator(external())) {
    if (!entry.is_regular_file() || entry.path().filename() == "README.md") continue;
    const std::string relative = fs::relative(entry.path(), external()).string();
    SCOPED_TRACE(relative);
    const auto it = expected().find(relative);
    ASSERT_NE(it, expected().end()) << "a new file under " << external() << ": say here what memsim makes of it";
    ++seen;
    const Expect& want = it->second;
    const std::string path = entry.path().string();
    CliResult r = run_memsim("info '" + path + "' --json");
    if (!want.refusal.empty()) {
      EXPECT_EQ(r.exit_code, 1);
      EXPECT_EQ(r.err.rfind(path + ": " + want.refusal, 0), 0u) << r.err;
      // Refused at once, from its first bytes, not after reading it all: the same refusal
      // when memsim may read no more of an input than twice the file (at least 8 KiB), which
      // is less than the file holds decompressed: reading it all would be refused for size.
      // (A tar archive is read as far as its member, so not there.)
      if (path.ends_with(".tar.gz") || path.ends_with(".tgz")) continue;
      const std::uint64_t limit = std::max<std::uint64_t>(8192, 2 * fs::file_size(entry.path()));
      ASSERT_GT(decompressed_bytes(path), limit);
      CliResult head = run_memsim(fmt::format("--max-input-size {}B info '{}' --json", limit, path));
      EXPECT_EQ(head.exit_code, 1);
      EXPECT_EQ(head.err, r.err);
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["ops"].get<std::size_t>(), want.ops);
    EXPECT_EQ(j["parameters"].get<std::uint64_t>(), want.parameters);
    std::map<std::string, std::size_t> comm;
    for (const auto& [kind, n] : j["communication_ops"].items()) comm[kind] = n.get<std::size_t>();
    EXPECT_EQ(comm, want.comm);
    if (want.training) {
      for (const char* phase : {"forward", "backward", "optimizer"}) EXPECT_GT(j["ops_by_phase"][phase].get<int>(), 0) << phase;
      EXPECT_GT(j["bytes_by_category"]["weight"].get<std::uint64_t>(), 0u);
      EXPECT_GT(j["bytes_by_category"]["gradient"].get<std::uint64_t>(), 0u);
    }
  }
  EXPECT_EQ(seen, expected().size());
}

// Within the step, the ops run as they started (their node ids count up, across the main and
// the backward thread) and the phases never go back; weights and optimizer state carry their
// categories.
TEST(ExternalTraces, TrainingStepsInTheOrderTheyRan) {
  REQUIRE_EXTERNAL();
  for (const auto& [relative, want] : expected()) {
    if (!want.training) continue;
    SCOPED_TRACE(relative);
    CliResult r = run_memsim("trace '" + path_of(relative) + "' -o -");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json t = json::parse(r.out);
    int phase = 0;
    long long last_id = -1;
    for (const auto& op : t["ops"]) {
      const std::string p = op["phase"];
      const int now = p == "forward" ? 0 : p == "backward" ? 1 : 2;
      EXPECT_GE(now, phase) << op["name"];
      phase = std::max(phase, now);
      const std::string name = op["name"];
      const long long id = std::stoll(name.substr(name.rfind('#') + 1));
      EXPECT_GT(id, last_id) << name;
      last_id = id;
    }
    EXPECT_EQ(phase, 2);
    std::map<std::string, std::uint64_t> by;
    for (const auto& b : t["buffers"]) by[b["category"]] += b["bytes"].get<std::uint64_t>();
    EXPECT_GT(by["weight"], 0u);
    if (relative.find("linear_et") == std::string::npos)  // plain SGD keeps no state
      EXPECT_GT(by["optimizer_state"], 0u);
  }
}

TEST(ExternalTraces, GptTwoAdamStateAndTheCollectivesSizes) {
  REQUIRE_EXTERNAL();
  CliResult r = run_memsim("trace '" + path_of(kParam + "hf_GPT2_et.json.tar.gz") + "' -o -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json t = json::parse(r.out);
  std::map<std::string, std::uint64_t> by;
  for (const auto& b : t["buffers"]) by[b["category"]] += b["bytes"].get<std::uint64_t>();
  EXPECT_EQ(by["weight"], 774030080ull * 4);           // fp32
  EXPECT_EQ(by["optimizer_state"], 2 * 774030080ull * 4);  // Adam's two moments, made by the step
  EXPECT_EQ(by["gradient"], 774030080ull * 4);
  // DDP's all-reduces carry their bucket's size and group.
  r = run_memsim("trace '" + path_of(kParam + "resnet_et.json.gz") + "' -o -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::uint64_t reduced = 0;
  const json ddp = json::parse(r.out);
  for (const auto& op : ddp["ops"])
    if (op["kind"] == "all_reduce") {
      reduced += op["message_bytes"].get<std::uint64_t>();
      EXPECT_EQ(op["group"], "0 (default_pg), 1 rank");
    }
  EXPECT_EQ(reduced, 25557032ull * 4);  // every gradient, once
}

namespace {

json read_gzip_json(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string text;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  gzclose(f);
  return json::parse(text);
}

}  // namespace

// HTA's pair, captured in one run: the ET's aten::add (rf_id 22) takes the time of the kernel
// its Kineto cpu_op (External id 22) launched, worked out here from the Kineto file itself.
TEST(ExternalTraces, KinetoGivesTheKernelsTime) {
  REQUIRE_EXTERNAL();
  const std::string et = path_of(kHta + "benchmark_simple_add_et.json.gz");
  const std::string kineto = path_of(kHta + "benchmark_simple_add_trace.json.gz");
  const json k = read_gzip_json(kineto);
  double ts = -1, end = -1, kernel_us = -1;
  long long tid = -1, correlation = -1;
  for (const auto& e : k["traceEvents"])
    if (e.value("cat", "") == "cpu_op" && e["name"] == "aten::add" && e["args"]["External id"] == 22) {
      ts = e["ts"].get<double>();
      end = ts + e["dur"].get<double>();
      tid = e["tid"].get<long long>();
    }
  for (const auto& e : k["traceEvents"])
    if (e.value("cat", "") == "cuda_runtime" && e["name"] == "cudaLaunchKernel" && e["tid"] == tid &&
        e["ts"].get<double>() >= ts && e["ts"].get<double>() <= end)
      correlation = e["args"]["correlation"].get<long long>();
  for (const auto& e : k["traceEvents"])
    if (e.value("cat", "") == "kernel" && e["args"]["correlation"] == correlation) kernel_us = e["dur"].get<double>();
  ASSERT_GT(kernel_us, 0);

  CliResult r = run_memsim("trace '" + et + "' --kineto '" + kineto + "' -o -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  bool found = false;
  const json imported = json::parse(r.out);
  for (const auto& op : imported["ops"])
    if (op["name"] == "[param|torch.add|0|0|0|warmup|forward]/aten::add#36") {  // in PARAM's record_function
      found = true;
      EXPECT_DOUBLE_EQ(op["measured_s"].get<double>(), kernel_us * 1e-6);
    }
  EXPECT_TRUE(found);
  EXPECT_NE(r.err.find("6 of 6 ops joined on rf_id = \"External id\""), std::string::npos) << r.err;

  // The run uses them (asked for with --kineto) and says how many.
  const std::string out = std::string(::testing::TempDir()) + "memsim_kineto_" + std::to_string(::getpid());
  r = run_memsim("run a100-40gb '" + et + "' --kineto '" + kineto + "' --out '" + out + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json s = json::parse(r.out);
  EXPECT_EQ(s["durations"]["measured_ops"], 6);
  EXPECT_EQ(s["durations"]["modelled_ops"], 0);
  EXPECT_EQ(s["import_notes"].size(), 2u);
  r = run_memsim("run a100-40gb '" + et + "' --kineto '" + kineto + "' --durations model --out '" + out + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  s = json::parse(r.out);
  EXPECT_EQ(s["durations"]["measured_ops"], 0);
  EXPECT_EQ(s["durations"]["modelled_ops"], 6);
  fs::remove_all(out);
}

// The import options on the command line, on files of this repository.
TEST(ImportOptions, StepKinetoAndDurationsOnTheCommandLine) {
  CliResult r = run_memsim("info tests/data/et/ddp_two_steps-2.x.json --step 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["ops"], 9);
  r = run_memsim("info tests/data/et/ddp_two_steps-2.x.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.rfind("memsim: importing ddp_two_steps-2.x: 2 notes\n  - imported ProfilerStep#2 of 2", 0), 0u) << r.err;
  const std::string out = std::string(::testing::TempDir()) + "memsim_import_cli_" + std::to_string(::getpid());
  r = run_memsim("run a100-40gb tests/data/et/ddp_two_steps-2.x.json --out '" + out + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s = json::parse(r.out);
  EXPECT_EQ(s["import_notes"].size(), 2u);
  EXPECT_EQ(s["durations"]["modelled_ops"], 7);  // the file measured none
  fs::remove_all(out);

  r = run_memsim("run a100-40gb resnet50 --step 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memsim: --step 1: only a PyTorch Execution Trace has ProfilerSteps and Kineto times; resnet50 is "
                   "none\n");
  r = run_memsim("run a100-40gb tests/data/et/nested-1.0.json --step 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tests/data/et/nested-1.0.json: --step 2: the trace marks no ProfilerStep (it is one step)\n");
  r = run_memsim("run a100-40gb tests/data/et/ddp_two_steps-2.x.json --kineto tests/data/et/step-1.1.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--kineto tests/data/et/step-1.1.json: not a Kineto trace (expected torch.profiler's JSON with "
                   "traceEvents; this is an Execution Trace: pass it as the workload)\n");
  r = run_memsim("run a100-40gb tests/data/et/ddp_two_steps-2.x.json --durations guessed");
  EXPECT_EQ(r.exit_code, 2);
}
