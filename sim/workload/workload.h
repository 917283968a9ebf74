#pragma once
// A workload spec names a model generator and its parameters:
//
//   model: resnet
//   depth: 50
//   batch: 64
//   dtype: fp32
//   optimizer: momentum
//
// `name` (optional) renames the trace. Everything else must be a parameter the generator
// declares (`memsim list` shows them).
#include "sim/core/config.h"
#include "sim/workload/trace.h"

namespace memsim {

/// True when the document looks like a workload spec (a map with `model`).
bool is_workload_spec(const ConfigNode& root);

/// Runs the named generator on the spec and validates the result.
Trace generate_workload(const ConfigNode& spec);

}  // namespace memsim
