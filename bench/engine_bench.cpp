// Engine throughput: simulated ops per second of wall time.
//
//   BM_BareSimGrid      one actor doing one `execute` per op: SimGrid's own floor
//   BM_EngineChain      memsim simulating an N-layer chain (forward, backward, update) under
//                       `none`, recording the timeline and the memory curve as `memsim run` does
//   BM_SwapLruResNet50  ResNet-50 at batch 256 in fp32 on a V100-16GB under `swap-lru`: the
//                       run swaps on demand over PCIe (the swapping issue asks under 1 s);
//                       the counter `under_1s` is 1 when every iteration took less
//
// SimGrid's engine is a process singleton, so each iteration runs in a forked child that
// reports its own elapsed time through a pipe (manual timing; fork and trace generation are
// not counted). Run: ./build/memsim_bench  (or make bench)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <unistd.h>
#include <sys/wait.h>

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include "sim/inputs/inputs.h"
#include "sim/core/config.h"
#include "sim/run/run.h"
#include "sim/policy/policy.h"
#include "sim/workload/workload.h"

namespace {

// Runs `body` in a child process and returns the seconds it measured (negative on failure).
double timed_in_child(const std::function<double()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    double seconds = body();
    if (write(fds[1], &seconds, sizeof seconds) != sizeof seconds) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  double seconds = -1;
  if (read(fds[0], &seconds, sizeof seconds) != sizeof seconds) seconds = -1;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return seconds;
}

memsim::Trace chain_trace(std::int64_t layers) {
  auto spec = memsim::ConfigNode::parse_text(
      "model: chain\nlayers: " + std::to_string(layers) + "\nwidth: 128\nbatch: 32\n", "bench");
  return memsim::generate_workload(spec);
}

void BM_BareSimGrid(benchmark::State& state) {
  const auto ops = static_cast<std::size_t>(chain_trace(state.range(0)).ops.size());
  for (auto _ : state) {
    double s = timed_in_child([ops] {
      auto t0 = std::chrono::steady_clock::now();
      int argc = 1;
      char name[] = "bench";
      char* argv[] = {name, nullptr};
      xbt_log_control_set("root.thres:warning");
      simgrid::s4u::Engine e(&argc, argv);
      auto* zone = simgrid::s4u::create_full_zone("z");
      auto* host = zone->create_host("gpu0", 1e9);
      zone->seal();
      simgrid::s4u::Actor::create("stream", host, [ops] {
        for (std::size_t i = 0; i < ops; ++i) simgrid::s4u::this_actor::execute(1e4);
      });
      e.run();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    if (s < 0) state.SkipWithError("child failed");
    state.SetIterationTime(s);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_EngineChain(benchmark::State& state) {
  const memsim::Trace trace = chain_trace(state.range(0));
  const memsim::PlatformSpec platform = memsim::load_platform_arg("a100-40gb", {});
  const auto* info = memsim::find_policy("none");
  for (auto _ : state) {
    double s = timed_in_child([&] {
      auto t0 = std::chrono::steady_clock::now();
      auto node = memsim::ConfigNode::parse_text("{}", "bench");
      auto policy = info->create(memsim::Params(node, info->params, "policy none"));
      memsim::Recorder recorder;
      auto summary = memsim::simulate(platform, trace, *policy, recorder);
      if (summary.status != "ok" || summary.ops_run != trace.ops.size()) return -1.0;
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    if (s < 0) state.SkipWithError("child failed or the chain did not run to completion");
    state.SetIterationTime(s);
  }
  state.counters["ops"] = static_cast<double>(trace.ops.size());
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(trace.ops.size()),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}

void BM_SwapLruResNet50(benchmark::State& state) {
  auto spec = memsim::ConfigNode::parse_text("model: resnet\ndepth: 50\nbatch: 256\n", "bench");
  const memsim::Trace trace = memsim::generate_workload(spec);
  const memsim::PlatformSpec platform = memsim::load_platform_arg("v100-16gb", {});
  const auto* info = memsim::find_policy("swap-lru");
  double slowest = 0;
  for (auto _ : state) {
    double s = timed_in_child([&] {
      auto t0 = std::chrono::steady_clock::now();
      auto node = memsim::ConfigNode::parse_text("{}", "bench");
      auto policy = info->create(memsim::Params(node, info->params, "policy swap-lru"));
      memsim::Recorder recorder;
      auto summary = memsim::simulate(platform, trace, *policy, recorder);
      if (summary.status != "ok" || summary.swap_out_bytes == 0) return -1.0;
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    if (s < 0) state.SkipWithError("child failed, the run did not fit, or nothing was swapped");
    slowest = std::max(slowest, s);
    state.SetIterationTime(s);
  }
  state.counters["ops"] = static_cast<double>(trace.ops.size());
  state.counters["under_1s"] = slowest < 1.0 ? 1 : 0;
}

}  // namespace

BENCHMARK(BM_BareSimGrid)->Arg(20000)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_EngineChain)->Arg(20000)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_SwapLruResNet50)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_MAIN();
