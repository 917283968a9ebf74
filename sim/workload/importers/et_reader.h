#pragma once
// Reading a PyTorch Execution Trace into plain values. Two layouts exist, and the file's
// nodes say which one it is (PARAM's rule: only schema 1.0.1 is the old one; "1.0.2-chakra.*"
// and later are the new one, so the version string alone cannot tell):
//  - old (torch 1.13's observer, schema 1.0.1): `parent`, `inputs`/`input_shapes`/
//    `input_types` (and the same for outputs), `op_schema`, `rf_id`, `tid` on the node;
//  - new (torch 2.x, schemas 1.0.2, 1.0.3, 1.0.4, 1.1.x with or without "-chakra.0.0.4"):
//    `ctrl_deps`, `inputs: {values, shapes, types[, strides]}`, and everything else in `attrs`.
// Tensor arguments may be lists, lists of lists (all_gather's outputs), and so on: they are
// flattened into one list per argument. What the nodes mean is the importer's business
// (pytorch_et.h); this checks the structure: the JSON, the schema, the tensors, and that every
// parent is a node that started earlier. The JSON is read with simdjson, a node at a time: its
// on-demand parser walks the document (without building the whole document's tape) and each
// node is parsed alone, so memory holds the text, simdjson's index of it and one node.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
  std::vector<std::string> input_strings;     // per argument: a String argument's value
  bool zero_stride_argument = false;    // as_strided with a 0 in its strides: a broadcast view
  std::optional<double> duration_us;    // `inclusive_dur`, where a tool added it
  std::int64_t rf_id = -1;              // record-function id: what Kineto's ops carry
  std::int64_t tid = 0;                 // the thread that ran it (1: main, 2: autograd's, ...)
  // Autograd's sequence number: a forward op's, and the backward function's that undoes it
  // (-1 for none), and the thread the forward ran on (0: this node's own thread).
  std::int64_t seq_id = -1;
  std::int64_t fw_tid = 0;
  std::string kernel_backend;           // "triton" for an Inductor kernel
  // record_param_comms: which collective, over which process group.
  std::string collective;               // "allreduce", "all_gather", "all_to_allv", "wait", ...
  std::string process_group;            // "0 (default_pg)", or the group's id
  std::int64_t group_size = 0;          // ranks in the group, when the trace says
  std::vector<std::size_t> children;    // indices into ExecutionTrace::nodes, in id order
};

struct ExecutionTrace {
  std::string schema;        // "1.0.1", "1.1.0-chakra.0.0.4"
  bool old_layout = true;    // torch 1.13's node layout (see above)
  bool has_strides = false;  // tensors carry strides (1.1.1): views size themselves
  bool has_device_tensors = false;  // some tensor lives on "cuda"
  std::vector<EtNode> nodes;        // sorted by id: the order they started
  /// Ranks per process group, from a `## process_group:init ##` node.
  std::map<std::string, std::int64_t> group_sizes;
  /// What the reader had to decide or leave out (a layout the schema string contradicts).
  std::vector<std::string> notes;
};

/// Parses and checks `text` (which should have simdjson's 64 bytes of padding reserved past
/// its end; it is copied once otherwise). Errors are InputErrors naming `source` and the node
/// (or the line and column of malformed JSON).
ExecutionTrace read_execution_trace(const std::string& text, const std::string& source);

/// Sets `t.bytes` (numel x itemsize) and `t.extent_bytes` ((offset + span) x itemsize, the
/// storage the view reaches) without wrapping: a tensor over the physical size bound (1PiB,
/// units.h) or past 64 bits is an InputError "tensor ID: ...", for the caller to prefix with
/// the op and argument.
void set_tensor_bytes(EtTensor& t, std::uint64_t offset, std::uint64_t span);

/// A list type's element types, nesting kept: "GenericList[Tensor(float),GenericList[Int,Int]]"
/// -> {"Tensor(float)", "GenericList[Int,Int]"}; empty for a type that is no list.
std::vector<std::string_view> list_element_types(std::string_view type);

}  // namespace memsim
