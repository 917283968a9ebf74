// A sweep split across "machines": three shards through GNU parallel, and a 3-task Slurm job
// array of scripts/slurm/sweep.sbatch on a private one-node cluster started here
// (scripts/slurm/local-cluster.sh). Either way the merged results.csv must equal a local
// run's byte for byte. Each test skips, saying what is missing, where its tools are not
// installed (`make slurm-test` installs Slurm and runs both).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_cluster_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

bool on_path(const std::string& program) {
  return std::system(("command -v " + program + " > /dev/null 2>&1").c_str()) == 0;
}

// Runs a shell command in the source tree; returns its exit code and output (both streams).
int shell(const std::string& command, std::string* output = nullptr) {
  const std::string cmd = "cd '" + std::string(MEMSIM_SOURCE_DIR) + "' && { " + command + "; } 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string sweep_file(const std::string& dir) {
  const std::string path = dir + "/cluster.yaml";
  std::ofstream(path) << "devices: [a100-40gb]\n"
                         "workloads: [mlp, chain]\n"
                         "policies: [none, keep-all]\n"
                         "set:\n"
                         "  workload.batch: [16, 32, 64]\n";
  return path;
}

// The reference: the same sweep on this machine in one process.
std::string local_results(const std::string& sweep, const std::string& dir) {
  CliResult r = run_memsim("sweep " + sweep + " -j 2 --out " + dir + "/local");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return slurp(dir + "/local/results.csv");
}

}  // namespace

TEST(SweepParallel, GnuParallelShardsMergeToTheLocalRun) {
  if (!on_path("parallel"))
    GTEST_SKIP() << "GNU parallel is not installed (scripts/install-deps.sh installs it)";
  const std::string dir = temp_dir("parallel");
  const std::string sweep = sweep_file(dir);
  const std::string reference = local_results(sweep, dir);
  std::string out;
  ASSERT_EQ(shell(fmt::format("parallel --will-cite '{}' sweep {} -j 1 --shard {{}}/3 --out {}/shard-{{}} ::: 1 2 3",
                              MEMSIM_BINARY, sweep, dir),
                  &out),
            0)
      << out;
  ASSERT_EQ(shell(fmt::format("'{}' sweep {} --merge {}/shard-* --out {}/merged", MEMSIM_BINARY, sweep, dir, dir), &out), 0)
      << out;
  EXPECT_NE(out.find("merged 12 of 12 points from 3 folders"), std::string::npos) << out;
  EXPECT_EQ(slurp(dir + "/merged/results.csv"), reference);
}

TEST(SweepSlurm, ThreeTaskArrayMergesToTheLocalRun) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "starting slurmctld and slurmd needs root (run `make slurm-test` as root)";
  for (const char* program : {"sbatch", "sinfo", "slurmctld", "slurmd", "munged"})
    if (!on_path(program))
      GTEST_SKIP() << program << " is not installed: Debian's slurm-wlm and munge are needed "
                   << "(`make slurm-test` installs them)";
  const std::string dir = temp_dir("slurm");
  const std::string sweep = sweep_file(dir);
  const std::string reference = local_results(sweep, dir);

  std::string out;
  ASSERT_EQ(shell("scripts/slurm/local-cluster.sh start " + dir + "/cluster", &out), 0) << out;
  struct Stop {
    std::string dir;
    ~Stop() { shell("scripts/slurm/local-cluster.sh stop " + dir + "/cluster"); }
  } stop{dir};
  const std::string env = fmt::format("SLURM_CONF={}/cluster/slurm.conf MEMSIM='{}' ", dir, MEMSIM_BINARY);

  // The array: each task runs its shard (from SLURM_ARRAY_TASK_ID / _COUNT) into its folder.
  ASSERT_EQ(shell(env + fmt::format("timeout 300 sbatch --wait --cpus-per-task=1 --array=0-2 "
                                    "--output={}/task-%a.out scripts/slurm/sweep.sbatch {} {}/slurm",
                                    dir, sweep, dir),
                  &out),
            0)
      << "sbatch --array (exit 124: still waiting after 300 s, killed by timeout)\n"
      << out << slurp(dir + "/cluster/slurmctld.log");
  for (int task = 0; task < 3; ++task) {
    const std::string log = slurp(fmt::format("{}/task-{}.out", dir, task));
    EXPECT_NE(log.find(fmt::format("shard {}/3 from SLURM_ARRAY_TASK_ID={} (4 of 12 points)", task + 1, task)),
              std::string::npos)
        << log;
  }
  // The same script without --array merges.
  ASSERT_EQ(shell(env + fmt::format("timeout 300 sbatch --wait --cpus-per-task=1 --output={}/merge.out "
                                    "scripts/slurm/sweep.sbatch {} {}/slurm",
                                    dir, sweep, dir),
                  &out),
            0)
      << "sbatch, the merge (exit 124: still waiting after 300 s, killed by timeout)\n"
      << out << slurp(dir + "/merge.out");
  EXPECT_NE(slurp(dir + "/merge.out").find("merged 12 of 12 points from 3 folders"), std::string::npos)
      << slurp(dir + "/merge.out");
  EXPECT_EQ(slurp(dir + "/slurm/results.csv"), reference);
}
