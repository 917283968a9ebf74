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

Updaters::Updaters(const Trace& trace) : at_(trace.buffers.size() + 1, 0) {
  for (const Op& op : trace.ops)
    for (BufferId b : op.updates) ++at_[b + 1];
  for (std::size_t b = 1; b < at_.size(); ++b) at_[b] += at_[b - 1];
  ops_.resize(at_.back());
  std::vector<std::uint32_t> next(at_.begin(), at_.end() - 1);
  for (const Op& op : trace.ops)
    for (BufferId b : op.updates) ops_[next[b]++] = op.id;
}

Updaters updaters(const Trace& trace) { return Updaters(trace); }

}  // namespace memsim
