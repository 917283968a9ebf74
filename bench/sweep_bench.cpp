// Sweep overhead: a sweep of 200 small points (mlp at batch 1..200 on an A100-40GB), run as
// `memsim sweep -j J` from scratch; how much of its wall time x workers is spent outside
// the `memsim run` children that simulate (resolving and hashing points, starting
// processes, rewriting results.csv, idle workers at the end). The goal is under 10%.
//
//   build/memsim_sweep_bench [POINTS] [JOBS]      # defaults 200 and 2; prints JSON
//
// For scale it also times `memsim --version` (a process start with nothing to do), the
// part of every child's time that is not simulation either. Exit code 1 when the share
// outside the children reaches 10%.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double run(const std::string& command) {
  const auto start = Clock::now();
  const int status = std::system(command.c_str());
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  if (status != 0) {
    std::cerr << "sweep_bench: failed: " << command << "\n";
    std::exit(2);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int points = argc > 1 ? std::atoi(argv[1]) : 200;
  const int jobs = argc > 2 ? std::atoi(argv[2]) : 2;
  const fs::path dir = fs::temp_directory_path() / ("memsim_sweep_bench_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "bench.yaml");
    f << "devices: [a100-40gb]\nworkloads: [mlp]\nset:\n  workload.batch: [";
    for (int b = 1; b <= points; ++b) f << (b > 1 ? ", " : "") << b;
    f << "]\n";
  }
  const std::string memsim = MEMSIM_BINARY;
  const double wall = run(fmt::format("'{}' sweep '{}' -j {} --out '{}' > /dev/null 2>&1", memsim,
                                      (dir / "bench.yaml").string(), jobs, (dir / "out").string()));
  std::ifstream timing_file(dir / "out" / "timing.json");
  const nlohmann::json timing = nlohmann::json::parse(timing_file);
  const double in_children = timing["child_wall_s"].get<double>();
  const double outside = 1 - in_children / (jobs * wall);

  const int starts = 20;
  double start_s = 0;
  for (int i = 0; i < starts; ++i) start_s += run(fmt::format("'{}' --version > /dev/null", memsim));
  start_s /= starts;

  nlohmann::ordered_json out = {
      {"points", points},
      {"workers", jobs},
      {"wall_s", wall},
      {"child_runs", timing["child_runs"]},
      {"child_wall_s", in_children},
      {"mean_child_s", in_children / std::max(1, timing["child_runs"].get<int>())},
      {"outside_fraction", outside},
      {"process_start_s", start_s},
      {"process_start_fraction_of_child", start_s / (in_children / std::max(1, timing["child_runs"].get<int>()))}};
  std::cout << out.dump(2) << "\n";
  fs::remove_all(dir);
  return outside < 0.10 ? 0 : 1;
}
