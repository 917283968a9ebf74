#include "sim/workload/analysis.h"

namespace memsim {

double bytes_moved(const Trace& trace, const Op& op) {
  double sum = 0;
  for (BufferId b : op.inputs) sum += static_cast<double>(trace.buffers[b].bytes);
  for (BufferId b : op.outputs) sum += static_cast<double>(trace.buffers[b].bytes);
  for (BufferId b : op.updates) sum += 2.0 * static_cast<double>(trace.buffers[b].bytes);
  return sum + 2.0 * static_cast<double>(op.workspace_bytes);
}

std::uint64_t parameter_count(const Trace& trace, DType weight_dtype) {
  return trace.total_bytes(Category::weight) /
         static_cast<std::uint64_t>(dtype_bytes(weight_dtype));
}

std::uint64_t parameter_count(const Trace& trace) {
  if (trace.parameters) return trace.parameters;
  int element = 4;
  for (const Op& op : trace.ops)
    if (op.phase == Phase::forward) {
      element = dtype_bytes(op.dtype);
      break;
    }
  return trace.total_bytes(Category::weight) / element;
}

std::vector<std::vector<OpId>> updaters(const Trace& trace) {
  std::vector<std::vector<OpId>> out(trace.buffers.size());
  for (const Op& op : trace.ops)
    for (BufferId b : op.updates) out[b].push_back(op.id);
  return out;
}

}  // namespace memsim
