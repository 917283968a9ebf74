// Megatron-LM's tensor and sequence parallelism as builder layers: the communication a
// column-parallel linear (weights split by output features) followed by a row-parallel one
// (split by input features) needs, over the process group "tp".
//
//   tensor parallel (Shoeybi et al. 2019)     f: forward identity, backward all-reduce
//                                             g: forward all-reduce, backward identity
//   sequence parallel (Korthikanti et al. 2022)  f: forward all-gather, backward reduce-scatter
//                                                g: forward reduce-scatter, backward all-gather
//
// Under sequence parallelism the tensor entering a column-parallel linear is the shard of
// the tokens this rank holds; the linear saves the shard and all-gathers it again for its
// backward instead of keeping the gathered tensor (saved_input), which is what makes
// Korthikanti's 34 sbh / t hold.
//
// Overlapped TP communication (Megatron's --tp-comm-overlap: TransformerEngine's userbuffers
// split the forward all-gather and reduce-scatter into t chunks pipelined with t chunks of
// the GEMM next to them, so that only one chunk of each is exposed). Modelled without
// splitting the GEMM: the all-gather is a head of 1/t of the bytes, which makes the gathered
// tensor, then the other (t - 1)/t in flight while the column-parallel GEMMs that read the
// tensor run; what reads their outputs waits for the gather to end. The reduce-scatter is
// (t - 1)/t of the bytes issued when the row-parallel GEMM starts (it waits for the op before
// it, not for its output), then a tail of 1/t that reads the GEMM's output and makes the
// shard. A layer's forward then takes about max(GEMM, communication) plus one chunk of the
// communication where it took their sum; memory is unchanged (the gathered tensor is made
// whole by the head, as before). The backward's collectives are overlapped the same way:
// the row-parallel linear's output gradient is all-gathered in chunks pipelined with its
// backward GEMM (a head of 1/t makes the gathered gradient, the rest runs beside the GEMM,
// whose outputs' readers wait for it), and the column-parallel linear's input gradient is
// reduce-scattered while its backward GEMM computes the weight gradient (TransformerEngine's
// bulk overlap; modelled as the forward's reduce-scatter: (t - 1)/t issued when the GEMM
// starts, a tail of 1/t after it). The saved shard's all-gather for the weight gradient
// already ran beside the other GEMM of the backward. The communication kernels' share of the
// SMs (platform sm_share) slows the GEMMs meanwhile as for any overlap.
#include <fmt/format.h>

#include "sim/workload/models/builder.h"

namespace memsim {

OpId ModelBuilder::emit_comm(std::string name, std::string_view kind, std::vector<BufferId> inputs,
                             std::vector<BufferId> outputs, std::vector<BufferId> updates,
                             std::uint64_t message_bytes, const char* group) {
  const OpId id = emit(std::move(name), kind, std::move(inputs), std::move(outputs), std::move(updates), 0);
  Op& op = trace_.ops[id];
  op.group = group;
  op.message_bytes = message_bytes;
  op.bytes_moved = 0;  // the network moves it, not the compute tier
  const std::string_view g(group);
  (g == "ep" ? ep_used_ : g == "cp" ? cp_used_ : tp_used_) = true;
  return id;
}

void ModelBuilder::comm_backward(const std::string& name, Value x, Value y, std::string_view kind,
                                 std::uint64_t message_bytes, const char* group, bool overlap) {
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    if (overlap && kind == "all_gather")
      // The output gradient of a row-parallel linear, pipelined with its backward GEMM.
      overlapped_all_gather(name + ".backward", g, gi, message_bytes, group);
    else if (overlap && kind == "reduce_scatter" && trace_.buffers[g].producer != kNoOp)
      // The input gradient of a column-parallel linear, beside the backward GEMM that makes it
      // as that GEMM computes the weight gradient.
      overlapped_reduce_scatter(name + ".backward", g, gi, message_bytes, group);
    else
      emit_comm(name + ".backward", kind, {g}, {gi}, {}, message_bytes, group);
    contribute(x, gi, name);
  });
}

void ModelBuilder::overlapped_all_gather(const std::string& name, BufferId in, BufferId out, std::uint64_t bytes,
                                         const char* group) {
  const std::uint64_t head = bytes / static_cast<std::uint64_t>(settings_.tp);
  emit_comm(name, "all_gather", {in}, {out}, {}, head, group);
  overlapped_gather_[out] = emit_comm(name + ".overlapped", "all_gather", {}, {}, {}, bytes - head, group);
}

void ModelBuilder::overlapped_reduce_scatter(const std::string& name, BufferId in, BufferId out, std::uint64_t bytes,
                                             const char* group) {
  // Issued when the GEMM making `in` starts: after the compute op before it.
  const std::uint64_t tail = bytes / static_cast<std::uint64_t>(settings_.tp);
  const OpId head = emit_comm(name + ".overlapped", "reduce_scatter", {}, {}, {}, bytes - tail, group);
  for (OpId before = trace_.buffers[in].producer; before-- > 0;)
    if (trace_.ops[before].group.empty()) {
      trace_.ops[head].waits_for.push_back(before);
      break;
    }
  emit_comm(name, "reduce_scatter", {in}, {out}, {}, tail, group);
}

Value ModelBuilder::tp_copy(const std::string& name, Value x) {
  const Value y = alias(x, shape(x), values_[x.id].requires_grad);
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    // The column-parallel linears' input gradients are partial sums over the ranks.
    emit_comm(name + ".backward", "all_reduce", {}, {}, {g}, trace_.buffers[g].bytes);
    contribute(x, g, name);
  });
  return y;
}

Value ModelBuilder::tp_reduce(const std::string& name, Value x) {
  const Value y = alias(x, shape(x), values_[x.id].requires_grad);
  emit_comm(name, "all_reduce", {}, {}, {buffer(x)}, trace_.buffers[buffer(x)].bytes);
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (values_[x.id].requires_grad) contribute(x, g, name);
  });
  return y;
}

Value ModelBuilder::sp_gather(const std::string& name, Value x) {
  const Shape s = shape(x);
  const std::int64_t t = settings_.tp;
  const Value y = new_value(name + ".out", {s[0] * t, s[1]}, values_[x.id].requires_grad);
  const std::uint64_t bytes = trace_.buffers[buffer(y)].bytes;
  if (settings_.tp_comm_overlap && phase_ == Phase::forward) {
    overlapped_all_gather(name, buffer(x), buffer(y), bytes, "tp");
  } else {
    emit_comm(name, "all_gather", {buffer(x)}, {buffer(y)}, {}, bytes);
  }
  regather_.push_back({y.id, Regather{x, name, kNoBuffer}});
  comm_backward(name, x, y, "reduce_scatter", trace_.buffers[buffer(y)].bytes, "tp", settings_.tp_comm_overlap);
  return y;
}

Value ModelBuilder::sp_scatter(const std::string& name, Value x) {
  const Shape s = shape(x);
  const std::int64_t t = settings_.tp;
  const Value y = new_value(name + ".out", {s[0] / t, s[1]}, values_[x.id].requires_grad);
  const std::uint64_t bytes = trace_.buffers[buffer(x)].bytes;
  if (settings_.tp_comm_overlap && phase_ == Phase::forward && trace_.buffers[buffer(x)].producer != kNoOp) {
    overlapped_reduce_scatter(name, buffer(x), buffer(y), bytes, "tp");
  } else {
    emit_comm(name, "reduce_scatter", {buffer(x)}, {buffer(y)}, {}, bytes);
  }
  comm_backward(name, x, y, "all_gather", bytes, "tp", settings_.tp_comm_overlap);
  return y;
}

Value ModelBuilder::sp_split(const std::string& name, Value x) {
  // Megatron's scatter_to_sequence_parallel_region keeps this rank's rows, and its embedding
  // clones them (clone_scatter_output_in_embedding) so that the full tensor can go.
  const Shape s = shape(x);
  const std::int64_t t = settings_.tp;
  const Value y = new_value(name + ".out", {s[0] / t, s[1]}, values_[x.id].requires_grad);
  emit(name, "copy", {buffer(x)}, {buffer(y)}, {}, 0);
  comm_backward(name, x, y, "all_gather", trace_.buffers[buffer(x)].bytes);
  return y;
}

BufferId ModelBuilder::saved_input(Value x) {
  for (auto& [id, r] : regather_) {
    if (id != x.id) continue;
    if (r.again == kNoBuffer) {
      r.again = activation_buffer(r.name + ".regathered", static_cast<std::uint64_t>(element_count(shape(x))),
                                  settings_.dtype);
      emit_comm(r.name + ".regather", "all_gather", {buffer(r.shard)}, {r.again}, {},
                trace_.buffers[r.again].bytes);
    }
    return r.again;
  }
  return buffer(x);
}

}  // namespace memsim
