// DTR on the published DTR simulator's benchmark: a linear chain of N unit-cost, unit-size
// layers (sim/policy/impl/dtr_chain.h), budgets as fractions of the baseline peak (N + 1
// units) or as units.
//
//   memsim_dtr_bench                      google-benchmark: dtr on N = 10,000 at 2 sqrt(N) units
//                                         (the issue asks for under five seconds)
//   memsim_dtr_bench --table [N] [h]      the reproduction table: budgets from 1.0 down to the
//                                         smallest that completes, total compute over the
//                                         baseline, recomputed units, wall time
//   memsim_dtr_bench --check [N]          the DTR simulator's figures at N (default 10,000):
//                                         exit status 1 if dtr exceeds any of them
//   memsim_dtr_bench --simrd-table [N]    against the DTR authors' simulator (simrd) at every
//                                         budget of its figures (sim/policy/impl/dtr_chain.h),
//                                         N = 1,000 and 10,000 or N alone: dtr on simrd's own
//                                         chain at its budget, and on this chain at one unit
//                                         more (it holds t_1, which simrd's chain need not);
//                                         exit status 1 if dtr recomputes more than simrd on
//                                         simrd's chain, or on this one at a published budget
//   memsim_dtr_bench --write-trace N FILE the chain as a native trace, for `memsim run`
//
// SimGrid's engine is a process singleton, so each run happens in a forked child that reports
// through a pipe.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>
#include <sys/wait.h>

#include "sim/core/config.h"
#include "sim/run/run.h"
#include "sim/policy/impl/dtr_chain.h"
#include "sim/policy/policy.h"
#include "sim/workload/trace_io.h"

namespace {

using namespace memsim;

struct Result {
  int ok = 0;             // 1: status ok; 0: oom; -1: the child failed
  double overhead = 0;    // (compute + recompute) / compute
  double recomputed = 0;  // units (ops) recomputed
  double peak_units = 0;
  double wall_s = 0;
};

Result in_child(const std::function<Result()>& body) {
  std::fflush(stdout);  // or the child flushes the parent's buffered lines again
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

Result run_dtr_on(const Trace& trace, std::uint64_t units, const std::string& heuristic) {
  return in_child([&] {
    const auto t0 = std::chrono::steady_clock::now();
    auto node = ConfigNode::parse_text("{heuristic: " + heuristic + "}", "bench");
    const PolicyInfo* info = find_policy("dtr");
    auto policy = info->create(Params(node, info->params, "policy dtr"));
    Recorder recorder;
    const Summary s = simulate(dtr_unit_platform(units * kDtrUnitBytes), trace, *policy, recorder);
    Result r;
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.ok = s.status == "ok" ? 1 : 0;
    r.overhead = (s.compute_time_s + s.recompute_time_s) / s.compute_time_s;
    r.recomputed = s.recompute_flops / kDtrUnitFlops;
    r.peak_units = static_cast<double>(s.tiers[0].usage.peak_allocated_bytes) / kDtrUnitBytes;
    return r;
  });
}

Result run_dtr(std::size_t n, std::uint64_t units, const std::string& heuristic) {
  return run_dtr_on(dtr_unit_chain(n), units, heuristic);
}

std::uint64_t units_at(double fraction, std::size_t n) {
  return static_cast<std::uint64_t>(std::floor(fraction * static_cast<double>(n + 1)));
}

int table(std::size_t n, const std::string& heuristic) {
  std::printf("dtr (h=%s) on a linear chain of N = %zu unit layers; baseline: %zu units of compute, "
              "peak %zu units\n",
              heuristic.c_str(), n, 2 * n, n + 1);
  std::printf("%-12s %8s %10s %8s %12s %10s %9s\n", "budget", "units", "units/sqrtN", "status",
              "compute/base", "recomputed", "wall_s");
  auto row = [&](const std::string& label, std::uint64_t units) {
    const Result r = run_dtr(n, units, heuristic);
    std::printf("%-12s %8llu %10.2f %8s %12.4f %10.0f %9.3f\n", label.c_str(),
                static_cast<unsigned long long>(units), units / std::sqrt(static_cast<double>(n)),
                r.ok == 1 ? "ok" : r.ok == 0 ? "oom" : "failed", r.ok == 1 ? r.overhead : NAN,
                r.ok == 1 ? r.recomputed : NAN, r.wall_s);
    std::fflush(stdout);
    return r.ok == 1;
  };
  for (double f : {1.0, 0.75, 0.5, 0.25, 0.1, 0.05}) row(std::to_string(f).substr(0, 4), units_at(f, n));
  const double root = std::sqrt(static_cast<double>(n));
  for (double k : {4.0, 3.0, 2.0, 1.5, 1.0, 0.5})
    row(std::to_string(k).substr(0, 3) + " sqrtN", static_cast<std::uint64_t>(k * root));
  // Down to the limit: halve, then walk up to the smallest budget that completes.
  std::uint64_t units = static_cast<std::uint64_t>(0.5 * root);
  while (units > 2 && row("", units / 2)) units /= 2;
  for (std::uint64_t u = 2; u < units; ++u)
    if (row("limit?", u)) break;
  return 0;
}

int check(std::size_t n) {
  struct Figure {
    const char* budget;
    std::uint64_t units;
    double published;
  };
  const Figure figures[] = {
      {"0.5", units_at(0.5, n), 1.25},
      {"0.25", units_at(0.25, n), 1.375},
      {"2 sqrt(N)", static_cast<std::uint64_t>(2 * std::sqrt(static_cast<double>(n))), 1.55},
  };
  int failures = 0;
  for (const Figure& f : figures) {
    const Result r = run_dtr(n, f.units, "full");
    // Fewer than N - B + 1 recomputations is impossible (every activation not resident when the
    // forward pass ends, and one more for the first gradient, must be remade once); at a
    // fractional budget that unit is the whole gap to the published asymptotic figure.
    const auto lower_bound = static_cast<double>(n - f.units + 1);
    const bool within = r.ok == 1 && r.overhead <= f.published + 1e-9;
    const bool optimal = r.ok == 1 && r.recomputed <= lower_bound;
    const bool pass = within || optimal;
    std::printf("N=%zu budget %-9s (%llu units): compute/baseline %.5f (published DTR simulator: %.3f) "
                "recomputed %.0f, lower bound %.0f, %.2f s  %s\n",
                n, f.budget, static_cast<unsigned long long>(f.units), r.overhead, f.published,
                r.recomputed, lower_bound, r.wall_s,
                within ? "ok" : optimal ? "ok (the lower bound)" : "OVER");
    failures += pass ? 0 : 1;
  }
  return failures ? 1 : 0;
}

// Like for like: simrd's chain at simrd's budget (the same graph, the same units: every
// resident buffer), and this project's chain at one unit more, which is the same problem: its
// t_1 cannot be remade (the input is freed after f_1) and so holds a unit for the whole step,
// where simrd's t_0 is made from nothing; simrd's last two activations, never read by its
// backward, and its first gradient, made from nothing, cost what b_N reading t_N does here.
int simrd_table(std::size_t only_n) {
  std::printf("%-7s %-12s %6s %12s %12s %10s %10s %12s %10s %9s\n", "N", "budget", "units",
              "simrd", "dtr", "simrd_rc", "dtr_rc", "dtr(B+1)", "rc(B+1)", "wall_s");
  int over = 0;
  for (const SimrdFigure& f : simrd_figures()) {
    if (only_n != 0 && f.layers != only_n) continue;
    const Result same = run_dtr_on(dtr_simrd_chain(f.layers), f.units, "full");
    const Result own = run_dtr(f.layers, f.units + 1, "full");
    const double base = 2.0 * static_cast<double>(f.layers);
    const auto simrd_rc = static_cast<double>(f.recomputed);
    const bool same_over = same.ok != 1 || same.recomputed > simrd_rc;
    const bool own_over = f.published && (own.ok != 1 || own.recomputed > simrd_rc);
    std::printf("%-7zu %-12s %6llu %12.5f %12.5f %10.0f %10.0f %12.5f %10.0f %9.3f  %s\n",
                f.layers, f.budget, static_cast<unsigned long long>(f.units),
                (base + simrd_rc) / base, same.ok == 1 ? same.overhead : NAN, simrd_rc,
                same.ok == 1 ? same.recomputed : NAN, own.ok == 1 ? own.overhead : NAN,
                own.ok == 1 ? own.recomputed : NAN, same.wall_s,
                same_over || own_over ? "OVER"
                : same.recomputed < simrd_rc ? "fewer"
                                             : "same");
    std::fflush(stdout);
    over += same_over || own_over ? 1 : 0;
  }
  return over ? 1 : 0;
}

void BM_DtrChainSqrtBudget(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto units = static_cast<std::uint64_t>(2 * std::sqrt(static_cast<double>(n)));
  Result last;
  for (auto _ : state) {
    last = run_dtr(n, units, "full");
    if (last.ok != 1) state.SkipWithError("dtr did not complete the chain");
    state.SetIterationTime(last.wall_s);
  }
  state.counters["ops"] = static_cast<double>(2 * n + last.recomputed);
  state.counters["compute_over_baseline"] = last.overhead;
  state.counters["budget_units"] = static_cast<double>(units);
}

}  // namespace

BENCHMARK(BM_DtrChainSqrtBudget)->Arg(10000)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--table") == 0)
    return table(argc >= 3 ? std::stoul(argv[2]) : 10000, argc >= 4 ? argv[3] : "full");
  if (argc >= 2 && std::strcmp(argv[1], "--check") == 0)
    return check(argc >= 3 ? std::stoul(argv[2]) : 10000);
  if (argc >= 2 && std::strcmp(argv[1], "--simrd-table") == 0)
    return simrd_table(argc >= 3 ? std::stoul(argv[2]) : 0);
  if (argc == 4 && std::strcmp(argv[1], "--write-trace") == 0) {
    std::ofstream out(argv[3]);
    memsim::write_trace_json(dtr_unit_chain(std::stoul(argv[2])), out);
    return out ? 0 : 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
