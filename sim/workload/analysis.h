#pragma once
// What a trace says about itself, worked out from its ops and buffers: the bytes an op
// moves, the model's parameter count, which ops update each buffer in place. When each
// buffer is live is compute_liveness() in trace.h.
#include <cstdint>
#include <span>
#include <vector>

#include "sim/workload/trace.h"

namespace memsim {

/// Bytes an op reads and writes: inputs and outputs once, updates twice (read, then write),
/// and its workspace twice (written, then read back: an im2col matrix).
double bytes_moved(const Trace& trace, const Op& op);

/// Number of parameters: the elements of the Category::weight buffers, stored as
/// `weight_dtype` (the trace does not keep element sizes). Not for mixed precision, where
/// the fp32 master copies are weights too: Trace::parameters counts the model's parameters.
std::uint64_t parameter_count(const Trace& trace, DType weight_dtype);

/// The trace's own count (Trace::parameters) when it has one; otherwise the weight bytes
/// over the element size of the first forward op's dtype (right for traces that run in one
/// precision).
std::uint64_t parameter_count(const Trace& trace);

/// Per buffer, the ops that update it in place (Op::updates), in issue order: one list for
/// the whole step and an offset per buffer, not a vector per buffer (a step of five million
/// buffers, nearly all updated by nothing, would hold 120 MB of empty vectors).
class Updaters {
 public:
  explicit Updaters(const Trace& trace);
  std::span<const OpId> operator[](BufferId b) const {
    return {ops_.data() + at_[b], ops_.data() + at_[b + 1]};
  }
  std::size_t size() const { return at_.size() - 1; }

 private:
  std::vector<std::uint32_t> at_;  // buffer b's updaters are ops_[at_[b], at_[b + 1])
  std::vector<OpId> ops_;
};
Updaters updaters(const Trace& trace);

}  // namespace memsim
