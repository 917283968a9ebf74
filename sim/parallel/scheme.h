#pragma once
// Parallel schemes: the ways a training step is split over ranks, each a registered component
// with a name, a line of description and the keys of a workload's `parallel:` section it
// reads, like a policy or a collective algorithm. Two kinds:
//
// - Schemes the model generator carries out (tensor, sequence, context and expert
//   parallelism): they split the layers as the generator emits them, so they have no
//   transform; the generator reads their settings (ModelBuilder).
// - Schemes that transform the generated step (the data-parallel and pipeline ones, and any
//   added later): `apply` turns rank 0's step into rank 0's step under the scheme. Every
//   scheme whose `applies` holds runs, in the registry's order, each on what the ones before
//   it made; the groups a scheme's collectives run over are the Mesh's (sim/parallel/mesh.h).
//
// The built-in ones are listed in sim/parallel/builtin.cpp; `memsim list parallel` prints
// them with their keys; docs/extending.md has the recipe for adding one.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/params.h"
#include "sim/workload/parallel.h"
#include "sim/workload/trace.h"

namespace memsim {

struct ParallelScheme {
  std::string name;
  std::string description;
  /// Its keys of `parallel:`, with their defaults (every scheme's together are the section's
  /// keys; a key no scheme declares is an error located at it).
  std::vector<ParamSpec> params;
  /// Whether the section asks for it. Empty with `apply`: the model generator carries it out.
  std::function<bool(const ParallelSettings&, const Params&)> applies;
  /// Rank 0's step under the scheme. `section` holds every key of `parallel:` (the scheme's
  /// own ones from it with `section.get(KEY)`; a bad value fails at its line); `settings` the
  /// built-in keys as read. An error in the user's input is an InputError (a
  /// ParallelKeyError names the key that causes it).
  std::function<Trace(const Trace& step, const ParallelSettings& settings, const Params& section)> apply;

  /// Whether it is a transform of the step (not carried out by the model generator).
  bool transforms() const { return static_cast<bool>(apply); }
};

/// Every built-in scheme, in the order `memsim list` prints them and the transforms run.
const std::vector<ParallelScheme>& builtin_parallel_schemes();
const ParallelScheme* find_parallel_scheme(std::string_view name);

/// `step` under every scheme of `schemes` whose `applies` holds, in order. `section` holds the
/// `parallel:` section read against every scheme's keys.
Trace apply_parallel_schemes(const Trace& step, const ParallelSettings& settings, const Params& section,
                             const std::vector<ParallelScheme>& schemes = builtin_parallel_schemes());

// One per file under impl/ (the generator's schemes are entries of builtin.cpp alone).
ParallelScheme data_parallel_scheme();
ParallelScheme pipeline_scheme();

}  // namespace memsim
