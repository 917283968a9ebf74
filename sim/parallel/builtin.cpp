// The registry of parallel schemes (scheme.h): the generator's schemes are entries here, the
// step transforms one function each at the end of the file that implements them.
#include <fmt/format.h>

#include "sim/core/registry.h"
#include "sim/parallel/scheme.h"

namespace memsim {

namespace {

// Tensor, sequence, context and expert parallelism: the model generator splits the layers
// and emits their collectives (sim/workload/models/tensor_parallel.cpp, attention_layer.cpp,
// moe_layer.cpp); the data-parallel or pipeline transform then names the groups.
ParallelScheme tensor_scheme() {
  return {"tensor",
          "Megatron-LM's tensor parallelism: attention and MLP weights split by column then row over tp ranks, "
          "an all-reduce after each pair (with sp: a reduce-scatter and an all-gather); carried out by the model "
          "generator",
          {{"tp", "tensor-parallel ranks (Megatron's column and row split of attention and MLP; TP "
                  "innermost: rank = tp_rank + tp x dp_rank)", "1"},
           {"sp", "sequence parallelism with tp: norms, dropouts and residuals on 1/tp of the tokens, "
                  "reduce-scatter and all-gather in place of all-reduce", "false"},
           {"tp_comm_overlap", "with sp: each all-gather and reduce-scatter, forward and backward, overlaps the GEMMs next to it, "
                               "only about 1/tp of it exposed (Megatron's --tp-comm-overlap, TransformerEngine's "
                               "userbuffers)", "false"}},
          {},
          {}};
}

ParallelScheme context_scheme() {
  return {"context",
          "Megatron's context parallelism (ring attention): every sequence split over cp ranks, k and v passed "
          "around them; carried out by the model generator",
          {{"cp", "context-parallel ranks (Megatron's --context-parallel-size, ring attention): each holds 1/cp of "
                  "every sequence, k and v passed around them in the attention, gradients reduced over dp x cp "
                  "(rank = tp_rank + tp x (cp_rank + cp x dp_rank))", "1"}},
          {},
          {}};
}

ParallelScheme expert_scheme() {
  return {"expert",
          "expert parallelism: a mixture of experts' experts split over ep data-parallel ranks, tokens "
          "dispatched and combined by all-to-all; carried out by the model generator",
          {{"ep", "expert-parallel ranks within each data-parallel group: a mixture of experts' experts split "
                  "over them, tokens dispatched and combined by all-to-all", "1"}},
          {},
          {}};
}

// Not a way of splitting the step but of simulating it: rank 0 alone or every rank.
ParallelScheme ranks_scheme() {
  return {"ranks",
          "which ranks are simulated: rank 0 standing for its peers (their traffic still on the links), or each",
          {{"symmetric", "simulate rank 0 only, its peers' traffic still on the links (false: "
                         "simulate every rank)", "true"}},
          {},
          {}};
}

}  // namespace

const std::vector<ParallelScheme>& builtin_parallel_schemes() {
  static const std::vector<ParallelScheme> schemes{
      tensor_scheme(),
      context_scheme(),
      expert_scheme(),
      data_parallel_scheme(),
      pipeline_scheme(),
      ranks_scheme(),
  };
  return schemes;
}

const ParallelScheme* find_parallel_scheme(std::string_view name) {
  return find_by_name(builtin_parallel_schemes(), name);
}

std::vector<ParamSpec> parallel_param_specs() {
  std::vector<ParamSpec> specs;
  for (const ParallelScheme& scheme : builtin_parallel_schemes())
    specs.insert(specs.end(), scheme.params.begin(), scheme.params.end());
  return specs;
}

Trace apply_parallel_schemes(const Trace& step, const ParallelSettings& settings, const Params& section,
                             const std::vector<ParallelScheme>& schemes) {
  Trace out = step;
  assign_units_from_names(out);  // a trace that does not say which module each op runs for
  for (const ParallelScheme& scheme : schemes)
    if (scheme.transforms() && scheme.applies && scheme.applies(settings, section))
      out = scheme.apply(out, settings, section);
  return out;
}

Trace parallelize(const Trace& step, const ParallelSettings& settings) {
  static const ConfigNode defaults = ConfigNode::parse_text("{}", "parallel");
  return apply_parallel_schemes(step, settings, Params(defaults, parallel_param_specs(), "parallel"));
}

}  // namespace memsim
