// SimGrid's floor: one actor doing one `execute` per op, nothing else. `memsim_bare_loop N`
// runs N ops on a 1 Gflop/s host (10 us each) and prints the seconds the simulation itself
// took (engine set-up to the end of run(), process start and exit excluded). bench/run_vs_bare.py
// times it as a process beside `memsim run` of a chain with the same op count.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: memsim_bare_loop OPS\n");
    return 2;
  }
  const long ops = std::atol(argv[1]);
  const auto t0 = std::chrono::steady_clock::now();
  int sg_argc = 1;
  char name[] = "bare_loop";
  char* sg_argv[] = {name, nullptr};
  xbt_log_control_set("root.thres:warning");
  simgrid::s4u::Engine e(&sg_argc, sg_argv);
  auto* zone = simgrid::s4u::create_full_zone("z");
  auto* host = zone->create_host("gpu0", 1e9);
  zone->seal();
  simgrid::s4u::Actor::create("stream", host, [ops] {
    for (long i = 0; i < ops; ++i) simgrid::s4u::this_actor::execute(1e4);
  });
  e.run();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%ld ops in %.6f s\n", ops, s);
  return 0;
}
