// The static recomputation planners: how long planning takes, and what revolve costs on the
// DTR simulator's benchmark chain (sim/policy/impl/dtr_chain.h: N unit-cost, unit-size layers).
//
//   memsim_ckpt_bench                     google-benchmark: revolve planning a 10,000-layer
//                                         chain at 2 sqrt(N) slots, and at a budget of 2 sqrt(N)
//                                         units (the slots searched); checkpoint-sqrt and
//                                         bptt-optimal for scale
//   memsim_ckpt_bench --check [N]         revolve plans N layers (default 10,000) at a
//                                         2 sqrt(N)-unit budget in under a second: exit 1 if not
//   memsim_ckpt_bench --table [N]         revolve on the unit chain at the budgets of the DTR
//                                         comparison: slots chosen, total compute over the
//                                         baseline, units recomputed, peak units, planning
//                                         and simulation time
//
// SimGrid's engine is a process singleton, so each simulation runs in a forked child.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <unistd.h>
#include <sys/wait.h>

#include "sim/core/config.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/engine.h"
#include "sim/run/run.h"
#include "sim/policy/impl/dtr_chain.h"
#include "sim/policy/policy.h"

namespace {

using namespace memsim;

std::unique_ptr<Policy> make(const std::string& name, const std::string& yaml) {
  auto node = ConfigNode::parse_text(yaml, "bench");
  const PolicyInfo* info = find_policy(name);
  return info->create(Params(node, info->params, "policy " + name));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string fmt_budget(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", f);
  return b;
}

// What a planning pass sees, made outside the timed part: the trace's liveness, the cost
// model's durations and the tiers' capacities.
struct Context {
  Context(const Trace& t, const PlatformSpec& p)
      : platform(p), liveness(compute_liveness(t)), durations(op_durations(t, platform)),
        ctx{t, liveness, platform, durations, tier_caps(platform, nullptr, {})} {}
  PlatformSpec platform;
  Liveness liveness;
  std::vector<double> durations;
  PlanningContext ctx;
};

std::uint64_t sqrt_units(std::size_t n) {
  return static_cast<std::uint64_t>(std::llround(2 * std::sqrt(static_cast<double>(n))));
}

// Plans revolve on the unit chain with a tier of `units`; returns the planning seconds.
double plan_revolve(const Trace& t, std::uint64_t units, const std::string& yaml, std::string* label) {
  auto p = make("revolve", yaml);
  const Context c(t, dtr_unit_platform(units * kDtrUnitBytes));
  const auto t0 = std::chrono::steady_clock::now();
  const PlanResult planned = p->plan(c.ctx);
  const double s = seconds_since(t0);
  benchmark::DoNotOptimize(planned.plan.steps.data());
  if (label) *label = planned.label;
  return s;
}

void BM_RevolvePlanSlots(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Trace t = dtr_unit_chain(n);
  for (auto _ : state) {
    state.SetIterationTime(plan_revolve(t, 4 * n, "{slots: " + std::to_string(sqrt_units(n)) + "}", nullptr));
  }
}
BENCHMARK(BM_RevolvePlanSlots)->Arg(10'000)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_RevolvePlanBudget(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Trace t = dtr_unit_chain(n);
  std::string label;
  for (auto _ : state) state.SetIterationTime(plan_revolve(t, sqrt_units(n), "{}", &label));
  state.SetLabel(label);
}
BENCHMARK(BM_RevolvePlanBudget)->Arg(10'000)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_CheckpointSqrtPlan(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Trace t = dtr_unit_chain(n);
  const Context c(t, dtr_unit_platform(4 * n * kDtrUnitBytes));
  for (auto _ : state) {
    auto p = make("checkpoint-sqrt", "{}");
    const auto t0 = std::chrono::steady_clock::now();
    const PlanResult planned = p->plan(c.ctx);
    state.SetIterationTime(seconds_since(t0));
    benchmark::DoNotOptimize(planned.plan.steps.data());
  }
}
BENCHMARK(BM_CheckpointSqrtPlan)->Arg(10'000)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_BpttPlan(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Trace t = dtr_unit_chain(n);
  const Context c(t, dtr_unit_platform(sqrt_units(n) * kDtrUnitBytes));
  for (auto _ : state) {
    auto p = make("bptt-optimal", "{}");
    const auto t0 = std::chrono::steady_clock::now();
    const PlanResult planned = p->plan(c.ctx);
    state.SetIterationTime(seconds_since(t0));
    benchmark::DoNotOptimize(planned.plan.steps.data());
  }
}
BENCHMARK(BM_BpttPlan)->Arg(1'000)->UseManualTime()->Unit(benchmark::kMillisecond);

struct Result {
  int ok = 0;  // 1 ok, 0 oom, -1 failed
  double overhead = 0, recomputed = 0, peak_units = 0, plan_s = 0, sim_s = 0;
  char label[96] = {};
};

Result in_child(const std::function<Result()>& body) {
  std::fflush(stdout);
  int fds[2];
  if (pipe(fds) != 0) return {-1};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Result r = body();
    if (write(fds[1], &r, sizeof r) != sizeof r) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  Result r{-1};
  if (read(fds[0], &r, sizeof r) != sizeof r) r.ok = -1;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return r;
}

Result run_revolve(const Trace& t, std::uint64_t units) {
  return in_child([&] {
    Result r;
    auto p = make("revolve", "{}");
    const Context c(t, dtr_unit_platform(units * kDtrUnitBytes));
    auto t0 = std::chrono::steady_clock::now();
    const PlanResult planned = p->plan(c.ctx);
    r.plan_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    Recorder rec;
    const Summary s = simulate(c.ctx, planned, rec);
    r.sim_s = seconds_since(t0);
    r.ok = s.status == "ok" ? 1 : 0;
    r.overhead = (s.compute_time_s + s.recompute_time_s) / s.compute_time_s;
    r.recomputed = s.recompute_flops / kDtrUnitFlops;
    r.peak_units = static_cast<double>(s.tiers[0].usage.peak_allocated_bytes) / kDtrUnitBytes;
    std::snprintf(r.label, sizeof r.label, "%s", planned.label.c_str());
    return r;
  });
}

int table(std::size_t n) {
  const Trace t = dtr_unit_chain(n);
  const std::uint64_t peak = n + 1;  // the baseline peak, in units
  std::printf("revolve on a %zu-layer unit chain (baseline peak %llu units)\n", n,
              static_cast<unsigned long long>(peak));
  std::printf("%-14s %8s %-34s %12s %10s %8s %8s %8s\n", "budget", "units", "plan", "compute/base",
              "recomputed", "peak", "plan s", "sim s");
  struct Point {
    std::string name;
    std::uint64_t units;
  };
  std::vector<Point> points;
  for (double f : {1.0, 0.75, 0.5, 0.25, 0.1, 0.05})
    points.push_back({fmt_budget(f), static_cast<std::uint64_t>(std::floor(f * static_cast<double>(peak)))});
  points.push_back({"2 sqrt(N)", sqrt_units(n)});
  points.push_back({"sqrt(N)", sqrt_units(n) / 2});
  for (const auto& p : points) {
    const Result r = run_revolve(t, p.units);
    if (r.ok < 0) {
      std::printf("%-14s %8llu (failed)\n", p.name.c_str(), static_cast<unsigned long long>(p.units));
      continue;
    }
    std::printf("%-14s %8llu %-34s %12.5f %10.0f %8.0f %8.3f %8.3f%s\n", p.name.c_str(),
                static_cast<unsigned long long>(p.units), r.label, r.overhead, r.recomputed, r.peak_units,
                r.plan_s, r.sim_s, r.ok ? "" : "  oom");
  }
  return 0;
}

int check(std::size_t n) {
  const Trace t = dtr_unit_chain(n);
  std::string label;
  const double s = plan_revolve(t, sqrt_units(n), "{}", &label);
  std::printf("revolve planned %zu layers at %llu units in %.3f s: %s\n", n,
              static_cast<unsigned long long>(sqrt_units(n)), s, label.c_str());
  return s < 1.0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--table") == 0)
    return table(argc >= 3 ? std::stoul(argv[2]) : 1000);
  if (argc >= 2 && std::strcmp(argv[1], "--check") == 0)
    return check(argc >= 3 ? std::stoul(argv[2]) : 10'000);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
