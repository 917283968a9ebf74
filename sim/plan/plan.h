#pragma once
// `memsim plan PLATFORM MODEL` (docs/plan.md): the fastest layouts that fit, found by branch
// and bound over every valid layout and proven by simulation.
//
//   1. enumerate_layouts(), each checked by generating the model (PlanBounds);
//   2. layouts whose memory bound passes the GPU's capacity are rejected unsimulated;
//   3. the rest, in order of their time bound, run as `memsim run` child processes through
//      the sweep's PointStore (OUT/points/<id>/: resumable, shared by shards), until the next
//      bound exceeds the top-th best simulated step time: no layout left can be faster.
//
// The top layouts do not depend on the order runs finish in, on -j or on shards: a layout is
// skipped only when its bound, hence its time, exceeds a step time already simulated.
// OUT/results.csv lists every valid layout in bound order with what became of it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/inputs/inputs.h"

namespace memsim {

struct PlanOptions {
  std::string platform, workload;
  std::vector<std::string> sets;     // --set, as for run (not the keys a layout sets)
  std::uint32_t gpus = 0;            // 0: every GPU of the platform
  std::int64_t global_batch = 0;     // 0: the GPUs (one sample each)
  std::int64_t seq_len = 0;          // 0: the workload's
  std::uint32_t max_tp = 0;          // 0: the GPUs of one node
  std::uint32_t max_pp = 0;          // 0: no limit but the layers
  std::uint32_t max_micro_batch = 16;
  std::string zero = "0,1,2,3";
  std::string recompute = "none,selective,full";
  std::string virtual_stages = "2";
  bool offload = false;
  bool hsdp = false;                 // also zero 3 sharded within each node (HSDP)
  int top = 10;
  int jobs = 0;
  int shard = 0, shards = 0;         // 1-based; 0: all
  std::string out_dir = "out/plan";
  bool exhaustive = false;           // simulate every valid layout, no pruning
  bool force = false;
  std::string memsim;                // the executable that runs layouts
  bool quiet = false;                // print nothing (the OOM advice's search)
};

/// The fastest layout that fits, as the search proved it.
struct PlanBest {
  std::string layout;              // Layout::text()
  std::string policy;              // none, or zero-offload
  std::vector<std::string> sets;   // the KEY=VALUE overrides that make it
  double time_s = 0;
  double mfu = -1;                 // -1: not known
  std::uint64_t peak_bytes = 0;    // the fullest compute tier's
  std::string point;               // the folder of its run
};

/// Runs the command; 0 done, 1 bad input or failed runs, 130/143 interrupted. With `best`,
/// the fastest layout that fits goes there (nullopt when none does).
int plan_command(const PlanOptions& options, std::optional<PlanBest>* best = nullptr);

/// Whether each layout of the search sets this key itself (a --set of it is refused).
bool plan_sets_key(const Override& o);

}  // namespace memsim
