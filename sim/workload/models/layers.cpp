// The layers and losses of ModelBuilder: each emits its forward op and records its
// backward, reading exactly the tensors PyTorch saves for it.
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "sim/workload/analysis.h"
#include "sim/workload/models/builder.h"

namespace memsim {
namespace {

// FLOPs per element for the ops that are not matrix products: rough counts of the
// arithmetic in the usual kernels. These ops are bandwidth-bound, so the roofline cost
// hardly depends on them.
constexpr double kBatchNormForwardFlops = 8;    // mean, variance, normalise, scale, shift
constexpr double kBatchNormBackwardFlops = 12;  // two reductions plus the input-grad formula
constexpr double kEltwiseFlops = 1;             // relu, add, pooling backward
constexpr double kLogSoftmaxForwardFlops = 4;   // max, subtract, exp-sum, subtract log
constexpr double kLogSoftmaxBackwardFlops = 3;  // exp, scale by the row sum, subtract
constexpr double kMseFlops = 3;                 // subtract, square (or scale), sum
constexpr double kDropoutForwardFlops = 2;      // draw and compare, then scale
// cat, pad and their backward copy bytes and do no arithmetic: 0 FLOPs (the roofline
// charges them by bytes).
// Convolutions and matrix products: 2 FLOPs per multiply-accumulate; a backward pass costs
// one forward per gradient it computes (input, weight), and a bias one add per output.

std::int64_t pooled_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                         std::int64_t padding) {
  const std::int64_t out = (in + 2 * padding - kernel) / stride + 1;
  if (in + 2 * padding < kernel || out < 1)
    throw std::invalid_argument(
        fmt::format("a {}-wide input is too small for a kernel of {} with padding {}", in,
                    kernel, padding));
  return out;
}

// nn.MaxPool2d(ceil_mode=True): rounds up, but the last window must start inside the input
// or its left padding.
std::int64_t pooled_size_ceil(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                              std::int64_t padding) {
  pooled_size(in, kernel, stride, padding);  // the same checks
  std::int64_t out = (in + 2 * padding - kernel + stride - 1) / stride + 1;
  if ((out - 1) * stride >= in + padding) --out;
  return out;
}

void require_rank(const Shape& s, std::size_t rank, const std::string& layer) {
  if (s.size() != rank)
    throw std::invalid_argument(
        fmt::format("layer '{}' needs a rank-{} input, got rank {}", layer, rank, s.size()));
}

}  // namespace

std::uint64_t ModelBuilder::im2col_bytes(const Shape& in, std::int64_t kernel,
                                         std::int64_t stride, std::int64_t padding,
                                         std::int64_t groups, std::int64_t ho,
                                         std::int64_t wo) const {
  if (settings_.conv_algo != ConvAlgo::im2col) return 0;
  // A 1x1 stride-1 unpadded convolution is a GEMM on the input as it lies (Caffe's is_1x1_).
  if (kernel == 1 && stride == 1 && padding == 0) return 0;
  // One group's lowered input at a time, the buffer reused across groups.
  const auto elements =
      static_cast<std::uint64_t>(in[0] * (in[1] / groups) * kernel * kernel * ho * wo);
  return elements * static_cast<std::uint64_t>(dtype_bytes(settings_.dtype));
}

Value ModelBuilder::conv2d(const std::string& name, Value x, std::int64_t out_channels,
                           std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                           bool bias, std::int64_t groups) {
  require_rank(shape(x), 4, name);
  const Shape in = shape(x);
  const std::int64_t n = in[0], c = in[1];
  if (c % groups != 0 || out_channels % groups != 0)
    throw std::invalid_argument(fmt::format("layer '{}': channels not divisible by groups", name));
  const std::int64_t ho = pooled_size(in[2], kernel, stride, padding);
  const std::int64_t wo = pooled_size(in[3], kernel, stride, padding);
  const auto w = parameter(name + ".weight",
                           static_cast<std::uint64_t>(out_channels * (c / groups) * kernel * kernel));
  const std::uint32_t b = bias ? parameter(name + ".bias", static_cast<std::uint64_t>(out_channels))
                               : 0;
  const Value y = new_value(name + ".out", {n, out_channels, ho, wo}, true);
  const double out_elements = static_cast<double>(n * out_channels * ho * wo);
  const double macs_flops = 2.0 * out_elements * static_cast<double>((c / groups) * kernel * kernel);
  const double bias_flops = bias ? out_elements : 0;

  const std::uint64_t workspace = im2col_bytes(in, kernel, stride, padding, groups, ho, wo);
  auto with_workspace = [this, workspace](OpId id) {
    Op& op = trace_.ops[id];
    op.workspace_bytes = workspace;
    op.bytes_moved = bytes_moved(trace_, op);
  };

  std::vector<BufferId> reads{buffer(x), params_[w].weight};
  if (bias) reads.push_back(params_[b].weight);
  with_workspace(emit(name, "conv2d", std::move(reads), {buffer(y)}, {}, macs_flops + bias_flops));

  // Saves its input and weight. Backward: the input gradient (a transposed convolution)
  // and the weight gradient, each as costly as the forward; the first layer's input (the
  // images) needs no gradient, and then the weight is not read either. Under im2col the
  // weight gradient lowers the input again, and the input gradient is a GEMM into the
  // lowered shape folded back (col2im): the same workspace.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    const bool wants_input = values_[x.id].requires_grad;
    std::vector<BufferId> bw_reads{g, saved_input(x)};
    std::vector<BufferId> outs;
    BufferId gi = kNoBuffer;
    if (wants_input) {
      bw_reads.push_back(params_[w].weight);
      gi = grad_buffer(name, x);
      outs.push_back(gi);
    }
    outs.push_back(parameter_grad(w));
    if (bias) outs.push_back(parameter_grad(b));
    with_workspace(emit(name + ".backward", "conv2d_backward", std::move(bw_reads),
                        std::move(outs), {}, macs_flops * (wants_input ? 2 : 1) + bias_flops));
    if (wants_input) contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::batch_norm(const std::string& name, Value x) {
  const Shape s = shape(x);
  if (s.size() < 2) throw std::invalid_argument(fmt::format("layer '{}' needs N x C x ...", name));
  const auto channels = static_cast<std::uint64_t>(s[1]);
  const double elements = static_cast<double>(element_count(s));
  const auto gamma = parameter(name + ".weight", channels);
  const auto beta = parameter(name + ".bias", channels);
  const std::uint64_t stat_bytes = channels * dtype_bytes(settings_.dtype);
  const BufferId running_mean =
      trace_.add_buffer(name + ".running_mean", stat_bytes, Category::other, true);
  const BufferId running_var =
      trace_.add_buffer(name + ".running_var", stat_bytes, Category::other, true);
  const BufferId batches = trace_.add_buffer(name + ".num_batches_tracked",
                                             dtype_bytes(DType::int64), Category::other, true);
  const Value y = new_value(name + ".out", s, true);
  // cuDNN keeps the batch statistics in fp32 whatever the input type.
  const BufferId save_mean = activation_buffer(name + ".save_mean", channels, DType::fp32);
  const BufferId save_invstd = activation_buffer(name + ".save_invstd", channels, DType::fp32);
  emit(name, "batch_norm", {buffer(x), params_[gamma].weight, params_[beta].weight},
       {buffer(y), save_mean, save_invstd}, {running_mean, running_var, batches},
       kBatchNormForwardFlops * elements);

  // Saves its input, weight and the batch statistics; not its output.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    const bool wants_input = values_[x.id].requires_grad;
    std::vector<BufferId> outs;
    BufferId gi = kNoBuffer;
    if (wants_input) outs.push_back(gi = grad_buffer(name, x));
    outs.push_back(parameter_grad(gamma));
    outs.push_back(parameter_grad(beta));
    emit(name + ".backward", "batch_norm_backward",
         {g, buffer(x), params_[gamma].weight, save_mean, save_invstd}, std::move(outs), {},
         kBatchNormBackwardFlops * elements);
    if (wants_input) contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::relu(const std::string& name, Value x, bool inplace) {
  // Saves its result (threshold_backward masks the gradient where the output is zero): in
  // place, that is the input's buffer after the op.
  return activation(name, "relu", x, inplace, false);
}

Value ModelBuilder::relu6(const std::string& name, Value x, bool inplace) {
  // hardtanh_ saves its result; out-of-place hardtanh saves its input, so then both the
  // input and the output (the next layer's saved input) stay alive.
  return activation(name, "relu6", x, inplace, true);
}

Value ModelBuilder::activation(const std::string& name, std::string_view kind, Value x,
                               bool inplace, bool saves_input_out_of_place) {
  const double elements = static_cast<double>(element_count(shape(x)));
  const bool rg = values_[x.id].requires_grad;
  const bool in_place = inplace && settings_.inplace;
  Value y;
  if (in_place) {
    y = alias(x, shape(x), rg);
    emit(name, kind, {}, {}, {buffer(x)}, kEltwiseFlops * elements);
  } else {
    y = new_value(name + ".out", shape(x), rg);
    emit(name, kind, {buffer(x)}, {buffer(y)}, {}, kEltwiseFlops * elements);
  }
  const Value saved = !in_place && saves_input_out_of_place ? x : y;
  const std::string backward_kind = std::string(kind) + "_backward";
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", backward_kind, {g, buffer(saved)}, {gi}, {},
         kEltwiseFlops * elements);
    contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::max_pool2d(const std::string& name, Value x, std::int64_t kernel,
                               std::int64_t stride, std::int64_t padding, bool ceil_mode) {
  require_rank(shape(x), 4, name);
  const Shape in = shape(x);
  const auto size = ceil_mode ? pooled_size_ceil : pooled_size;
  const Shape out{in[0], in[1], size(in[2], kernel, stride, padding),
                  size(in[3], kernel, stride, padding)};
  const Value y = new_value(name + ".out", out, values_[x.id].requires_grad);
  const auto out_elements = static_cast<std::uint64_t>(element_count(out));
  const BufferId indices = activation_buffer(name + ".indices", out_elements, DType::int64);
  emit(name, "max_pool2d", {buffer(x)}, {buffer(y), indices}, {},
       static_cast<double>(out_elements * kernel * kernel));

  // Saves its input (max_pool2d_with_indices_backward takes `self`) and the int64 indices.
  const double in_elements = static_cast<double>(element_count(in));
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "max_pool2d_backward", {g, buffer(x), indices}, {gi}, {},
         kEltwiseFlops * in_elements);
    contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::avg_pool2d(const std::string& name, Value x, std::int64_t kernel,
                               std::int64_t stride) {
  require_rank(shape(x), 4, name);
  const Shape in = shape(x);
  const Value y = new_value(name + ".out",
                            {in[0], in[1], pooled_size(in[2], kernel, stride, 0),
                             pooled_size(in[3], kernel, stride, 0)},
                            values_[x.id].requires_grad);
  const double in_elements = static_cast<double>(element_count(in));
  emit(name, "avg_pool2d", {buffer(x)}, {buffer(y)}, {}, kEltwiseFlops * in_elements);
  // avg_pool2d_backward takes `self`: the input is saved.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "avg_pool2d_backward", {g, buffer(x)}, {gi}, {},
         kEltwiseFlops * in_elements);
    contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::adaptive_avg_pool2d(const std::string& name, Value x, std::int64_t out_size) {
  require_rank(shape(x), 4, name);
  const Shape in = shape(x);
  const Value y = new_value(name + ".out", {in[0], in[1], out_size, out_size},
                            values_[x.id].requires_grad);
  const double in_elements = static_cast<double>(element_count(in));
  emit(name, "avg_pool2d", {buffer(x)}, {buffer(y)}, {}, kEltwiseFlops * in_elements);

  // _adaptive_avg_pool2d_backward takes `self`, so PyTorch keeps the input; after a ReLU
  // (the usual case) that buffer is saved by the ReLU anyway and costs nothing extra.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "avg_pool2d_backward", {g, buffer(x)}, {gi}, {},
         kEltwiseFlops * in_elements);
    contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::dropout(const std::string& name, Value x) {
  const auto elements = static_cast<std::uint64_t>(element_count(shape(x)));
  const Value y = new_value(name + ".out", shape(x), values_[x.id].requires_grad);
  const BufferId mask = activation_buffer(name + ".mask", elements, DType::boolean);
  emit(name, "dropout", {buffer(x)}, {buffer(y), mask}, {},
       kDropoutForwardFlops * static_cast<double>(elements));
  // native_dropout_backward(grad, mask, scale): only the mask is saved.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "dropout_backward", {g, mask}, {gi}, {},
         kEltwiseFlops * static_cast<double>(elements));
    contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::add(const std::string& name, Value a, Value b) {
  if (shape(a) != shape(b))
    throw std::invalid_argument(fmt::format("layer '{}': operands differ in shape", name));
  const bool rg = values_[a.id].requires_grad || values_[b.id].requires_grad;
  const Value y = new_value(name + ".out", shape(a), rg);
  emit(name, "add", {buffer(a), buffer(b)}, {buffer(y)}, {},
       kEltwiseFlops * static_cast<double>(element_count(shape(a))));
  // Saves nothing; both operands receive the output's gradient buffer itself.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (values_[a.id].requires_grad) contribute(a, g, name);
    if (values_[b.id].requires_grad) contribute(b, g, name);
  });
  return y;
}

Value ModelBuilder::dropout_add(const std::string& name, Value x, Value residual) {
  if (shape(x) != shape(residual))
    throw std::invalid_argument(fmt::format("layer '{}': operands differ in shape", name));
  const auto elements = static_cast<std::uint64_t>(element_count(shape(x)));
  const bool rg = values_[x.id].requires_grad || values_[residual.id].requires_grad;
  const Value y = new_value(name + ".out", shape(x), rg);
  const BufferId mask = activation_buffer(name + ".mask", elements, DType::boolean);
  emit(name, "dropout_add", {buffer(x), buffer(residual)}, {buffer(y), mask}, {},
       (kDropoutForwardFlops + kEltwiseFlops) * static_cast<double>(elements));
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (values_[x.id].requires_grad) {
      const BufferId gi = grad_buffer(name, x);
      emit(name + ".backward", "dropout_backward", {g, mask}, {gi}, {},
           kEltwiseFlops * static_cast<double>(elements));
      contribute(x, gi, name);
    }
    if (values_[residual.id].requires_grad) contribute(residual, g, name);
  });
  return y;
}

Value ModelBuilder::cat(const std::string& name, const std::vector<Value>& xs) {
  if (xs.empty())
    throw std::invalid_argument(fmt::format("layer '{}': nothing to concatenate", name));
  Shape out = shape(xs.front());
  if (out.size() < 2)
    throw std::invalid_argument(fmt::format("layer '{}' needs N x C x ...", name));
  out[1] = 0;
  bool rg = false;
  std::vector<BufferId> reads;
  for (Value x : xs) {
    Shape s = shape(x);
    if (s.size() != out.size())
      throw std::invalid_argument(fmt::format("layer '{}': operands differ in rank", name));
    out[1] += s[1];
    s[1] = 0;
    Shape o = out;
    o[1] = 0;
    if (s != o)
      throw std::invalid_argument(
          fmt::format("layer '{}': operands differ beyond the channels", name));
    rg = rg || values_[x.id].requires_grad;
    reads.push_back(buffer(x));
  }
  const Value y = new_value(name + ".out", out, rg);
  emit(name, "cat", std::move(reads), {buffer(y)}, {}, 0);
  // CatBackward narrows the gradient: every input gets a view of the one buffer, which
  // lives until the last of them is used. A backward op reading such a view is charged
  // the whole buffer in bytes_moved.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    for (std::size_t i = 0; i < xs.size(); ++i)  // "<name>.<i>" tells the sums apart
      if (values_[xs[i].id].requires_grad) contribute(xs[i], g, fmt::format("{}.{}", name, i));
  });
  return y;
}

Value ModelBuilder::subsample_pad(const std::string& name, Value x, std::int64_t stride,
                                  std::int64_t out_channels) {
  require_rank(shape(x), 4, name);
  const Shape in = shape(x);
  if (out_channels < in[1])
    throw std::invalid_argument(fmt::format("layer '{}': cannot pad to fewer channels", name));
  const Value y = new_value(
      name + ".out",
      {in[0], out_channels, (in[2] + stride - 1) / stride, (in[3] + stride - 1) / stride},
      values_[x.id].requires_grad);
  emit(name, "pad", {buffer(x)}, {buffer(y)}, {}, 0);
  // Saves nothing: the backward narrows the gradient (a view) and slice_backward writes it
  // into a new zeroed tensor of the input's shape.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "pad_backward", {g}, {gi}, {}, 0);
    contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::add_(const std::string& name, Value self, Value other) {
  if (shape(self) != shape(other))
    throw std::invalid_argument(fmt::format("layer '{}': operands differ in shape", name));
  const bool rg = values_[self.id].requires_grad || values_[other.id].requires_grad;
  const Value y = alias(self, shape(self), rg);
  emit(name, "add", {buffer(other)}, {}, {buffer(self)},
       kEltwiseFlops * static_cast<double>(element_count(shape(self))));
  // Saves nothing; both operands receive the output's gradient buffer itself.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (values_[self.id].requires_grad) contribute(self, g, name);
    if (values_[other.id].requires_grad) contribute(other, g, name);
  });
  return y;
}

Value ModelBuilder::flatten(Value x) {
  const Shape in = shape(x);
  const Value y = alias(x, {in[0], element_count(in) / in[0]}, values_[x.id].requires_grad);
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (values_[x.id].requires_grad) contribute(x, g, "flatten");
  });
  return y;
}

Value ModelBuilder::linear(const std::string& name, Value x, std::int64_t out_features,
                           bool bias) {
  require_rank(shape(x), 2, name);
  const std::int64_t n = shape(x)[0], in = shape(x)[1];
  const auto w = parameter(name + ".weight", static_cast<std::uint64_t>(out_features * in));
  const std::uint32_t b = bias ? parameter(name + ".bias", static_cast<std::uint64_t>(out_features))
                               : 0;
  const double mm_flops = 2.0 * static_cast<double>(n * in * out_features);
  const double bias_flops = bias ? static_cast<double>(n * out_features) : 0;
  // What the GEMMs read: the input and the weight, or their fp8 casts.
  BufferId input = buffer(x), weight = params_[w].weight;
  if (fp8_linears_) {
    const auto elements = static_cast<std::uint64_t>(out_features * in);
    Parameter& pw = params_[w];
    pw.fp8 = trace_.add_buffer(pw.name + ".fp8", elements, Category::weight, true);
    // Five scaled tensors, each an amax history of 1024 fp32 plus scale and scale_inv.
    constexpr std::uint64_t kAmaxHistory = 1024, kScaledTensors = 5;
    const BufferId meta = trace_.add_buffer(name + ".fp8_meta", kScaledTensors * (kAmaxHistory + 2) * 4,
                                            Category::other, true);
    emit(name + ".weight.cast_fp8", "copy", {pw.weight, meta}, {}, {pw.fp8}, 0);
    weight = pw.fp8;
    const auto cached = fp8_inputs_.find(x.id);
    if (cached != fp8_inputs_.end()) {
      input = cached->second;
    } else {
      input = activation_buffer(name + ".input_fp8", static_cast<std::uint64_t>(n * in), DType::fp8);
      emit(name + ".cast_fp8", "copy", {buffer(x), meta}, {input}, {}, 0);
      fp8_inputs_.emplace(x.id, input);
    }
  }
  const bool trains = params_[w].trainable;  // the bias is made with the weight
  const Value y = new_value(name + ".out", {n, out_features}, trains || values_[x.id].requires_grad);
  std::vector<BufferId> reads{input, weight};
  if (bias) reads.push_back(params_[b].weight);
  emit(name, "linear", std::move(reads), {buffer(y)}, {}, mm_flops + bias_flops);

  // Saves input and weight (their fp8 casts in fp8). Backward: grad_out W (input),
  // grad_out^T x (weight), and a column sum of grad_out (bias). A frozen weight needs
  // neither the input nor its GEMM: only grad_out W, for a trainable layer below.
  const bool fp8 = fp8_linears_;
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    const bool wants_input = values_[x.id].requires_grad;
    std::vector<BufferId> bw_reads{g};
    // An fp8 input is saved as cast (with sequence parallelism too: the full fp8 tensor);
    // a half input is the shard to gather again under sequence parallelism.
    if (trains) bw_reads.push_back(input == buffer(x) ? saved_input(x) : input);
    std::vector<BufferId> outs;
    BufferId gi = kNoBuffer;
    if (wants_input) {
      bw_reads.push_back(weight);
      outs.push_back(gi = grad_buffer(name, x));
    }
    if (trains) outs.push_back(parameter_grad(w));
    if (bias && trains) outs.push_back(parameter_grad(b));
    const double gemms = (wants_input ? 1 : 0) + (trains ? 1 : 0);
    const OpId bw = emit(name + ".backward", "linear_backward", std::move(bw_reads),
                         std::move(outs), {}, mm_flops * gemms + (trains ? bias_flops : 0));
    if (fp8) {
      // The output gradient's fp8 cast, written and read back.
      Op& op = trace_.ops[bw];
      op.workspace_bytes = static_cast<std::uint64_t>(n * out_features);
      op.bytes_moved += 2.0 * static_cast<double>(op.workspace_bytes);
    }
    if (wants_input) contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::matmul(const std::string& name, Value x, std::int64_t out_features) {
  require_rank(shape(x), 2, name);
  const std::int64_t n = shape(x)[0], in = shape(x)[1];
  const auto w = parameter(name + ".weight", static_cast<std::uint64_t>(out_features * in));
  const bool trains = params_[w].trainable;
  const Value y = new_value(name + ".out", {n, out_features}, trains || values_[x.id].requires_grad);
  const double flops = 2.0 * static_cast<double>(n * in * out_features);
  emit(name, "matmul", {buffer(x), params_[w].weight}, {buffer(y)}, {}, flops);

  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    BufferId gi = kNoBuffer;
    if (values_[x.id].requires_grad) {
      gi = grad_buffer(name, x);
      emit(name + ".backward_input", "matmul_backward", {g, params_[w].weight}, {gi}, {}, flops);
    }
    if (trains)
      emit(name + ".backward_weight", "matmul_backward", {g, saved_input(x)}, {parameter_grad(w)}, {},
           flops);
    if (gi != kNoBuffer) contribute(x, gi, name);
  });
  return y;
}

// ---------------------------------------------------------------------------------------
// Losses

void ModelBuilder::cross_entropy(Value logits, Value labels) {
  require_rank(shape(logits), 2, "cross_entropy");
  const double n = static_cast<double>(shape(logits)[0]);
  const double elements = static_cast<double>(element_count(shape(logits)));
  // Nothing trains below the logits (every weight frozen): no backward at all.
  const bool rg = values_[logits.id].requires_grad;
  const Value log_probs = new_value("log_softmax.out", shape(logits), rg);
  emit("log_softmax", "log_softmax", {buffer(logits)}, {buffer(log_probs)}, {},
       kLogSoftmaxForwardFlops * elements);
  const BufferId loss = activation_buffer("loss", 1, settings_.dtype);
  const BufferId total_weight = activation_buffer("nll_loss.total_weight", 1, settings_.dtype);
  emit("nll_loss", "nll_loss", {buffer(log_probs), buffer(labels)}, {loss, total_weight}, {},
       n);

  // log_softmax saves its result; nll_loss saves its input, the labels and total_weight.
  record_backward([=, this] {
    if (!has_grad(log_probs)) return;
    const BufferId g = take_grad(log_probs);
    const BufferId gi = grad_buffer("log_softmax", logits);
    emit("log_softmax.backward", "log_softmax_backward", {g, buffer(log_probs)}, {gi}, {},
         kLogSoftmaxBackwardFlops * elements);
    contribute(logits, gi, "log_softmax");
  });
  record_backward([=, this] {
    if (!rg) return;
    const BufferId gi = grad_buffer("nll_loss", log_probs);
    // Writes the whole (mostly zero) gradient, then scatters -1/N at the labels.
    emit("nll_loss.backward", "nll_loss_backward",
         {buffer(log_probs), buffer(labels), total_weight}, {gi}, {}, kEltwiseFlops * elements);
    contribute(log_probs, gi, "nll_loss");
  });
}

void ModelBuilder::mse_loss(Value y, Value target) {
  if (shape(y) != shape(target))
    throw std::invalid_argument("mse_loss: prediction and target differ in shape");
  const double elements = static_cast<double>(element_count(shape(y)));
  const BufferId loss = activation_buffer("loss", 1, settings_.dtype);
  emit("mse_loss", "mse_loss", {buffer(y), buffer(target)}, {loss}, {}, kMseFlops * elements);
  record_backward([=, this] {
    if (!values_[y.id].requires_grad) return;
    const BufferId gi = grad_buffer("mse_loss", y);
    emit("mse_loss.backward", "mse_loss_backward", {buffer(y), buffer(target)}, {gi}, {},
         kMseFlops * elements);
    contribute(y, gi, "mse_loss");
  });
}

}  // namespace memsim
