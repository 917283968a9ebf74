#pragma once
// PyTorch Execution Traces (torch.profiler.ExecutionTraceObserver, formerly
// ExecutionGraphObserver) as memsim traces. Schema 1.0.x (torch 1.13: `parent`, `inputs`,
// `input_shapes`, `input_types`, ...) and 1.1.x (torch 2.x: `ctrl_deps`, `inputs: {values,
// shapes, types, strides}`, `attrs`) are told apart by the file's `schema`.
//
// How the file becomes a trace:
// - Ops: nodes nest (a node's parent encloses it). The op sequence is built from the nodes
//   that do the work: a compute kernel whose cost we can estimate (mm, addmm, convolution,
//   the norms, softmax...) counts as one op with everything under it; any other node is
//   split into its children, unless it creates a tensor none of them creates; a childless
//   operator is an op. Pure views (view, t, expand, as_strided...) are no ops.
// - Buffers: tensors map to buffers by storage id, so views and in-place ops share memory.
//   The observer reuses a storage id when a new allocation lands at a freed address, so an
//   op whose output storage is none of its inputs' starts a new buffer. A buffer's size is
//   the extent of the tensor its allocating op returned; a buffer first seen as an input is
//   resident at the start (and held all step), sized by the largest extent it is seen with,
//   broadcast views aside (schema 1.0.x has no strides, so expand outputs are left out).
// - Categories: buffers updated in place by the optimizer (`Optimizer.step#...`) are
//   weights when the step read them before the optimizer ran and optimizer state otherwise;
//   the gradients are what AccumulateGrad accumulates into, or steals; the rest are
//   inputs (resident at the start), activations (made in forward) and activation gradients.
// - Cost: FLOPs from the shapes (matmul family, convolution, elementwise, reductions, norms,
//   softmax); bytes moved are the bytes of the tensors an op reads and writes. A node's
//   `inclusive_dur` (microseconds, added by trace linkers and by workloads/capture) becomes
//   its op's measured duration.
// Problems are InputErrors naming the file and the node: "f.json: node 53 (aten::addmm):
// inputs[1]: expected a tensor [id, storage, offset, numel, itemsize, device], got 7".
#include <string>
#include <string_view>

#include "sim/workload/trace.h"

namespace memsim {

/// True when `head`, the first bytes of a file, look like a PyTorch Execution Trace: a JSON
/// object with a "schema" and "nodes" (or "pid") near the top.
bool looks_like_pytorch_et(std::string_view head);

/// Converts the text of an Execution Trace; `source` (a path) names it in messages and
/// its file name (without .json/.et) names the trace.
Trace import_pytorch_et(const std::string& text, const std::string& source);

}  // namespace memsim
