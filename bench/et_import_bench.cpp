// Importing traces.
//  - A 7 MB Execution Trace in under 2 s (issue 5). The file is made here, in the shape torch
//    1.13's observer writes (schema 1.0.1): layer after layer of aten::linear (t -> transpose
//    -> as_strided views, addmm with its expand, copy_ and resolve_conj children) and
//    aten::relu (clamp_min), then a backward mm per layer under autograd's wrappers, then an
//    SGD step of in-place adds.
//  - Real traces (issue 13), from ../shared/validation/external where it is: PARAM's
//    hf_GPT2_et (24 MB of JSON in a .tar.gz) in under 1 s and 200 MB of memory, unpacking
//    included; its 21 MB Kineto trace (linear_kineto.json.gz) in under 2 s. Memory is the
//    peak resident set of a child process that does only the import.
// An import over its bound fails.
//
// Run: ./build/memsim_et_import_bench
#include <benchmark/benchmark.h>

#include <functional>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "sim/workload/importers/archive.h"
#include "sim/workload/importers/kineto.h"
#include "sim/workload/importers/pytorch_et.h"

namespace {

class EtWriter {
 public:
  std::int64_t next() { return ++id_; }
  void node(std::int64_t id, const std::string& name, std::int64_t parent, const std::string& schema,
            const std::string& inputs, const std::string& input_shapes, const std::string& input_types,
            const std::string& outputs, const std::string& output_shapes, const std::string& output_types) {
    text_ += fmt::format(
        "{}    {{\"name\": \"{}\", \"id\": {}, \"rf_id\": {}, \"parent\": {}, \"fw_parent\": 0, \"seq_id\": -1, "
        "\"scope\": 0, \"tid\": 1, \"fw_tid\": 0, \"op_schema\": \"{}\", \"inputs\": {}, \"input_shapes\": {}, "
        "\"input_types\": {}, \"outputs\": {}, \"output_shapes\": {}, \"output_types\": {}}}",
        first_ ? "" : ",\n", name, id, id, parent, schema, inputs, input_shapes, input_types, outputs,
        output_shapes, output_types);
    first_ = false;
  }
  std::string finish() {
    return "{\n  \"schema\": \"1.0.1\", \"pid\": 1, \"time\": \"2026-01-01 00:00:00\", \"start_ts\": 0,\n"
           "  \"nodes\": [\n" + text_ + "\n  ],\n  \"finish_ts\": 1\n}\n";
  }
  std::size_t size() const { return text_.size(); }

 private:
  std::int64_t id_ = 10;
  bool first_ = true;
  std::string text_;
};

std::string tensor(std::int64_t t, std::int64_t s, std::int64_t numel) {
  return fmt::format("[{}, {}, 0, {}, 4, \"cpu\"]", t, s, numel);
}

std::string make_et(std::size_t target_bytes) {
  EtWriter w;
  const std::int64_t thread = 2;
  w.node(thread, "[pytorch|profiler|execution_graph|thread]", 1, "", "[]", "[]", "[]", "[]", "[]", "[]");
  const int width = 256, batch = 32;
  std::int64_t x_t = w.next(), x_s = w.next();
  std::vector<std::pair<std::int64_t, std::int64_t>> weights, activations;
  while (w.size() < target_bytes * 3 / 4) {
    const std::int64_t wt = w.next(), ws = w.next(), bt = w.next(), bs = w.next();
    weights.emplace_back(wt, ws);
    const std::int64_t lin = w.next(), t = w.next(), tv = w.next(), mm = w.next(), ot = w.next(), os = w.next();
    const std::string x = tensor(x_t, x_s, batch * width), wgt = tensor(wt, ws, width * width),
                      bias = tensor(bt, bs, width), out = tensor(ot, os, batch * width);
    w.node(lin, "aten::linear", thread, "aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
           fmt::format("[{}, {}, {}]", x, wgt, bias), "[[32, 256], [256, 256], [256]]",
           "[\"Tensor(float)\", \"Tensor(float)\", \"Tensor(float)\"]", fmt::format("[{}]", out), "[[32, 256]]",
           "[\"Tensor(float)\"]");
    w.node(t, "aten::t", lin, "aten::t(Tensor(a) self) -> Tensor(a)", fmt::format("[{}]", wgt), "[[256, 256]]",
           "[\"Tensor(float)\"]", fmt::format("[{}]", tensor(tv, ws, width * width)), "[[256, 256]]", "[\"Tensor(float)\"]");
    const std::int64_t tr = w.next(), as = w.next();
    w.node(tr, "aten::transpose", t, "aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
           fmt::format("[{}, 0, 1]", wgt), "[[256, 256], [], []]", "[\"Tensor(float)\", \"Int\", \"Int\"]",
           fmt::format("[{}]", tensor(tv, ws, width * width)), "[[256, 256]]", "[\"Tensor(float)\"]");
    w.node(as, "aten::as_strided", tr, "aten::as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)",
           fmt::format("[{}, [256, 256], [1, 256], \"<None>\"]", wgt), "[[256, 256], [[], []], [[], []], []]",
           "[\"Tensor(float)\", \"GenericList[Int,Int]\", \"GenericList[Int,Int]\", \"None\"]",
           fmt::format("[{}]", tensor(tv, ws, width * width)), "[[256, 256]]", "[\"Tensor(float)\"]");
    w.node(mm, "aten::addmm", lin, "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
           fmt::format("[{}, {}, {}, 1, 1]", bias, x, tensor(tv, ws, width * width)), "[[256], [32, 256], [256, 256], [], []]",
           "[\"Tensor(float)\", \"Tensor(float)\", \"Tensor(float)\", \"Int\", \"Int\"]", fmt::format("[{}]", out),
           "[[32, 256]]", "[\"Tensor(float)\"]");
    const std::int64_t ex = w.next(), et = w.next(), cp = w.next(), rc = w.next();
    w.node(ex, "aten::expand", mm, "aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
           fmt::format("[{}, [32, 256], false]", bias), "[[256], [[], []], []]",
           "[\"Tensor(float)\", \"GenericList[Int,Int]\", \"Bool\"]", fmt::format("[{}]", tensor(et, bs, batch * width)),
           "[[32, 256]]", "[\"Tensor(float)\"]");
    w.node(cp, "aten::copy_", mm, "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
           fmt::format("[{}, {}, false]", out, tensor(et, bs, batch * width)), "[[32, 256], [32, 256], []]",
           "[\"Tensor(float)\", \"Tensor(float)\", \"Bool\"]", fmt::format("[{}]", out), "[[32, 256]]", "[\"Tensor(float)\"]");
    w.node(rc, "aten::resolve_conj", mm, "aten::resolve_conj(Tensor(a) self) -> Tensor(a)", fmt::format("[{}]", x),
           "[[32, 256]]", "[\"Tensor(float)\"]", fmt::format("[{}]", x), "[[32, 256]]", "[\"Tensor(float)\"]");
    const std::int64_t relu = w.next(), cm = w.next(), rt = w.next(), rs = w.next();
    const std::string r = tensor(rt, rs, batch * width);
    w.node(relu, "aten::relu", thread, "aten::relu(Tensor self) -> Tensor", fmt::format("[{}]", out), "[[32, 256]]",
           "[\"Tensor(float)\"]", fmt::format("[{}]", r), "[[32, 256]]", "[\"Tensor(float)\"]");
    w.node(cm, "aten::clamp_min", relu, "aten::clamp_min(Tensor self, Scalar min) -> Tensor", fmt::format("[{}, 0]", out),
           "[[32, 256], []]", "[\"Tensor(float)\", \"Int\"]", fmt::format("[{}]", r), "[[32, 256]]", "[\"Tensor(float)\"]");
    activations.emplace_back(ot, os);
    x_t = rt;
    x_s = rs;
  }
  // Backward: one mm per layer, last layer first, under autograd's wrappers.
  for (std::size_t k = activations.size(); k-- > 0;) {
    const std::int64_t eval = w.next(), fn = w.next(), mm = w.next(), gt = w.next(), gs = w.next();
    w.node(eval, "autograd::engine::evaluate_function: MmBackward0", thread, "", "[]", "[]", "[]", "[]", "[]", "[]");
    w.node(fn, "MmBackward0", eval, "", "[]", "[]", "[]", "[]", "[]", "[]");
    w.node(mm, "aten::mm", fn, "aten::mm(Tensor self, Tensor mat2) -> Tensor",
           fmt::format("[{}, {}]", tensor(activations[k].first, activations[k].second, batch * width),
                       tensor(x_t, x_s, batch * width)),
           "[[256, 32], [32, 256]]", "[\"Tensor(float)\", \"Tensor(float)\"]", fmt::format("[{}]", tensor(gt, gs, width * width)),
           "[[256, 256]]", "[\"Tensor(float)\"]");
    const std::int64_t acc = w.next();
    w.node(acc, "torch::autograd::AccumulateGrad", thread, "", fmt::format("[{}]", tensor(gt, gs, width * width)),
           "[[256, 256]]", "[\"Tensor(float)\"]", "[]", "[]", "[]");
    weights[k] = {gt, gs};  // the optimizer reads the gradient below
  }
  const std::int64_t step = w.next();
  w.node(step, "Optimizer.step#SGD.step", thread, "", "[]", "[]", "[]", "[]", "[]", "[]");
  for (const auto& [gt, gs] : weights) {
    const std::int64_t add = w.next();
    w.node(add, "aten::add_", step, "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
           fmt::format("[{}, {}, -0.1]", tensor(w.next(), w.next(), width * width), tensor(gt, gs, width * width)),
           "[[256, 256], [256, 256], []]", "[\"Tensor(float)\", \"Tensor(float)\", \"Double\"]", "[]", "[]", "[]");
  }
  return w.finish();
}

void BM_ImportExecutionTrace7MB(benchmark::State& state) {
  const std::string text = make_et(7 << 20);  // the backward and the step add the rest
  std::size_t ops = 0, buffers = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    memsim::Trace trace = memsim::import_pytorch_et(text, "bench.et.json");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ops = trace.ops.size();
    buffers = trace.buffers.size();
    benchmark::DoNotOptimize(trace.ops.data());
    if (s > 2.0) {
      state.SkipWithError("importing the 7 MB Execution Trace took more than 2 s");
      break;
    }
  }
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["buffers"] = static_cast<double>(buffers);
}
BENCHMARK(BM_ImportExecutionTrace7MB)->Unit(benchmark::kMillisecond);

std::string external(const std::string& relative) {
  return std::string(MEMSIM_SOURCE_DIR) + "/../shared/validation/external/" + relative;
}

// Peak resident set, in MB, of a child process that runs `work` and exits.
double child_peak_rss_mb(const std::function<void()>& work) {
  const pid_t pid = fork();
  if (pid == 0) {
    work();
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    _exit(static_cast<int>(std::min<long>(u.ru_maxrss / 1024, 255)));  // MB fit an exit code
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void BM_ImportHfGpt2(benchmark::State& state) {
  const std::string path = external("facebookresearch-param@1e115ff/et_replay/tests/inputs/hf_GPT2_et.json.tar.gz");
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("../shared/validation/external is absent: no hf_GPT2_et to import");
    return;
  }
  auto import = [&] {
    memsim::TraceFile f = memsim::read_trace_file(path);
    return memsim::import_pytorch_et_with_origins(f.bytes, f.source, "hf_GPT2_et").trace;
  };
  std::size_t ops = 0, bytes = memsim::read_trace_file(path).bytes.size();
  double worst = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    memsim::Trace trace = import();
    worst = std::max(worst, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    ops = trace.ops.size();
    benchmark::DoNotOptimize(trace.ops.data());
  }
  const double rss = child_peak_rss_mb([&] { benchmark::DoNotOptimize(import().ops.size()); });
  state.counters["MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["peak_rss_MB"] = rss;
  state.counters["slowest_s"] = worst;
  if (worst > 1.0) state.SkipWithError("importing hf_GPT2_et took more than 1 s");
  if (rss > 200 || rss < 0) state.SkipWithError("importing hf_GPT2_et took more than 200 MB of memory");
}
BENCHMARK(BM_ImportHfGpt2)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_ReadKineto21MB(benchmark::State& state) {
  const std::string path = external("facebookresearch-param@1e115ff/et_replay/tests/inputs/linear_kineto.json.gz");
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("../shared/validation/external is absent: no linear_kineto to read");
    return;
  }
  std::size_t bytes = 0, cpu_ops = 0;
  double worst = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    memsim::TraceFile f = memsim::read_trace_file(path);
    const memsim::KinetoTimes k = memsim::read_kineto(f.bytes, f.source);
    worst = std::max(worst, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    bytes = f.bytes.size();
    cpu_ops = k.cpu_ops;
  }
  state.counters["MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["cpu_ops"] = static_cast<double>(cpu_ops);
  state.counters["slowest_s"] = worst;
  if (worst > 2.0) state.SkipWithError("reading the 21 MB Kineto trace took more than 2 s");
}
BENCHMARK(BM_ReadKineto21MB)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
