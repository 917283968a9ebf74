#pragma once
// `memsim sweep`: list, run (in parallel child processes, resumable, sharded) and merge.
#include <string>
#include <vector>

namespace memsim {

struct SweepOptions {
  std::string file;
  std::string out_dir;   // empty: out/<the sweep file's stem>
  int jobs = 0;          // 0: one per CPU this process may use
  bool list = false;     // print the points and stop
  bool force = false;    // rerun finished points
  int shard = 0;         // 1-based; 0: all points, or Slurm's array task when in one
  int shards = 0;
  std::vector<std::string> merge;  // join these folders' results into out_dir
  std::string memsim;    // the executable that runs points
};

/// Runs the command; returns the exit code (0 done, 1 bad input or failed points,
/// 130/143 interrupted). Messages go to stderr, the summary to stdout.
int sweep_command(const SweepOptions& options);

/// Worker count: `requested`, else SLURM_CPUS_PER_TASK, else the CPUs this process may use.
int default_jobs(int requested);

/// A Slurm array task's shard (1-based) and shard count from its environment, when set.
bool shard_from_slurm(int* shard, int* shards, std::string* origin);

/// "I/N" -> (I, N); UsageError when malformed or out of range.
void parse_shard(const std::string& text, int* shard, int* shards);

}  // namespace memsim
