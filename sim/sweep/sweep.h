#pragma once
// A sweep file (docs/sweeps.md) and the points it stands for.
//
//   devices:   [a100-40gb, h100-80gb]         # presets or files (relative to this file)
//   workloads: [resnet50, bert-base]
//   policies:  [none, keep-all]               # optional; default [none]
//   set:                                      # axes: every combination is a point
//     workload.batch: [32, 64, 128]
//   zip:                                      # optional: groups of axes that vary together
//     - {gpu0.hbm.capacity: [16GiB, 40GiB], pcie0.bandwidth: [16GB/s, 32GB/s]}
//   fit: {axis: batch, slowdown: 1.25}        # optional: the max batch as a column
//
// Points run over devices x workloads x policies x the axes, the last varying fastest. An
// axis applies to the points whose device, workload or policy has what it names (policy.budget
// to the policies that take a budget); elsewhere it is left out, and a point that then repeats
// an earlier one is dropped. Everything that can be checked without running is checked on
// load: unknown keys, empty lists, inputs that do not exist, axes that name nothing.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/limits.h"
#include "sim/inputs/inputs.h"
#include "sim/sweep/resolve.h"

namespace memsim {

/// One entry of `devices`, `workloads` or `policies`.
struct SweepInput {
  std::string name;  // as written in the sweep file: the results' column value
  std::string arg;   // for `memsim run`: a preset or policy name, or the resolved path
};

/// One `set` axis or one member of a `zip` group: a results column.
struct SweepAxis {
  std::string key;                   // "workload.batch", "gpu0.hbm.capacity"
  Override target;                   // its target and key (value unset)
  std::vector<std::string> values;   // as --set values ("64", "16GiB", "[784, 10]")
  std::vector<std::string> origins;  // "file:line:col (key=value)", for messages
  std::vector<bool> on_device, on_workload, on_policy;  // where it applies
};

/// `fit:` — the largest value of a workload parameter that runs without oom (and, with a
/// slowdown, within it of the none policy's best time per unit), as columns.
struct FitSpec {
  std::string axis = "batch";   // a workload parameter: batch, seq_len
  double slowdown = 0;          // 0: no slowdown column; else a factor >= 1
  std::int64_t min = 1, max = 1'000'000;
  std::vector<bool> on_workload;  // which workloads have the parameter
};

struct SweepSpec {
  std::string file;
  std::vector<SweepInput> devices, workloads, policies;
  std::vector<SweepAxis> axes;                       // in column order: set, then zip
  std::vector<std::vector<std::size_t>> dimensions;  // axes varying together, outer first
  std::optional<FitSpec> fit;
  /// The files each point writes (`memsim run --outputs`): by default summary.json only,
  /// what results.csv and the fits read; `outputs: all` keeps every point's full output.
  std::string outputs = "summary";
};

/// Reads and checks a sweep file. Throws InputError with file, line, column and key.
SweepSpec load_sweep(const std::string& path);

struct SweepPoint {
  std::size_t index = 0;  // position in the sweep (after dropping repeats), from 0
  std::size_t device = 0, workload = 0, policy = 0;   // indices into the spec's lists
  std::vector<std::optional<std::string>> values;     // per axis; nullopt where it does not apply
  ResolvedRun run;
  /// With `fit:`, what the fit runs: the point's inputs without its value of the fit axis
  /// (nullopt when its workload has no such parameter).
  std::optional<RunRequest> fit_base;
};

/// The most points a sweep may list or run by default (point_limit() is what applies).
constexpr std::size_t kMostSweepPoints = kDefaultPointLimit;

/// "2 devices x 1 workload x 3 policies x 4 workload.batch": what the points multiply.
std::string shape_text(const SweepSpec& spec);

/// Devices x workloads x policies x each dimension's values, before repeats are dropped;
/// nullopt past 2^64.
std::optional<std::uint64_t> sweep_point_count(const SweepSpec& spec);

/// Every point of the sweep, in order, each resolved (its id; its error if its inputs do not
/// load). `dropped` receives the number of repeats left out. InputError for more points than
/// point_limit() (sim/core/limits.h), counted before any is made: the count and its factors.
std::vector<SweepPoint> expand_sweep(const SweepSpec& spec, Resolver& resolver,
                                     std::size_t* dropped = nullptr);

/// The points of shard `shard` (1-based) of `shards`: every shards-th point from shard-1.
std::vector<const SweepPoint*> shard_points(const std::vector<SweepPoint>& points, int shard,
                                            int shards);

}  // namespace memsim
