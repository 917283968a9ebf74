#pragma once
// PyTorch Execution Traces (torch.profiler.ExecutionTraceObserver, formerly
// ExecutionGraphObserver) as memsim traces, in either node layout (et_reader.h says how the
// file's nodes choose it).
//
// How the file becomes a trace:
// - The step: a trace may hold several `ProfilerStep#N`; one is imported, `--step N` or by
//   default the last complete one (with forward, and backward and optimizer ops if any step
//   has them). An op belongs to the step whose ProfilerStep started last before it, on any
//   thread (autograd's backward thread included). Without ProfilerSteps the whole trace is
//   the step.
// - Order: ops run in the order they started, across threads: by node id, which the observer
//   hands out as ops start (so the backward thread's ops fall where they ran).
// - Phases, from where the ops really are: backward from the first op autograd's engine runs
//   (`autograd::engine::evaluate_function: ...`), optimizer from `Optimizer.step#...` on;
//   forward before. Phases never go back, so a `zero_grad` falls in the phase it runs in.
// - Ops: nodes nest (a node's parent encloses it). The op sequence is built from the nodes
//   that do the work: a compute kernel whose cost we can estimate (mm, addmm, convolution,
//   the norms, softmax...), a foreach or fused optimizer kernel (`_foreach_add_`,
//   `_fused_adam_`, ...: every tensor of every list), a collective, or an Inductor/Triton
//   kernel counts as one op with everything under it; any other node is split into its
//   children, unless it creates a tensor none of them creates; a childless operator is an op.
//   Pure views (view, t, expand, as_strided...) are no ops.
// - Collectives (`c10d::*`, `record_param_comms`, `nccl:*`; the outermost of them) are ops
//   of kind all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send, recv...,
//   with `message_bytes` (the larger of what is sent and received) and the process `group`.
//   Their first tensor argument is written (received into), except a send's.
// - Triton kernels name every tensor as an argument: the storages seen there first are what
//   the kernel writes (its outputs), the others it reads.
// - Buffers: tensors map to buffers by storage id, so views and in-place ops share memory.
//   The observer reuses a storage id when a new allocation lands at a freed address, so an
//   op whose output storage is none of its inputs' starts a new buffer. A buffer's size is
//   the extent of the tensor its allocating op returned; a buffer first seen as an input is
//   resident at the start (and held all step), sized by the largest extent it is seen with,
//   broadcast views aside (schema 1.0.1 has no strides, so expand outputs are left out).
//   In a trace with device tensors only those count (host tensors are not in its memory).
// - Categories: buffers updated in place by the optimizer step are weights when ops outside
//   the optimizer read them and optimizer state otherwise (also the state the step creates,
//   zeros_like or clone, and then updates: Adam's moments on the first step); the gradients
//   are what AccumulateGrad accumulates into, or steals; the rest are inputs (resident at the
//   start), activations (made in forward) and activation gradients. `parameters` counts the
//   elements of the weights.
// - Cost: FLOPs from the shapes (matmul family, convolution, elementwise, reductions, norms,
//   softmax); bytes moved are the bytes of the tensors an op reads and writes. A node's
//   `inclusive_dur` (microseconds, added by trace linkers and by workloads/capture) becomes
//   its op's measured duration.
// - Names: an op is named after its node ("aten::addmm#2452"), within the scope that
//   encloses it: the nearest record_function label around it (a user's range, a module's
//   forward as workloads/capture records it, `Optimizer.step#SGD.step`; not the profiler's
//   thread and step markers nor autograd's wrappers), and for a backward op its forward op's
//   (the last forward op to start with its backward function's sequence number), else its
//   own. In a scope the op is "SCOPE/aten::addmm#2452" and what it allocates
//   "SCOPE/aten::addmm#2452:out" (":out0", ":out1"... for several, importers/scopes.h);
//   without one, "storage2457@2452". A buffer there at the start is "storageN".
// - Nothing silent: what is left out (other steps, collective waits without data, nodes
//   with tensors that are no operator, tensors without a size) is counted in the trace's
//   import_notes.
// Problems are InputErrors naming the file and the node: "f.json: node 53 (aten::addmm):
// inputs[1]: expected a tensor [id, storage, offset, numel, itemsize, device], got 7".
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/workload/trace.h"

namespace memsim {

/// True when `head`, the first bytes of a file, look like a PyTorch Execution Trace: a JSON
/// object with a "schema" and "nodes" (or "pid") near the top.
bool looks_like_pytorch_et(std::string_view head);

/// Where each op of an imported trace came from: its node's record-function id (what a Kineto
/// trace of the same run joins on), name and thread; for a backward op, the forward op its
/// backward function undoes (whose scope names it), when the trace says.
struct EtOpOrigin {
  std::int64_t rf_id = -1;
  std::string name;
  std::int64_t tid = 0;
  std::int64_t forward_rf_id = -1;
  std::string forward_name;
};

struct PytorchEtImport {
  Trace trace;
  std::vector<EtOpOrigin> origins;  // per op
};

/// Converts the text of an Execution Trace; `source` (a path) names it in messages and `name`
/// (a file name, without .json/.et) names the trace. `step`: the ProfilerStep to import.
PytorchEtImport import_pytorch_et_with_origins(const std::string& text, const std::string& source,
                                               const std::string& name, std::optional<std::int64_t> step = {});

/// The same, the trace only; named after `source`'s file name.
Trace import_pytorch_et(const std::string& text, const std::string& source,
                        std::optional<std::int64_t> step = {});

}  // namespace memsim
