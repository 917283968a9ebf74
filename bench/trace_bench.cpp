// The run's timeline trace: how long each format takes to build, and its size, for the
// 20,000-layer chain (80,001 ops) under `none`, recorded as `memsim run` records it.
//
//   BM_TraceLayout   what both share: the items in time order, copy engines (TraceLayout)
//   BM_TraceJson     trace.json (chrome_trace_json)
//   BM_TracePftrace  trace.pftrace (perfetto_trace)
//
// The chain is simulated once (SimGrid's engine is a process singleton); each iteration
// builds the whole file in memory from the recorder, without writing it.
// Run: ./build/memsim_trace_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>

#include "sim/core/config.h"
#include "sim/inputs/inputs.h"
#include "sim/policy/policy.h"
#include "sim/report/chrome_trace.h"
#include "sim/report/perfetto_trace.h"
#include "sim/report/trace_layout.h"
#include "sim/run/run.h"
#include "sim/workload/workload.h"

namespace {

struct ChainRun {
  memsim::PlatformSpec platform;
  memsim::Trace trace;
  memsim::Recorder recorder;
  memsim::Summary summary;
};

const ChainRun& chain_run() {
  static const ChainRun* run = [] {
    auto* r = new ChainRun;
    r->platform = memsim::load_platform_arg("a100-40gb", {});
    r->trace = memsim::generate_workload(
        memsim::ConfigNode::parse_text("model: chain\nlayers: 20000\nwidth: 128\nbatch: 32\n", "bench"));
    const auto* info = memsim::find_policy("none");
    auto node = memsim::ConfigNode::parse_text("{}", "bench");
    auto policy = info->create(memsim::Params(node, info->params, "policy none"));
    r->summary = memsim::simulate(r->platform, r->trace, *policy, r->recorder);
    if (r->summary.status != "ok") {
      std::cerr << "trace_bench: the chain did not run to completion\n";
      std::exit(1);
    }
    return r;
  }();
  return *run;
}

template <typename Build>
void bench_trace(benchmark::State& state, Build build, bool counts_bytes = true) {
  const ChainRun& r = chain_run();
  std::size_t bytes = 0;
  for (auto _ : state) {
    bytes = build(r);
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["ops"] = static_cast<double>(r.trace.ops.size());
  if (!counts_bytes) return;
  state.counters["MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["bytes_per_op"] = static_cast<double>(bytes) / static_cast<double>(r.trace.ops.size());
}

void BM_TraceLayout(benchmark::State& state) {
  bench_trace(state, [](const ChainRun& r) {
    return memsim::TraceLayout(r.recorder.events(), r.recorder.samples(), r.summary, r.trace, r.platform,
                               memsim::kDefaultMaxTraceEvents)
        .kept();
  }, false);
}

void BM_TraceJson(benchmark::State& state) {
  bench_trace(state, [](const ChainRun& r) {
    return memsim::chrome_trace_json(r.recorder.events(), r.recorder.samples(), r.summary, r.trace,
                                     r.platform, memsim::kDefaultMaxTraceEvents)
        .json.size();
  });
}

void BM_TracePftrace(benchmark::State& state) {
  bench_trace(state, [](const ChainRun& r) {
    return memsim::perfetto_trace(r.recorder.events(), r.recorder.samples(), r.summary, r.trace,
                                  r.platform, memsim::kDefaultMaxTraceEvents)
        .bytes.size();
  });
}

}  // namespace

BENCHMARK(BM_TraceLayout)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_TraceJson)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_TracePftrace)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK_MAIN();
