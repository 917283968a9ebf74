#pragma once
// A workload spec generated as `memsim run` generates it (the model, then its `parallel:`
// section), then replayed in zero time (sim/exec/replay.h): the step's memory under `none`,
// with the residency machine's rules, so that a step whose buffers are freed before their
// last use (a PolicyError) is a finding. SimGrid runs once per process, so the harnesses stop
// short of the engine; the replay applies the same rules.
//
// Bounded, so that libFuzzer's timeout means a hang: a spec whose parallel step would hold
// more than kMostOps op copies (the model's ops times the micro-batches, times the ranks when
// every rank is simulated) is generated without its parallel section only, and a step of
// more ops than that is not replayed. Large layouts are
// the sweep's and the CLI's business (their work bounds), not the parser's.
#include <cstdint>

#include "sim/core/config.h"
#include "sim/core/params.h"
#include "sim/exec/replay.h"
#include "sim/workload/models/models.h"
#include "sim/workload/parallel.h"
#include "sim/workload/workload.h"
#include "fuzz/fuzz.h"

namespace memsim::fuzz {

inline constexpr std::uint64_t kMostRanks = 1u << 12;

inline void generate_and_replay(const ConfigNode& root) {
  if (!is_workload_spec(root)) return;
  const auto section = root.find("parallel");
  if (section && section->is_map()) {
    const ModelInfo* info = find_model(root.at("model").as_string());
    if (!info) return;  // generate_workload's message is the parser harness's business
    // The model's step alone (the generator reads tp and ep from the section itself).
    const Params params(root, info->params, "model " + info->name, {"model", "name", "parallel"});
    const Trace step = info->generate(params);
    std::int64_t batch = 0;
    for (const ParamSpec& ps : info->params)
      if (ps.name == "batch") batch = params.get("batch").as_int();
    const ParallelSettings s = read_parallel_settings(Params(*section, parallel_param_specs(), "parallel"), batch);
    const std::uint64_t ranks = std::uint64_t{s.dp} * s.tp * s.pp;
    const std::uint64_t copies = std::uint64_t{s.micro_batches} * (s.symmetric ? 1 : ranks);
    if (ranks > kMostRanks || step.ops.size() * copies > kMostOps) return;
  }
  const Trace trace = generate_workload(root);
  if (trace.ops.size() <= kMostOps) exec::baseline_peak_bytes(trace);
}

}  // namespace memsim::fuzz
