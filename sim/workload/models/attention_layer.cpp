// ModelBuilder::attention: multi-head scaled dot-product attention, materialised (as eager
// PyTorch runs it: the scores tensor) or fused (FlashAttention). With the layers of
// seq_layers.cpp around it, a GPT layer saves exactly what Korthikanti et al. 2022 count:
// 34 sbh + 5 as^2 b bytes in fp16 (materialised, with dropout).
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"
#include "sim/workload/recomputed_ops.h"

namespace memsim {
namespace {

// FlashAttention's backward recomputes the scores: five matrix products to the forward's
// two, as the FlashAttention-2 paper counts it.
constexpr double kFlashBackwardRatio = 2.5;

void require_rank(const Shape& s, std::size_t rank, const std::string& layer) {
  if (s.size() != rank)
    throw std::invalid_argument(
        fmt::format("layer '{}' needs a rank-{} input, got rank {}", layer, rank, s.size()));
}

// Ids in first-seen order without repeats: q, k and v may be views of one buffer.
std::vector<BufferId> distinct(std::vector<BufferId> ids) {
  std::vector<BufferId> out;
  for (BufferId b : ids)
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  return out;
}

// The gradient buffers a backward makes (kNoOp: one an operand does not need), and how many.
std::vector<BufferId> present(std::initializer_list<BufferId> ids) {
  std::vector<BufferId> out;
  for (BufferId b : ids)
    if (b != kNoOp) out.push_back(b);
  return out;
}
double count(std::initializer_list<BufferId> ids) { return static_cast<double>(present(ids).size()); }

}  // namespace

Value ModelBuilder::attention(const std::string& name, Value q, Value k, Value v,
                              std::int64_t batch, std::int64_t heads, bool causal,
                              AttentionImpl impl, double dropout_p) {
  const Shape s = shape(q);
  require_rank(s, 2, name);
  require_rank(shape(k), 2, name);
  if (shape(k) != shape(v) || shape(k)[0] != s[0])
    throw std::invalid_argument(fmt::format("layer '{}': q, k and v differ in shape", name));
  if (batch < 1 || s[0] % batch != 0 || heads < 1 || s[1] % heads != 0)
    throw std::invalid_argument(fmt::format(
        "layer '{}': {} x {} does not split into batch {} and {} heads", name, s[0], s[1], batch,
        heads));
  // Grouped-query attention: k and v carry kv_heads heads of q's head size, each shared by
  // heads / kv_heads query heads (kv_heads = 1 is multi-query attention).
  const std::int64_t head_dim = s[1] / heads, kv_width = shape(k)[1];
  if (kv_width % head_dim != 0 || heads % (kv_width / head_dim) != 0)
    throw std::invalid_argument(fmt::format(
        "layer '{}': k and v of width {} are no whole number of {}-wide heads dividing {}", name,
        kv_width, head_dim, heads));
  if (settings_.cp > 1) {
    if (impl != AttentionImpl::fused)
      throw std::invalid_argument(fmt::format(
          "layer '{}': context parallelism runs ring attention over FlashAttention blocks; the materialized and "
          "selective forms are not modelled under it",
          name));
    return context_parallel_attention(name, q, k, v, batch, heads, causal);
  }
  // The causal mask costs nothing in either form: materialised, it is applied inside the
  // softmax (Megatron's fused scale-mask-softmax; unfused, a mask fill of its own); fused,
  // it skips the masked blocks.
  if (impl == AttentionImpl::fused) return fused_attention(name, q, k, v, batch, heads, causal);
  const std::int64_t groups = heads / (kv_width / head_dim);
  if (groups > 1) {
    k = repeat_kv(name + ".repeat_k", k, groups);
    v = repeat_kv(name + ".repeat_v", v, groups);
  }
  // Megatron repeats k and v inside the core attention that selective recomputation
  // remakes, so it saves them at their kv width; here the copies are made before it and
  // saved, which overstates a GQA layer's selective saves by the copies (2 x tokens x
  // (hidden - kv_width) elements).
  return impl == AttentionImpl::selective
             ? recomputed_attention(name, q, k, v, batch, heads, causal, dropout_p)
             : materialized_attention(name, q, k, v, batch, heads, causal, dropout_p);
}

// Hugging Face's eager attention repeats each k/v head to its query heads with repeat_kv
// (expand, then reshape, which copies): the batched matmuls read, and save, the copies at q's
// width, and the group's gradients are summed back into one head.
Value ModelBuilder::repeat_kv(const std::string& name, Value x, std::int64_t groups) {
  const std::int64_t tokens = shape(x)[0], width = shape(x)[1];
  const bool rg = values_[x.id].requires_grad;
  const Value y = new_value(name + ".out", {tokens, width * groups}, rg);
  emit(name, "copy", {buffer(x)}, {buffer(y)}, {}, 0);
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "sum", {g}, {gi}, {},
         static_cast<double>(element_count(shape(y))));
    contribute(x, gi, name);
  });
  return y;
}

// q k^T, softmax, dropout and probs v as eager PyTorch runs them. The head split and merge
// are treated as views: eager code makes contiguous copies of q, k, v and the context for
// its batched matmuls, which adds transient copies but saves the same bytes.
Value ModelBuilder::materialized_attention(const std::string& name, Value q, Value k, Value v,
                                           std::int64_t batch, std::int64_t heads, bool causal,
                                           double dropout_p) {
  const std::int64_t tokens = shape(q)[0], hidden = shape(q)[1];
  const std::int64_t seq = tokens / batch, head_dim = hidden / heads;
  const double esize = dtype_bytes(settings_.dtype);
  const double qkv_bytes = static_cast<double>(tokens * hidden) * esize;
  const double scores_bytes = static_cast<double>(batch * heads * seq * seq) * esize;
  const double mm_flops = 2.0 * static_cast<double>(batch * heads * seq * seq * head_dim);
  const bool rg = values_[q.id].requires_grad || values_[k.id].requires_grad ||
                  values_[v.id].requires_grad;
  auto wants = [this](Value x) { return values_[x.id].requires_grad; };
  auto grad_of = [this, qkv_bytes](const std::string& n) {
    return trace_.add_buffer(n, static_cast<std::uint64_t>(qkv_bytes), Category::activation_grad);
  };

  // scores = q k^T / sqrt(head_dim), one batched matmul (baddbmm folds in the scale).
  const Value scores = new_value(name + ".scores", {batch, heads, seq, seq}, wants(q) || wants(k));
  OpId id = emit(name + ".qk", "bmm", distinct({buffer(q), buffer(k)}), {buffer(scores)}, {},
                 mm_flops);
  trace_.ops[id].bytes_moved = 2 * qkv_bytes + scores_bytes;
  // Saves q and k (each is the other's gradient factor).
  record_backward([=, this] {
    if (!has_grad(scores)) return;
    const BufferId g = take_grad(scores);
    // Only the gradients an operand needs (a frozen projection below none).
    const BufferId gq = wants(q) ? grad_of(name + ".qk.grad_q") : kNoBuffer;
    const BufferId gk = wants(k) ? grad_of(name + ".qk.grad_k") : kNoBuffer;
    const OpId bw = emit(name + ".qk.backward", "bmm_backward", distinct({g, buffer(q), buffer(k)}),
                         present({gq, gk}), {}, mm_flops * count({gq, gk}));
    trace_.ops[bw].bytes_moved = scores_bytes + 2 * qkv_bytes + qkv_bytes * count({gq, gk});
    if (gq != kNoBuffer) contribute(q, gq, name);
    if (gk != kNoBuffer) contribute(k, gk, name);
  });

  const Value probs = fused_softmax_runs(batch, heads, seq, causal) ? softmax(name + ".softmax", scores)
                                                                   : unfused_softmax(name, scores, causal, batch);
  // Dropout on the probabilities keeps its own output (read by probs v) and a bool mask,
  // besides the softmax output: 5 as^2 b bytes in fp16, as Korthikanti et al. count.
  const Value dropped = dropout_p > 0 ? dropout(name + ".dropout", probs) : probs;

  const Value context = new_value(name + ".out", {tokens, hidden}, rg);
  id = emit(name + ".pv", "bmm", {buffer(dropped), buffer(v)}, {buffer(context)}, {}, mm_flops);
  trace_.ops[id].bytes_moved = scores_bytes + 2 * qkv_bytes;
  // Saves the (dropped-out) probabilities and v.
  record_backward([=, this] {
    if (!has_grad(context)) return;
    const BufferId g = take_grad(context);
    const BufferId gp = wants(dropped) ? grad_buffer(name + ".pv", dropped) : kNoBuffer;
    const BufferId gv = wants(v) ? grad_of(name + ".pv.grad_v") : kNoBuffer;
    const OpId bw = emit(name + ".pv.backward", "bmm_backward", {g, buffer(dropped), buffer(v)},
                         present({gp, gv}), {}, mm_flops * count({gp, gv}));
    trace_.ops[bw].bytes_moved = (gp != kNoBuffer ? 2 : 1) * scores_bytes + (gv != kNoBuffer ? 3 : 2) * qkv_bytes;
    if (gp != kNoBuffer) contribute(dropped, gp, name);
    if (gv != kNoBuffer) contribute(v, gv, name);
  });
  return context;
}

// Selective activation recomputation (Korthikanti et al. 2022; Megatron's
// --recompute-granularity selective): the forward runs as materialized, but keeps none of
// its seq x seq tensors; the backward runs q k^T, the softmax and the dropout again (the
// same RNG state gives the same mask), then the backward ops read what it remade. Saved:
// q, k, v only, so the 5 as^2 b term is gone at the price of one more forward of the core.
Value ModelBuilder::recomputed_attention(const std::string& name, Value q, Value k, Value v,
                                         std::int64_t batch, std::int64_t heads, bool causal,
                                         double dropout_p) {
  const std::int64_t tokens = shape(q)[0], hidden = shape(q)[1];
  const std::int64_t seq = tokens / batch, head_dim = hidden / heads;
  const double esize = dtype_bytes(settings_.dtype);
  const double qkv_bytes = static_cast<double>(tokens * hidden) * esize;
  const auto scores_elements = static_cast<std::uint64_t>(batch * heads * seq * seq);
  const double scores_bytes = static_cast<double>(scores_elements) * esize;
  const double elements = static_cast<double>(scores_elements);
  const double mm_flops = 2.0 * static_cast<double>(batch * heads * seq * seq * head_dim);
  const bool rg = values_[q.id].requires_grad || values_[k.id].requires_grad ||
                  values_[v.id].requires_grad;
  auto wants = [this](Value x) { return values_[x.id].requires_grad; };
  const bool drops = dropout_p > 0;
  const bool fused_softmax = fused_softmax_runs(batch, heads, seq, causal);

  // The core attention's ops; `tag` is "" forward and ".recompute" in the backward.
  struct Core {
    SoftmaxChain softmax;  // its probs saved for the softmax's backward, its out read next
    BufferId dropped, mask;
  };
  auto core = [=, this](const std::string& tag) {
    Core c{};
    const BufferId scores = activation_buffer(name + tag + ".scores", scores_elements, settings_.dtype);
    OpId id = emit(name + tag + ".qk", "bmm", distinct({buffer(q), buffer(k)}), {scores}, {}, mm_flops);
    trace_.ops[id].bytes_moved = 2 * qkv_bytes + scores_bytes;
    if (fused_softmax) {
      const BufferId probs = activation_buffer(name + tag + ".softmax.out", scores_elements, settings_.dtype);
      emit(name + tag + ".softmax", "softmax", {scores}, {probs}, {}, 4 * elements);
      c.softmax = {kNoBuffer, probs, probs};
    } else {
      c.softmax = unfused_softmax_forward(name + tag, scores, scores_elements, causal, batch, seq);
    }
    c.dropped = c.softmax.out;
    c.mask = kNoBuffer;
    if (drops) {
      c.dropped = activation_buffer(name + tag + ".dropout.out", scores_elements, settings_.dtype);
      c.mask = activation_buffer(name + tag + ".dropout.mask", scores_elements, DType::boolean);
      emit(name + tag + ".dropout", "dropout", {c.softmax.out}, {c.dropped, c.mask}, {}, 2 * elements);
    }
    return c;
  };
  const Core fwd = core("");
  const Value context = new_value(name + ".out", {tokens, hidden}, rg);
  OpId id = emit(name + ".pv", "bmm", {fwd.dropped, buffer(v)}, {buffer(context)}, {}, mm_flops);
  trace_.ops[id].bytes_moved = scores_bytes + 2 * qkv_bytes;

  record_backward([=, this] {
    if (!has_grad(context)) return;
    const BufferId g = take_grad(context);
    const Core c = core(std::string(kRecomputedOpTag));
    auto qkv_grad = [&](const std::string& n) {
      return trace_.add_buffer(n, static_cast<std::uint64_t>(qkv_bytes), Category::activation_grad);
    };
    auto scores_grad = [&](const std::string& n) {
      return trace_.add_buffer(n, static_cast<std::uint64_t>(scores_bytes), Category::activation_grad);
    };
    // Only the gradients an operand needs (a frozen projection below none).
    const bool to_scores = wants(q) || wants(k);
    BufferId gp = to_scores ? scores_grad(name + ".pv.grad_probs") : kNoBuffer;
    const BufferId gv = wants(v) ? qkv_grad(name + ".pv.grad_v") : kNoBuffer;
    OpId bw = emit(name + ".pv.backward", "bmm_backward", {g, c.dropped, buffer(v)}, present({gp, gv}), {},
                   mm_flops * count({gp, gv}));
    trace_.ops[bw].bytes_moved = 2 * scores_bytes + 3 * qkv_bytes;
    if (!to_scores) {
      contribute(v, gv, name);
      return;
    }
    if (drops) {
      const BufferId gd = scores_grad(name + ".dropout.grad_input");
      emit(name + ".dropout.backward", "dropout_backward", {gp, c.mask}, {gd}, {}, elements);
      gp = gd;
    }
    BufferId gs;
    if (fused_softmax) {
      gs = scores_grad(name + ".softmax.grad_input");
      emit(name + ".softmax.backward", "softmax_backward", {gp, c.softmax.probs}, {gs}, {}, 3 * elements);
    } else {
      gs = unfused_softmax_backward(name, c.softmax, gp, scores_elements);
    }
    const BufferId gq = wants(q) ? qkv_grad(name + ".qk.grad_q") : kNoBuffer;
    const BufferId gk = wants(k) ? qkv_grad(name + ".qk.grad_k") : kNoBuffer;
    bw = emit(name + ".qk.backward", "bmm_backward", distinct({gs, buffer(q), buffer(k)}), present({gq, gk}), {},
              mm_flops * count({gq, gk}));
    trace_.ops[bw].bytes_moved = scores_bytes + 2 * qkv_bytes + qkv_bytes * count({gq, gk});
    if (gq != kNoBuffer) contribute(q, gq, name);
    if (gk != kNoBuffer) contribute(k, gk, name);
    if (gv != kNoBuffer) contribute(v, gv, name);
  });
  return context;
}

// The gradients of q, k and v a FlashAttention backward makes: only those an operand needs
// (a frozen projection below none); the kernel's work is the same.
ModelBuilder::QkvGrads ModelBuilder::qkv_grads(const std::string& name, Value q, Value k, Value v, double q_bytes,
                                               double kv_bytes) {
  auto grad_of = [&](Value x, const char* what, double bytes) {
    return values_[x.id].requires_grad
               ? trace_.add_buffer(name + what, static_cast<std::uint64_t>(bytes), Category::activation_grad)
               : kNoBuffer;
  };
  return {grad_of(q, ".grad_q", q_bytes), grad_of(k, ".grad_k", kv_bytes), grad_of(v, ".grad_v", kv_bytes)};
}

// FlashAttention (2): one kernel that never writes the seq x seq scores. It saves q, k, v,
// its output and the fp32 row logsumexp; dropout on the probabilities is regenerated from
// the RNG state in the backward, so it keeps no mask. The backward recomputes the scores
// block by block and needs an fp32 dq accumulator and fp32 row sums as scratch. With
// grouped-query attention the kernel indexes each k/v head for its group of query heads (a
// view, no repeat), so k, v and their gradients keep their kv width; the FLOPs are q's.
Value ModelBuilder::fused_attention(const std::string& name, Value q, Value k, Value v,
                                    std::int64_t batch, std::int64_t heads, bool causal) {
  const std::int64_t tokens = shape(q)[0], hidden = shape(q)[1];
  const std::int64_t seq = tokens / batch;
  const double esize = dtype_bytes(settings_.dtype);
  const double q_bytes = static_cast<double>(tokens * hidden) * esize;
  const double kv_bytes = static_cast<double>(element_count(shape(k))) * esize;
  const auto rows = static_cast<std::uint64_t>(batch * heads * seq);
  // Two matmuls of 2 b s^2 h FLOPs; a causal mask halves the blocks computed.
  const double flops = 4.0 * static_cast<double>(batch * seq) * static_cast<double>(seq * hidden) *
                       (causal ? 0.5 : 1.0);
  const bool rg = values_[q.id].requires_grad || values_[k.id].requires_grad ||
                  values_[v.id].requires_grad;

  const Value out = new_value(name + ".out", {tokens, hidden}, rg);
  const BufferId lse = activation_buffer(name + ".logsumexp", rows, DType::fp32);
  OpId id = emit(name, "flash_attention", distinct({buffer(q), buffer(k), buffer(v)}),
                 {buffer(out), lse}, {}, flops);
  trace_.ops[id].bytes_moved = 2 * q_bytes + 2 * kv_bytes + 4.0 * static_cast<double>(rows);

  record_backward([=, this] {
    if (!has_grad(out)) return;
    const BufferId g = take_grad(out);
    const auto [gq, gk, gv] = qkv_grads(name, q, k, v, q_bytes, kv_bytes);
    const OpId bw = emit(name + ".backward", "flash_attention_backward",
                         distinct({g, buffer(q), buffer(k), buffer(v), buffer(out), lse}),
                         present({gq, gk, gv}), {}, kFlashBackwardRatio * flops);
    Op& op = trace_.ops[bw];
    // Scratch is written and read back, counted twice as bytes_moved() counts workspace.
    op.workspace_bytes = static_cast<std::uint64_t>(tokens * hidden) * 4 + rows * 4;
    op.bytes_moved = 4 * q_bytes + 4 * kv_bytes + 4.0 * static_cast<double>(rows) +
                     2.0 * static_cast<double>(op.workspace_bytes);
    if (gq != kNoBuffer) contribute(q, gq, name);
    if (gk != kNoBuffer) contribute(k, gk, name);
    if (gv != kNoBuffer) contribute(v, gv, name);
  });
  return out;
}

// Context parallelism as TransformerEngine's ring attention runs it (AttnFuncWithCPAndKVP2P,
// Megatron's --cp-comm-type p2p, its default). With c = settings().cp, this rank holds q, k
// and v of 1/c of each sequence: two of its 2c chunks, i and 2c - 1 - i, so that under a
// causal mask every rank, and every step, does the same work.
//
// Forward, c steps: at step i the FlashAttention kernel runs q against the k/v block this
// rank holds (its own at step 0), while that block goes on to the next rank of the cp group
// and the previous rank's comes in (a ring_exchange of k and v; c - 1 of them, each on the
// group's stream, overlapping the step's kernel). Each step's output is merged into the
// running output and logsumexp (the online softmax's correction, counted in its bytes).
// A step's work is that of FlashAttention over this rank's tokens alone: with a causal mask,
// all of q against half of a block or half of q against all of it.
//
// Backward, c steps of the kernel's backward against the blocks, received again in the same
// ring; the k/v gradient of a block travels one step behind it, each rank adding its part:
// exchange i carries block i onward (i < c - 1) and the gradient accumulated at step i - 1
// (i >= 1), so the c exchanges send 2 (c - 1) blocks in all. The last gradient received
// plus this rank's last part is its own k and v gradient (one add).
//
// Saved for the backward: q, k, v, the output and the logsumexp of this rank's tokens, as
// fused_attention. In flight: the received blocks (comm buffers), each until its step has
// read it and passed it on, and the parts of the k/v gradient.
Value ModelBuilder::context_parallel_attention(const std::string& name, Value q, Value k, Value v,
                                               std::int64_t batch, std::int64_t heads, bool causal) {
  const std::uint32_t c = settings_.cp;
  const std::int64_t tokens = shape(q)[0], hidden = shape(q)[1];
  const std::int64_t seq = tokens / batch;  // this rank's part of each sequence
  const double esize = dtype_bytes(settings_.dtype);
  const double q_bytes = static_cast<double>(tokens * hidden) * esize;
  const double kv_bytes = static_cast<double>(element_count(shape(k))) * esize;
  const auto block = static_cast<std::uint64_t>(2 * kv_bytes);  // k and v
  const auto rows = static_cast<std::uint64_t>(batch * heads * seq);
  const double step_flops = 4.0 * static_cast<double>(batch * seq) * static_cast<double>(seq * hidden) *
                            (causal ? 0.5 : 1.0);
  const bool rg = values_[q.id].requires_grad || values_[k.id].requires_grad || values_[v.id].requires_grad;
  auto step_name = [name](const char* what, std::uint32_t i) { return fmt::format("{}.{}{}", name, what, i); };
  auto with = [](std::vector<BufferId> a, const std::vector<BufferId>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return distinct(std::move(a));
  };

  const Value out = new_value(name + ".out", {tokens, hidden}, rg);
  const BufferId lse = activation_buffer(name + ".logsumexp", rows, DType::fp32);
  std::vector<BufferId> held = distinct({buffer(k), buffer(v)});
  for (std::uint32_t i = 0; i < c; ++i) {
    std::vector<BufferId> next;
    if (i + 1 < c) {
      next = {trace_.add_buffer(step_name("kv", i + 1), block, Category::comm)};
      emit_comm(step_name("kv_exchange", i), "ring_exchange", held, next, {}, block, "cp");
    }
    const std::vector<BufferId> reads = with({buffer(q)}, held);
    const OpId id = i == 0 ? emit(step_name("step", i), "flash_attention", reads, {buffer(out), lse}, {}, step_flops)
                           : emit(step_name("step", i), "flash_attention", reads, {}, {buffer(out), lse}, step_flops);
    // q read, the step's output written; from step 1 the running output read and written
    // again by the correction.
    trace_.ops[id].bytes_moved = (i == 0 ? 2 : 4) * q_bytes + 2 * kv_bytes + 4.0 * static_cast<double>(rows);
    held = next;
  }
  cp_used_ = true;

  record_backward([=, this] {
    if (!has_grad(out)) return;
    const BufferId g = take_grad(out);
    const auto [gq, gk, gv] = qkv_grads(name, q, k, v, q_bytes, kv_bytes);
    auto grad_of = [&](const std::string& n, double bytes) {
      return trace_.add_buffer(n, static_cast<std::uint64_t>(bytes), Category::activation_grad);
    };
    const bool kv_grads = gk != kNoBuffer || gv != kNoBuffer;
    std::vector<BufferId> kv = distinct({buffer(k), buffer(v)});
    std::vector<BufferId> carried;  // the k/v gradient accumulated so far: received part, own part
    for (std::uint32_t i = 0; i < c; ++i) {
      // Exchange i: this block onward, and the gradient accumulated at the step before.
      std::vector<BufferId> send, received, next;
      std::uint64_t message = 0;
      if (i + 1 < c) {
        send = kv;
        next = {trace_.add_buffer(step_name("kv", i + 1) + ".backward", block, Category::comm)};
        received = next;
        message += block;
      }
      BufferId got = kNoBuffer;  // the gradient of the block held now, from the ranks before
      if (i >= 1 && kv_grads) {
        send = with(send, carried);
        got = trace_.add_buffer(step_name("grad_kv", i) + ".received", block, Category::comm);
        received.push_back(got);
        message += block;
      }
      if (message > 0)
        emit_comm(step_name("kv_exchange", i) + ".backward", "ring_exchange", send, received, {}, message, "cp");
      const BufferId part = kv_grads ? grad_of(step_name("grad_kv", i), 2 * kv_bytes) : kNoBuffer;
      std::vector<BufferId> outputs;
      if (i == 0 && gq != kNoBuffer) outputs.push_back(gq);
      if (part != kNoBuffer) outputs.push_back(part);
      std::vector<BufferId> updates;
      if (i > 0 && gq != kNoBuffer) updates.push_back(gq);
      const OpId bw = emit(step_name("step", i) + ".backward", "flash_attention_backward",
                           with({g, buffer(q)}, with(kv, {buffer(out), lse})), outputs, updates,
                           kFlashBackwardRatio * step_flops);
      Op& op = trace_.ops[bw];
      op.workspace_bytes = static_cast<std::uint64_t>(tokens * hidden) * 4 + rows * 4;
      op.bytes_moved = 4 * q_bytes + 4 * kv_bytes + 4.0 * static_cast<double>(rows) +
                       2.0 * static_cast<double>(op.workspace_bytes);
      carried.clear();
      if (got != kNoBuffer) carried.push_back(got);
      if (part != kNoBuffer) carried.push_back(part);
      kv = next;
    }
    if (kv_grads) {
      // This rank's block's gradient: what came round plus its own last part.
      const std::vector<BufferId> grads = present({gk, gv});
      const OpId add = emit(name + ".grad_kv.add", "add", carried, grads, {}, 2 * kv_bytes / esize);
      trace_.ops[add].bytes_moved = 3 * static_cast<double>(block);
    }
    if (gq != kNoBuffer) contribute(q, gq, name);
    if (gk != kNoBuffer) contribute(k, gk, name);
    if (gv != kNoBuffer) contribute(v, gv, name);
  });
  return out;
}

}  // namespace memsim
