// The sequence-model layers of ModelBuilder (embeddings, norms, activations, views);
// attention() is in attention_layer.cpp, recurrent() in recurrent_layer.cpp, the fused
// SwiGLU and the unfused norms and softmax in fused_kernels.cpp. As in layers.cpp, each
// layer emits its forward op and records a backward that reads exactly what PyTorch saves
// for it, so the saved tensors stay alive until then.
#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"

namespace memsim {
namespace {

// FLOPs per element of the bandwidth-bound ops: rough counts of the arithmetic in the usual
// kernels (the roofline cost of these ops hardly depends on them).
constexpr double kEltwiseFlops = 1;             // add, mul, scatter-add, select
constexpr double kNormForwardFlops = 8;         // mean, variance, normalise, scale, shift
constexpr double kNormBackwardFlops = 12;       // two row reductions plus the input grad
constexpr double kRmsNormForwardFlops = 5;      // square, row sum, rsqrt, scale, weight
constexpr double kRmsNormBackwardFlops = 8;
constexpr double kGeluForwardFlops = 8;         // erf or tanh polynomial
constexpr double kGeluBackwardFlops = 12;
constexpr double kSiluForwardFlops = 4;         // exp, add, divide, multiply
constexpr double kSiluBackwardFlops = 6;
constexpr double kTanhForwardFlops = 4;
constexpr double kTanhBackwardFlops = 2;        // g * (1 - y^2)
constexpr double kSoftmaxForwardFlops = 4;      // max, exp, sum, divide
constexpr double kSoftmaxBackwardFlops = 3;     // dot with the output, subtract, scale
constexpr double kRotaryFlops = 3;              // x cos + rotate_half(x) sin

void require_rank(const Shape& s, std::size_t rank, const std::string& layer) {
  if (s.size() != rank)
    throw std::invalid_argument(
        fmt::format("layer '{}' needs a rank-{} input, got rank {}", layer, rank, s.size()));
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Gradient plumbing

BufferId ModelBuilder::param_grad_target(std::uint32_t p, const std::string& part_name) {
  if (params_[p].grad == kNoBuffer) return parameter_grad(p);
  const BufferId part = trace_.add_buffer(part_name, trace_.buffers[params_[p].weight].bytes,
                                          Category::gradient);
  // With fp32 main grads each part is added into main_grad as it is made (see emit).
  if (params_[p].main_grad != kNoBuffer) pending_main_grads_.emplace_back(p, part);
  return part;
}

void ModelBuilder::add_param_grad(std::uint32_t p, BufferId target, const std::string& op_name) {
  if (target == params_[p].grad || params_[p].main_grad != kNoBuffer) return;
  emit(op_name, "accumulate_grad", {target}, {}, {params_[p].grad},
       kEltwiseFlops * static_cast<double>(params_[p].elements));
}

std::uint32_t ModelBuilder::find_parameter(const std::string& name) const {
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == name) return static_cast<std::uint32_t>(i);
  throw std::logic_error(fmt::format("no parameter named '{}'", name));
}

// ---------------------------------------------------------------------------------------
// Embeddings and projections

Value ModelBuilder::embedding(const std::string& name, Value indices, std::int64_t rows,
                              std::int64_t dim) {
  require_rank(shape(indices), 1, name);
  const std::int64_t k = shape(indices)[0];
  const auto w = parameter(name + ".weight", static_cast<std::uint64_t>(rows * dim));
  const Value y = new_value(name + ".out", {k, dim}, params_[w].trainable);
  const OpId id = emit(name, "embedding", {buffer(indices), params_[w].weight}, {buffer(y)}, {}, 0);
  // A gather reads at most k rows of the table, not all of it, and writes k rows.
  const double row_bytes = static_cast<double>(dim * dtype_bytes(settings_.dtype));
  trace_.ops[id].bytes_moved = static_cast<double>(trace_.buffers[buffer(indices)].bytes) +
                               static_cast<double>(std::min(k, rows) + k) * row_bytes;

  // Saves the indices. embedding_dense_backward zero-fills a full table gradient and
  // scatter-adds the k rows of the output gradient into it.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    const BufferId target = param_grad_target(w, name + ".weight.grad_part");
    emit(name + ".backward", "embedding_backward", {g, buffer(indices)}, {target}, {},
         kEltwiseFlops * static_cast<double>(k * dim));
    add_param_grad(w, target, name + ".weight.accumulate_grad");
  });
  return y;
}

Value ModelBuilder::tied_linear(const std::string& name, Value x, const std::string& weight_name,
                                bool bias) {
  require_rank(shape(x), 2, name);
  const std::int64_t n = shape(x)[0], in = shape(x)[1];
  const auto w = find_parameter(weight_name);
  const auto out_features = static_cast<std::int64_t>(params_[w].elements) / in;
  if (out_features * in != static_cast<std::int64_t>(params_[w].elements))
    throw std::invalid_argument(
        fmt::format("layer '{}': '{}' has no rows of {} features", name, weight_name, in));
  const std::uint32_t b =
      bias ? parameter(name + ".bias", static_cast<std::uint64_t>(out_features)) : 0;
  // W frozen with its other user (the embeddings); the bias may train on its own.
  const bool trains = params_[w].trainable, bias_trains = bias && params_[b].trainable;
  const Value y = new_value(name + ".out", {n, out_features}, trains || bias_trains || values_[x.id].requires_grad);
  const double mm_flops = 2.0 * static_cast<double>(n * in * out_features);
  const double bias_flops = bias ? static_cast<double>(n * out_features) : 0;
  std::vector<BufferId> reads{buffer(x), params_[w].weight};
  if (bias) reads.push_back(params_[b].weight);
  emit(name, "linear", std::move(reads), {buffer(y)}, {}, mm_flops + bias_flops);

  // As linear(); the weight gradient is added to what the other user of W contributes.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    const bool wants_input = values_[x.id].requires_grad;
    std::vector<BufferId> bw_reads{g};
    if (trains) bw_reads.push_back(saved_input(x));
    std::vector<BufferId> outs;
    BufferId gi = kNoBuffer;
    if (wants_input) {
      bw_reads.push_back(params_[w].weight);
      outs.push_back(gi = grad_buffer(name, x));
    }
    const BufferId wg = trains ? param_grad_target(w, name + ".weight.grad_part") : kNoBuffer;
    if (trains) outs.push_back(wg);
    if (bias_trains) outs.push_back(param_grad_target(b, name + ".bias.grad_part"));
    const double gemms = (wants_input ? 1 : 0) + (trains ? 1 : 0);
    emit(name + ".backward", "linear_backward", std::move(bw_reads), std::move(outs), {},
         mm_flops * gemms + (bias_trains ? bias_flops : 0));
    if (trains) add_param_grad(w, wg, name + ".weight.accumulate_grad");
    if (wants_input) contribute(x, gi, name);
  });
  return y;
}

// ---------------------------------------------------------------------------------------
// Normalisation

Value ModelBuilder::layer_norm(const std::string& name, Value x) {
  if (!settings_.fused.layer_norm) return unfused_layer_norm(name, x);
  const Shape s = shape(x);
  const std::int64_t features = s.back();
  const std::int64_t rows = element_count(s) / features;
  const double elements = static_cast<double>(element_count(s));
  const auto gamma = parameter(name + ".weight", static_cast<std::uint64_t>(features));
  const auto beta = parameter(name + ".bias", static_cast<std::uint64_t>(features));
  const bool trains = params_[gamma].trainable;
  const Value y = new_value(name + ".out", s, trains || values_[x.id].requires_grad);
  // The row statistics are kept in fp32 whatever the input type (CUDA's acc_type).
  const auto stat_rows = static_cast<std::uint64_t>(rows);
  const BufferId mean = activation_buffer(name + ".mean", stat_rows, DType::fp32);
  const BufferId rstd = activation_buffer(name + ".rstd", stat_rows, DType::fp32);
  emit(name, "layer_norm", {buffer(x), params_[gamma].weight, params_[beta].weight},
       {buffer(y), mean, rstd}, {}, kNormForwardFlops * elements);

  // native_layer_norm saves its input, weight, mean and rstd; not its output.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    const bool wants_input = values_[x.id].requires_grad;
    std::vector<BufferId> outs;
    BufferId gi = kNoBuffer;
    if (wants_input) outs.push_back(gi = grad_buffer(name, x));
    if (trains) {
      outs.push_back(parameter_grad(gamma));
      outs.push_back(parameter_grad(beta));
    }
    emit(name + ".backward", "layer_norm_backward",
         {g, buffer(x), mean, rstd, params_[gamma].weight}, std::move(outs), {},
         kNormBackwardFlops * elements);
    if (wants_input) contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::rms_norm(const std::string& name, Value x) {
  if (!settings_.fused.layer_norm) return unfused_rms_norm(name, x);
  const Shape s = shape(x);
  const std::int64_t features = s.back();
  const double elements = static_cast<double>(element_count(s));
  const auto gamma = parameter(name + ".weight", static_cast<std::uint64_t>(features));
  const bool trains = params_[gamma].trainable;
  const Value y = new_value(name + ".out", s, trains || values_[x.id].requires_grad);
  const BufferId rstd = activation_buffer(
      name + ".rstd", static_cast<std::uint64_t>(element_count(s) / features), DType::fp32);
  emit(name, "rms_norm", {buffer(x), params_[gamma].weight}, {buffer(y), rstd}, {},
       kRmsNormForwardFlops * elements);

  // A fused kernel (torch's fused rms_norm, apex FusedRMSNorm) saves input, weight and
  // rstd. Hugging Face's eager LlamaRMSNorm is unfused_rms_norm.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    const bool wants_input = values_[x.id].requires_grad;
    std::vector<BufferId> outs;
    BufferId gi = kNoBuffer;
    if (wants_input) outs.push_back(gi = grad_buffer(name, x));
    if (trains) outs.push_back(parameter_grad(gamma));
    emit(name + ".backward", "rms_norm_backward", {g, buffer(x), rstd, params_[gamma].weight},
         std::move(outs), {}, kRmsNormBackwardFlops * elements);
    if (wants_input) contribute(x, gi, name);
  });
  return y;
}

// ---------------------------------------------------------------------------------------
// Elementwise

// The three activations differ only in what their backward reads.
Value ModelBuilder::unary(const std::string& name, Value x, std::string_view kind,
                          double forward_flops, double backward_flops, bool saves_output) {
  const double elements = static_cast<double>(element_count(shape(x)));
  const bool rg = values_[x.id].requires_grad;
  const Value y = new_value(name + ".out", shape(x), rg);
  emit(name, kind, {buffer(x)}, {buffer(y)}, {}, forward_flops * elements);
  const std::string backward_kind = std::string(kind) + "_backward";
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", backward_kind, {g, saves_output ? buffer(y) : buffer(x)}, {gi}, {},
         backward_flops * elements);
    contribute(x, gi, name);
  });
  return y;
}

// gelu_backward and silu_backward take the input; tanh_backward the output.
Value ModelBuilder::gelu(const std::string& name, Value x) {
  return unary(name, x, "gelu", kGeluForwardFlops, kGeluBackwardFlops, false);
}
Value ModelBuilder::silu(const std::string& name, Value x) {
  return unary(name, x, "silu", kSiluForwardFlops, kSiluBackwardFlops, false);
}
Value ModelBuilder::tanh(const std::string& name, Value x) {
  return unary(name, x, "tanh", kTanhForwardFlops, kTanhBackwardFlops, true);
}

Value ModelBuilder::mul(const std::string& name, Value a, Value b) {
  if (shape(a) != shape(b))
    throw std::invalid_argument(fmt::format("layer '{}': operands differ in shape", name));
  const double elements = static_cast<double>(element_count(shape(a)));
  const bool a_rg = values_[a.id].requires_grad, b_rg = values_[b.id].requires_grad;
  const Value y = new_value(name + ".out", shape(a), a_rg || b_rg);
  emit(name, "mul", {buffer(a), buffer(b)}, {buffer(y)}, {}, kEltwiseFlops * elements);

  // Saves each operand the other's gradient needs: d(ab)/da = b, d(ab)/db = a.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    std::vector<BufferId> reads{g};
    std::vector<BufferId> outs;
    BufferId ga = kNoBuffer, gb = kNoBuffer;
    if (a_rg) {
      reads.push_back(buffer(b));
      outs.push_back(ga = trace_.add_buffer(name + ".grad_a", trace_.buffers[g].bytes,
                                            Category::activation_grad));
    }
    if (b_rg) {
      reads.push_back(buffer(a));
      outs.push_back(gb = trace_.add_buffer(name + ".grad_b", trace_.buffers[g].bytes,
                                            Category::activation_grad));
    }
    if (outs.empty()) return;
    emit(name + ".backward", "mul_backward", std::move(reads), std::move(outs), {},
         kEltwiseFlops * elements * static_cast<double>(a_rg + b_rg));
    if (a_rg) contribute(a, ga, name);
    if (b_rg) contribute(b, gb, name);
  });
  return y;
}

Value ModelBuilder::add_broadcast(const std::string& name, Value a, Value b) {
  const Shape sa = shape(a), sb = shape(b);
  if (sa == sb) return add(name, a, b);
  require_rank(sa, 2, name);
  require_rank(sb, 2, name);
  if (sa[1] != sb[1] || sa[0] % sb[0] != 0)
    throw std::invalid_argument(
        fmt::format("layer '{}': a {}-row operand does not repeat to {} rows", name, sb[0], sa[0]));
  const bool a_rg = values_[a.id].requires_grad, b_rg = values_[b.id].requires_grad;
  const double elements = static_cast<double>(element_count(sa));
  const Value y = new_value(name + ".out", sa, a_rg || b_rg);
  emit(name, "add", {buffer(a), buffer(b)}, {buffer(y)}, {}, kEltwiseFlops * elements);

  // Saves nothing. a receives the output's gradient itself; b its sum over the repeats
  // (sum_to_size), into a new buffer of b's shape.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (a_rg) contribute(a, g, name);
    if (!b_rg) return;
    const BufferId gb = grad_buffer(name + ".sum", b);
    emit(name + ".sum", "sum", {g}, {gb}, {}, kEltwiseFlops * elements);
    contribute(b, gb, name);
  });
  return y;
}

Value ModelBuilder::softmax(const std::string& name, Value x) {
  const double elements = static_cast<double>(element_count(shape(x)));
  const bool rg = values_[x.id].requires_grad;
  const Value y = new_value(name + ".out", shape(x), rg);
  emit(name, "softmax", {buffer(x)}, {buffer(y)}, {}, kSoftmaxForwardFlops * elements);
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "softmax_backward", {g, buffer(y)}, {gi}, {},
         kSoftmaxBackwardFlops * elements);
    contribute(x, gi, name);
  });
  return y;
}

// ---------------------------------------------------------------------------------------
// Views

std::vector<Value> ModelBuilder::split(const std::string& name, Value x, int parts) {
  require_rank(shape(x), 2, name);
  const Shape s = shape(x);
  if (parts < 1 || s[1] % parts != 0)
    throw std::invalid_argument(fmt::format("layer '{}': {} columns do not split in {}", name,
                                            s[1], parts));
  return split(name, x, std::vector<std::int64_t>(static_cast<std::size_t>(parts), s[1] / parts));
}

std::vector<Value> ModelBuilder::split(const std::string& name, Value x, const std::vector<std::int64_t>& widths) {
  require_rank(shape(x), 2, name);
  const Shape s = shape(x);
  std::int64_t total = 0;
  for (std::int64_t w : widths) total += w;
  if (widths.empty() || total != s[1])
    throw std::invalid_argument(fmt::format("layer '{}': {} columns are not parts of {} in all", name, s[1], total));
  const bool rg = values_[x.id].requires_grad;
  std::vector<Value> out;
  for (std::int64_t w : widths) out.push_back(alias(x, {s[0], w}, rg));

  // SplitBackward concatenates the parts' gradients (zeros for a part without one).
  record_backward([=, this] {
    std::vector<BufferId> grads;
    for (Value v : out)
      if (has_grad(v)) grads.push_back(take_grad(v));
    if (grads.empty() || !values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "cat", std::move(grads), {gi}, {}, 0);
    contribute(x, gi, name);
  });
  return out;
}

Value ModelBuilder::select(const std::string& name, Value x, Shape view) {
  if (element_count(view) > element_count(shape(x)))
    throw std::invalid_argument(fmt::format("layer '{}': the view is larger than its base", name));
  const Value y = alias(x, std::move(view), values_[x.id].requires_grad);
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "select_backward", {g}, {gi}, {},
         kEltwiseFlops * static_cast<double>(element_count(shape(x))));
    contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::rotary(const std::string& name, Value x, Value cos, Value sin) {
  const double elements = static_cast<double>(element_count(shape(x)));
  const bool rg = values_[x.id].requires_grad;
  const Value y = new_value(name + ".out", shape(x), rg);
  emit(name, "rotary_embedding", {buffer(x), buffer(cos), buffer(sin)}, {buffer(y)}, {},
       kRotaryFlops * elements);
  // x * cos + rotate_half(x) * sin: the products save only the tables (they need no
  // gradient); x itself is not kept.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "rotary_embedding_backward", {g, buffer(cos), buffer(sin)}, {gi},
         {}, kRotaryFlops * elements);
    contribute(x, gi, name);
  });
  return y;
}

}  // namespace memsim
