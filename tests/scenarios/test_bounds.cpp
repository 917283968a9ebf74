// Bounds wherever input sizes multiply into work (sim/core/limits.h): a run whose step would
// hold more ops than the limit, or a sweep of more points, is refused before the work is
// made, with the keys that made it and the figure, and the limit can be raised. Broken files
// that multiply past the limit are under tests/bad_inputs/ (*too_many*).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_bounds_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

constexpr const char* kRaise = "(raise it with --max-ops N or MEMSIM_MAX_OPS=N)";

}  // namespace

TEST(OpLimit, CopiesOfAStepPerDeviceAreRefusedBeforeTheyAreMadeAndTheLimitCanBeRaised) {
  const std::string out = temp_dir("copies");
  const std::string run = "run dgx-h100 chain --set workload.layers=1000 --outputs summary --out " + out;
  const std::string message = std::string("chain: 8 copies of a step of 4001 ops, one per compute device of platform "
                                          "dgx-h100, make about 32008 ops; the limit is 20000 ") +
                              kRaise + "; --devices runs it on fewer\n";
  CliResult r = run_memsim(run + " --max-ops 20000");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, message);
  ::setenv("MEMSIM_MAX_OPS", "2e4", 1);
  r = run_memsim(run);
  ::unsetenv("MEMSIM_MAX_OPS");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, message);
  r = run_memsim(run + " --max-ops 40000");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(OpLimit, MicroBatchesAreCountedBeforeTheyAreCopiedAtTheKeyThatSetThem) {
  CliResult r = run_memsim("info mlp --set parallel.micro_batches=4096 --max-ops 1e4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, std::string("--set parallel.micro_batches=4096: parallel.micro_batches: 4096 micro-batches of a step "
                               "of 20 ops, make about 81926 ops; the limit is 10000 ") +
                       kRaise + "\n");
  r = run_memsim("info mlp --set parallel.micro_batches=4096 --max-ops 1e5");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(OpLimit, ALimitThatIsNoCountIsAUsageOrInputError) {
  CliResult r = run_memsim("info mlp --max-ops 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memsim: --max-ops expects a whole number from 1 to 2^53 like 50000000 or 5e7, got '0'\n");
  r = run_memsim("sweep configs/sweeps/policies.yaml --list --max-points 1.5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memsim: --max-points expects a whole number from 1 to 2^53 like 50000000 or 5e7, got '1.5'\n");
  ::setenv("MEMSIM_MAX_OPS", "lots", 1);
  r = run_memsim("info mlp");
  ::unsetenv("MEMSIM_MAX_OPS");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "MEMSIM_MAX_OPS=lots: expected a number of ops from 1 to 2^53, like 1e7\n");
}

TEST(PointLimit, ASweepIsCountedBeforeItIsListedAndTheLimitCanBeRaised) {
  const std::string dir = temp_dir("points");
  const std::string sweep = dir + "/twelve.yaml";
  std::ofstream(sweep) << "devices: [a100-40gb]\nworkloads: [mlp]\nset:\n  workload.batch: [1, 2, 3]\n"
                          "  gpu0.hbm.capacity: [1GiB, 2GiB, 3GiB, 4GiB]\n";
  CliResult r = run_memsim("sweep " + sweep + " --list --max-points 10");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, sweep + ": 12 points (1 device x 1 workload x 1 policy x 3 workload.batch x 4 gpu0.hbm.capacity), "
                           "more than the 10 a sweep may list or run; split it into several sweeps, or raise the "
                           "limit with --max-points N (or MEMSIM_MAX_POINTS=N)\n");
  EXPECT_EQ(r.out, "");
  ::setenv("MEMSIM_MAX_POINTS", "12", 1);
  r = run_memsim("sweep " + sweep + " --list");
  ::unsetenv("MEMSIM_MAX_POINTS");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), sweep + ": 12 points (1 device x 1 workload x 1 policy x 3 workload.batch "
                                                       "x 4 gpu0.hbm.capacity)");
}
