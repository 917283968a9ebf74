// The mixture-of-experts layers of ModelBuilder: the router's softmax and top-k, the
// dispatch of a token subset to one expert, and the weighted combine back to the tokens, as
// Hugging Face's MixtralSparseMoeBlock runs them (index_select per expert, index_add_ into
// one zero-filled output). Each expert is its own ops, so experts can live on different
// ranks (expert parallelism) without changing what one expert saves.
#include <stdexcept>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"

namespace memsim {
namespace {

constexpr double kSoftmaxFlops = 4;   // max, exp, sum, divide, per logit
constexpr double kTopKFlops = 1;      // a comparison per logit and pick
constexpr double kCombineFlops = 2;   // weight x value, then the scatter-add

}  // namespace

Value ModelBuilder::route_top_k(const std::string& name, Value logits, std::int64_t top_k,
                                BufferId& indices) {
  const Shape s = shape(logits);
  if (s.size() != 2 || top_k < 1 || top_k > s[1])
    throw std::invalid_argument(
        fmt::format("layer '{}': top {} of {} experts", name, top_k, s.size() == 2 ? s[1] : 0));
  const std::int64_t tokens = s[0], experts = s[1];
  const double logit_count = static_cast<double>(element_count(s));
  // softmax(logits, dtype=float) is kept in fp32; topk's weights go back to the compute type
  // (`.to(hidden_states.dtype)`), its indices are int64.
  const BufferId probs = activation_buffer(name + ".probs", static_cast<std::uint64_t>(tokens * experts),
                                           DType::fp32);
  indices = activation_buffer(name + ".indices", static_cast<std::uint64_t>(tokens * top_k),
                              DType::int64);
  const Value weights = new_value(name + ".weights", {tokens, top_k}, values_[logits.id].requires_grad);
  emit(name, "softmax", {buffer(logits)}, {probs, buffer(weights), indices}, {},
       (kSoftmaxFlops + kTopKFlops) * logit_count);

  // Saves the probabilities (softmax's output) and the picks (topk's indices): the weights'
  // gradient is scattered into the picked columns, then through the softmax.
  const BufferId picked = indices;
  record_backward([=, this] {
    if (!has_grad(weights)) return;
    const BufferId g = take_grad(weights);
    if (!values_[logits.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, logits);
    emit(name + ".backward", "softmax_backward", {g, probs, picked}, {gi}, {},
         (kSoftmaxFlops + kTopKFlops) * logit_count);
    contribute(logits, gi, name);
  });
  return weights;
}

Value ModelBuilder::dispatch(const std::string& name, Value x, std::int64_t rows,
                             BufferId indices) {
  const Shape s = shape(x);
  // More rows than x has is a gather that repeats them (top-k picks, expert parallelism's
  // permutation of every routed token).
  if (s.size() != 2 || rows < 1)
    throw std::invalid_argument(fmt::format("layer '{}': {} of {} rows", name, rows, s[0]));
  const bool rg = values_[x.id].requires_grad;
  const Value y = new_value(name + ".out", {rows, s[1]}, rg);
  emit(name, "copy", {buffer(x), indices}, {buffer(y)}, {}, 0);
  // index_select saves only the indices; its backward scatters the rows' gradient into
  // zeros of x's shape, which autograd then sums with x's other gradients.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "select_backward", {g, indices}, {gi}, {},
         static_cast<double>(element_count(shape(y))));
    contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::zeros(const std::string& name, Shape s) {
  const Value y = new_value(name, std::move(s), false);
  emit(name, "fill", {}, {buffer(y)}, {}, 0);
  return y;
}

std::pair<BufferId, BufferId> ModelBuilder::weighted_backward(const std::string& name, BufferId g, Value y,
                                                             Value weights, BufferId indices, double flops) {
  std::vector<BufferId> outs;
  BufferId gy = kNoBuffer, gw = kNoBuffer;
  if (values_[y.id].requires_grad) outs.push_back(gy = grad_buffer(name + ".y", y));
  if (values_[weights.id].requires_grad) outs.push_back(gw = grad_buffer(name + ".weights", weights));
  if (!outs.empty())
    emit(name + ".backward", "mul_backward", {g, buffer(y), buffer(weights), indices}, std::move(outs), {}, flops);
  return {gy, gw};
}

Value ModelBuilder::combine(const std::string& name, Value out, Value y, Value weights,
                            BufferId indices) {
  const Shape so = shape(out), sy = shape(y);
  if (so.size() != 2 || sy.size() != 2 || so[1] != sy[1] || sy[0] > so[0] ||
      shape(weights)[0] != so[0])
    throw std::invalid_argument(fmt::format("layer '{}': rows do not combine", name));
  const bool rg = values_[out.id].requires_grad || values_[y.id].requires_grad ||
                  values_[weights.id].requires_grad;
  const Value result = alias(out, so, rg);
  const double elements = static_cast<double>(element_count(sy));
  emit(name, "mul", {buffer(y), buffer(weights), indices}, {}, {buffer(out)},
       kCombineFlops * elements);

  // The product saves y and the weights (each the other's gradient factor), index_add_ the
  // indices. The output's gradient passes on to the earlier experts unchanged.
  record_backward([=, this] {
    if (!has_grad(result)) return;
    const BufferId g = take_grad(result);
    const auto [gy, gw] = weighted_backward(name, g, y, weights, indices, kCombineFlops * elements);
    if (values_[out.id].requires_grad) contribute(out, g, name);
    if (gy != kNoBuffer) contribute(y, gy, name);
    if (gw != kNoBuffer) contribute(weights, gw, name);
  });
  return result;
}

Value ModelBuilder::ep_all_to_all(const std::string& name, Value x) {
  const bool rg = values_[x.id].requires_grad;
  const Value y = new_value(name + ".out", shape(x), rg);
  const std::uint64_t bytes = trace_.buffers[buffer(x)].bytes;
  emit_comm(name, "all_to_all", {buffer(x)}, {buffer(y)}, {}, bytes, "ep");
  comm_backward(name, x, y, "all_to_all", bytes, "ep");
  return y;
}

Value ModelBuilder::unpermute(const std::string& name, Value y, Value weights, BufferId indices, Shape out_shape) {
  const bool rg = values_[y.id].requires_grad || values_[weights.id].requires_grad;
  const Value out = new_value(name + ".out", std::move(out_shape), rg);
  const double elements = static_cast<double>(element_count(shape(y)));
  emit(name, "mul", {buffer(y), buffer(weights), indices}, {buffer(out)}, {}, kCombineFlops * elements);
  record_backward([=, this] {
    if (!has_grad(out)) return;
    const BufferId g = take_grad(out);
    const auto [gy, gw] = weighted_backward(name, g, y, weights, indices, kCombineFlops * elements);
    if (gy != kNoBuffer) contribute(y, gy, name);
    if (gw != kNoBuffer) contribute(weights, gw, name);
  });
  return out;
}

}  // namespace memsim
