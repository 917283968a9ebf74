#pragma once
// Reading a PyTorch Execution Trace into plain values, for either schema: 1.0.x (torch 1.13:
// `parent`, `inputs`, `input_shapes`, `input_types`, ...) or 1.1.x (torch 2.x: `ctrl_deps`,
// `inputs: {values, shapes, types, strides}`, `attrs`). What the nodes mean is the
// importer's business (pytorch_et.h); this checks the structure: the JSON, the schema, the
// tensors, and that every parent is a node that started earlier.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/workload/importers/aten_cost.h"

namespace memsim {

struct EtNode {
  std::int64_t id = 0;
  std::int64_t parent = 0;  // 0, or itself, for a root
  std::string name;         // "aten::addmm", "Optimizer.step#SGD.step", ...
  std::string op_schema;    // empty for labels
  std::vector<std::vector<EtTensor>> inputs;  // per argument; empty for a non-tensor
  std::vector<std::vector<EtTensor>> outputs;
  bool zero_stride_argument = false;    // as_strided with a 0 in its strides: a broadcast view
  std::optional<double> duration_us;    // `inclusive_dur`, where a tool added it
  std::vector<std::size_t> children;    // indices into ExecutionTrace::nodes, in id order
};

struct ExecutionTrace {
  std::string schema;        // "1.0.1"
  bool has_strides = false;  // tensors carry strides (1.1.x): views size themselves
  bool has_device_tensors = false;  // some tensor lives on "cuda"
  std::vector<EtNode> nodes;        // sorted by id: the order they started
};

/// Parses and checks `text`; errors are InputErrors naming `source` and the node (or the
/// line and column of malformed JSON).
ExecutionTrace read_execution_trace(const std::string& text, const std::string& source);

}  // namespace memsim
