// Megatron-LM's fused kernels of a transformer layer and the unfused ops they replace
// (FusedKernels in builder.h, the transformer generators' fused_* parameters):
//   - swiglu: bias_swiglu_impl, one kernel over the fc1 output [gate | up]; the unfused
//     SwiGLU is silu() and mul() of seq_layers.cpp;
//   - bias_add: a linear's bias added outside its GEMM, for the unfused bias-GeLU; the
//     fused one is linear() with its bias, then gelu();
//   - unfused_layer_norm, unfused_rms_norm: the norms as eager code writes them out; the
//     fused ones are layer_norm() and rms_norm() of seq_layers.cpp;
//   - the unfused scale-mask-softmax of the materialised attention (attention_layer.cpp).
// An unfused form emits one op per autograd node of the eager code it follows, and one
// backward op per node that has one, reading what that node saves. A node's gradient for a
// broadcast operand (a row statistic, a weight) is summed over the broadcast in the same op.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"

namespace memsim {
namespace {

// FLOPs per element, rough counts as in seq_layers.cpp (these ops are bandwidth-bound).
constexpr double kEltwiseFlops = 1;
constexpr double kSwigluForwardFlops = 5;   // silu (exp, add, divide, multiply), product
constexpr double kSwigluBackwardFlops = 8;  // silu's derivative, the two products
constexpr double kSoftmaxForwardFlops = 4;  // max, exp, sum, divide
constexpr double kSoftmaxBackwardFlops = 3;

}  // namespace

// ---------------------------------------------------------------------------------------
// Fused SwiGLU and the separate bias add

Value ModelBuilder::swiglu(const std::string& name, Value x) {
  const Shape s = shape(x);
  if (s.size() != 2 || s[1] % 2 != 0)
    throw std::invalid_argument(fmt::format("layer '{}' needs tokens x 2f (gate and up side by side)", name));
  const std::int64_t ffn = s[1] / 2;
  const double elements = static_cast<double>(s[0] * ffn);
  const Value y = new_value(name + ".out", {s[0], ffn}, values_[x.id].requires_grad);
  emit(name, "swiglu", {buffer(x)}, {buffer(y)}, {}, kSwigluForwardFlops * elements);
  // SwiGLUFunction saves its input only: the backward computes silu(gate) again from it and
  // writes the gradient of both halves into one tokens x 2f buffer.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "swiglu_backward", {g, buffer(x)}, {gi}, {}, kSwigluBackwardFlops * elements);
    contribute(x, gi, name);
  });
  return y;
}

Value ModelBuilder::bias_add(const std::string& name, Value x, const std::string& bias_name) {
  const Shape s = shape(x);
  const double elements = static_cast<double>(element_count(s));
  const auto b = parameter(bias_name, static_cast<std::uint64_t>(s.back()));
  const bool trains = params_[b].trainable;
  const Value y = new_value(name + ".out", s, trains || values_[x.id].requires_grad);
  emit(name, "add", {buffer(x), params_[b].weight}, {buffer(y)}, {}, kEltwiseFlops * elements);
  // AddBackward0 saves nothing: x receives the output's gradient itself, the bias its sum
  // over the rows.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (trains) emit(name + ".backward", "sum", {g}, {parameter_grad(b)}, {}, kEltwiseFlops * elements);
    if (values_[x.id].requires_grad) contribute(x, g, name);
  });
  return y;
}

// ---------------------------------------------------------------------------------------
// Unfused norms

// pytorch-pretrained-BERT's BertLayerNorm (the "TF style" LayerNorm Hugging Face shipped
// before apex and torch's own kernel were fast), every tensor in dtype:
//   u = x.mean(-1, keepdim=True)
//   s = (x - u).pow(2).mean(-1, keepdim=True)
//   x = (x - u) / torch.sqrt(s + eps)
//   return self.weight * x + self.bias
// Saved: x - u twice (by the pow and by the division), the row std (by sqrt and the
// division) and the normalised x (by the weight product); not x itself.
Value ModelBuilder::unfused_layer_norm(const std::string& name, Value x) {
  const Shape s = shape(x);
  const std::int64_t features = s.back();
  const auto elements = static_cast<std::uint64_t>(element_count(s));
  const std::uint64_t rows = elements / static_cast<std::uint64_t>(features);
  const double e = static_cast<double>(elements), r = static_cast<double>(rows);
  const DType d = settings_.dtype;
  const auto gamma = parameter(name + ".weight", static_cast<std::uint64_t>(features));
  const auto beta = parameter(name + ".bias", static_cast<std::uint64_t>(features));
  auto out = [&](const char* op, std::uint64_t n) { return activation_buffer(name + op + ".out", n, d); };

  const BufferId mean = out(".mean", rows);
  emit(name + ".mean", "sum", {buffer(x)}, {mean}, {}, e);
  const BufferId centred = out(".sub", elements);
  emit(name + ".sub", "add", {buffer(x), mean}, {centred}, {}, e);
  const BufferId squared = out(".pow", elements);
  emit(name + ".pow", "mul", {centred}, {squared}, {}, e);
  const BufferId variance = out(".var", rows);
  emit(name + ".var", "sum", {squared}, {variance}, {}, e);
  const BufferId centred_again = out(".sub_again", elements);
  emit(name + ".sub_again", "add", {buffer(x), mean}, {centred_again}, {}, e);
  const BufferId shifted = out(".add_eps", rows);
  emit(name + ".add_eps", "add", {variance}, {shifted}, {}, r);
  const BufferId std_dev = out(".sqrt", rows);
  emit(name + ".sqrt", "elementwise", {shifted}, {std_dev}, {}, r);
  const BufferId normed = out(".div", elements);
  emit(name + ".div", "mul", {centred_again, std_dev}, {normed}, {}, e);
  const BufferId scaled = out(".mul_weight", elements);
  emit(name + ".mul_weight", "mul", {params_[gamma].weight, normed}, {scaled}, {}, e);
  const bool trains = params_[gamma].trainable;
  const Value y = new_value(name + ".out", s, trains || values_[x.id].requires_grad);
  emit(name + ".add_bias", "add", {scaled, params_[beta].weight}, {buffer(y)}, {}, e);

  // In autograd's order: the bias, the weight, the division, then the sqrt, the second
  // subtraction, the variance's mean, the square, the first subtraction, the mean.
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    auto grad = [&](const std::string& of, std::uint64_t n) {
      return trace_.add_buffer(name + of, n * dtype_bytes(d), Category::activation_grad);
    };
    if (trains) emit(name + ".add_bias.backward", "sum", {g}, {parameter_grad(beta)}, {}, e);
    if (!values_[x.id].requires_grad) {
      emit(name + ".mul_weight.backward", "mul_backward", {g, normed}, {parameter_grad(gamma)}, {}, 2 * e);
      return;
    }
    const BufferId g_normed = grad(".mul_weight.grad_input", elements);
    if (trains)
      emit(name + ".mul_weight.backward", "mul_backward", {g, normed, params_[gamma].weight},
           {g_normed, parameter_grad(gamma)}, {}, 3 * e);
    else  // frozen: the weight's product alone, normed not read
      emit(name + ".mul_weight.backward", "mul_backward", {g, params_[gamma].weight}, {g_normed}, {}, e);
    // (x - u) / std: g / std, and -(g (x - u)).sum(-1) / std^2.
    const BufferId g_centred_again = grad(".div.grad_a", elements), g_std = grad(".div.grad_b", rows);
    emit(name + ".div.backward", "mul_backward", {g_normed, centred_again, std_dev}, {g_centred_again, g_std}, {},
         4 * e);
    const BufferId g_shifted = grad(".sqrt.grad_input", rows);  // the add of eps passes it on
    emit(name + ".sqrt.backward", "elementwise", {g_std, std_dev}, {g_shifted}, {}, 2 * r);
    // x - u: x receives the gradient itself, u its negated row sum.
    const BufferId g_mean = grad(".sub_again.grad_b", rows);
    emit(name + ".sub_again.backward", "sum", {g_centred_again}, {g_mean}, {}, e);
    contribute(x, g_centred_again, name + ".sub_again");
    // The mean's backward spreads the row's gradient over its features, divided by them.
    const BufferId g_squared = grad(".var.grad_input", elements);
    emit(name + ".var.backward", "elementwise", {g_shifted}, {g_squared}, {}, e);
    const BufferId g_centred = grad(".pow.grad_input", elements);
    emit(name + ".pow.backward", "mul_backward", {g_squared, centred}, {g_centred}, {}, 2 * e);
    const BufferId g_mean_too = grad(".sub.grad_b", rows);
    emit(name + ".sub.backward", "sum", {g_centred}, {g_mean_too}, {}, e);
    emit(name + ".mean.out.accumulate_grad", "accumulate_grad", {g_mean_too}, {}, {g_mean}, r);
    contribute(x, g_centred, name + ".sub");
    const BufferId g_x = grad(".mean.grad_input", elements);
    emit(name + ".mean.backward", "elementwise", {g_mean}, {g_x}, {}, e);
    contribute(x, g_x, name + ".mean");
  });
  return y;
}

// Hugging Face's eager LlamaRMSNorm:
//   hidden_states = hidden_states.to(torch.float32)
//   variance = hidden_states.pow(2).mean(-1, keepdim=True)
//   hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
//   return self.weight * hidden_states.to(input_dtype)
// The casts are no ops for fp32. Saved: the fp32 input (by the square and the product),
// the fp32 rstd (by rsqrt and the product) and the normalised input in dtype (by the
// weight product).
Value ModelBuilder::unfused_rms_norm(const std::string& name, Value x) {
  const Shape s = shape(x);
  const std::int64_t features = s.back();
  const auto elements = static_cast<std::uint64_t>(element_count(s));
  const std::uint64_t rows = elements / static_cast<std::uint64_t>(features);
  const double e = static_cast<double>(elements), r = static_cast<double>(rows);
  const DType d = settings_.dtype;
  const bool cast = d != DType::fp32;
  const auto gamma = parameter(name + ".weight", static_cast<std::uint64_t>(features));
  auto fp32 = [&](const char* op, std::uint64_t n) { return activation_buffer(name + op + ".out", n, DType::fp32); };

  BufferId x32 = buffer(x);
  if (cast) {
    x32 = fp32(".to_fp32", elements);
    emit(name + ".to_fp32", "copy", {buffer(x)}, {x32}, {}, 0);
  }
  const BufferId squared = fp32(".pow", elements);
  emit(name + ".pow", "mul", {x32}, {squared}, {}, e);
  const BufferId variance = fp32(".mean", rows);
  emit(name + ".mean", "sum", {squared}, {variance}, {}, e);
  const BufferId shifted = fp32(".add_eps", rows);
  emit(name + ".add_eps", "add", {variance}, {shifted}, {}, r);
  const BufferId rstd = fp32(".rsqrt", rows);
  emit(name + ".rsqrt", "elementwise", {shifted}, {rstd}, {}, r);
  const BufferId normed32 = fp32(".mul", elements);
  emit(name + ".mul", "mul", {x32, rstd}, {normed32}, {}, e);
  BufferId normed = normed32;
  if (cast) {
    normed = activation_buffer(name + ".to_dtype.out", elements, d);
    emit(name + ".to_dtype", "copy", {normed32}, {normed}, {}, 0);
  }
  const bool trains = params_[gamma].trainable;
  const Value y = new_value(name + ".out", s, trains || values_[x.id].requires_grad);
  emit(name + ".mul_weight", "mul", {params_[gamma].weight, normed}, {buffer(y)}, {}, e);

  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    auto grad = [&](const std::string& of, std::uint64_t n, DType t) {
      return trace_.add_buffer(name + of, n * dtype_bytes(t), Category::activation_grad);
    };
    if (!values_[x.id].requires_grad) {
      emit(name + ".mul_weight.backward", "mul_backward", {g, normed}, {parameter_grad(gamma)}, {}, 2 * e);
      return;
    }
    const BufferId g_normed = grad(".mul_weight.grad_input", elements, d);
    if (trains)
      emit(name + ".mul_weight.backward", "mul_backward", {g, normed, params_[gamma].weight},
           {g_normed, parameter_grad(gamma)}, {}, 3 * e);
    else  // frozen: the weight's product alone, normed not read
      emit(name + ".mul_weight.backward", "mul_backward", {g, params_[gamma].weight}, {g_normed}, {}, e);
    BufferId g_normed32 = g_normed;
    if (cast) {
      g_normed32 = grad(".to_dtype.grad_input", elements, DType::fp32);
      emit(name + ".to_dtype.backward", "copy", {g_normed}, {g_normed32}, {}, 0);
    }
    // x32 * rstd: x32's gradient g rstd, rstd's (g x32).sum(-1).
    const BufferId g_x32 = grad(".mul.grad_a", elements, DType::fp32), g_rstd = grad(".mul.grad_b", rows, DType::fp32);
    emit(name + ".mul.backward", "mul_backward", {g_normed32, rstd, x32}, {g_x32, g_rstd}, {}, 3 * e);
    const BufferId g_shifted = grad(".rsqrt.grad_input", rows, DType::fp32);  // the add of eps passes it on
    emit(name + ".rsqrt.backward", "elementwise", {g_rstd, rstd}, {g_shifted}, {}, 3 * r);
    // The mean's backward spreads the row's gradient over its features, divided by them.
    const BufferId g_squared = grad(".mean.grad_input", elements, DType::fp32);
    emit(name + ".mean.backward", "elementwise", {g_shifted}, {g_squared}, {}, e);
    const BufferId g_x32_too = grad(".pow.grad_input", elements, DType::fp32);
    emit(name + ".pow.backward", "mul_backward", {g_squared, x32}, {g_x32_too}, {}, 2 * e);
    if (!cast) {  // x32 is x: its two gradients go where x's others go
      contribute(x, g_x32, name + ".mul");
      contribute(x, g_x32_too, name + ".pow");
      return;
    }
    emit(name + ".to_fp32.out.accumulate_grad", "accumulate_grad", {g_x32_too}, {}, {g_x32}, e);
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".to_fp32.backward", "copy", {g_x32}, {gi}, {}, 0);
    contribute(x, gi, name);
  });
  return y;
}

// ---------------------------------------------------------------------------------------
// Unfused scale-mask-softmax: Megatron's FusedScaleMaskSoftmax.forward_torch_softmax, with
// the scale and attention_softmax_in_fp32 (what apply_query_key_layer_scaling sets):
//   if input_in_float16 and softmax_in_fp32: input = input.float()
//   input = input * scale
//   mask_output = attention_mask_func(input, mask)    # masked_fill_(mask, -10000.0)
//   probs = torch.nn.Softmax(dim=-1)(mask_output)
//   if input_in_float16 and softmax_in_fp32: probs = probs.half()  # or bfloat16()
// The scale saves nothing (a product with a constant), the mask fill its bool mask, the
// softmax its (fp32) output; the fused kernel saves only its output, in dtype.

// Megatron-LM's FusedScaleMaskSoftmax.is_kernel_available (megatron/model/fused_softmax.py;
// the same test in Megatron-DeepSpeed and megatron/core/fusions/fused_softmax.py): the fused
// kernel takes fp16 or bf16 scores [b, np, sq, sk] with 16 < sk <= 4096, sq and sk multiples of
// 4 and b x np a multiple of 4; then, with a causal mask, b x np a multiple of the kernel's rows
// per thread block, or with a padding mask sq one. get_batch_per_block (its CUDA header): 128
// threads a block, a warp of min(32, next power of two of sk) threads a row, two rows a warp
// when that power is at most 128. Any other shape runs forward_torch_softmax, the unfused path.
// Example: 16 heads over tensor parallelism 8 at micro-batch 1 is b x np = 2, unfused.
bool megatron_softmax_kernel_takes(DType dtype, std::int64_t batch, std::int64_t heads, std::int64_t seq,
                                   bool causal) {
  if (dtype != DType::fp16 && dtype != DType::bf16) return false;
  const std::int64_t rows = batch * heads;
  if (seq <= 16 || seq > 4096 || seq % 4 != 0 || rows % 4 != 0) return false;
  std::int64_t pow2 = 1;
  while (pow2 < seq) pow2 *= 2;
  const std::int64_t warp = std::min<std::int64_t>(pow2, 32);
  const std::int64_t rows_per_block = (128 / warp) * (pow2 <= 128 ? 2 : 1);
  return (causal ? rows : seq) % rows_per_block == 0;
}

bool ModelBuilder::fused_softmax_runs(std::int64_t batch, std::int64_t heads, std::int64_t seq, bool causal) const {
  return settings_.fused.softmax &&
         (!settings_.fused.softmax_shape_rules ||
          megatron_softmax_kernel_takes(settings_.dtype, batch, heads, seq, causal));
}

BufferId ModelBuilder::attention_mask(bool causal, std::int64_t batch, std::int64_t seq) {
  if (attention_mask_ == kNoBuffer) {
    const std::int64_t rows = causal ? seq : batch * seq;
    attention_mask_ = trace_.add_buffer("attention_mask", static_cast<std::uint64_t>(element_count({rows, seq})),
                                        Category::input);
  }
  return attention_mask_;
}

ModelBuilder::SoftmaxChain ModelBuilder::unfused_softmax_forward(const std::string& name, BufferId scores,
                                                                 std::uint64_t elements, bool causal,
                                                                 std::int64_t batch, std::int64_t seq) {
  const DType d = settings_.dtype;
  const bool cast = d != DType::fp32;
  const DType compute = cast ? DType::fp32 : d;
  const double e = static_cast<double>(elements);
  SoftmaxChain chain{attention_mask(causal, batch, seq), kNoBuffer, kNoBuffer};
  BufferId x = scores;
  if (cast) {
    x = activation_buffer(name + ".to_fp32.out", elements, compute);
    emit(name + ".to_fp32", "copy", {scores}, {x}, {}, 0);
  }
  const BufferId scaled = activation_buffer(name + ".scale.out", elements, compute);
  emit(name + ".scale", "mul", {x}, {scaled}, {}, kEltwiseFlops * e);
  emit(name + ".mask", "elementwise", {chain.mask}, {}, {scaled}, kEltwiseFlops * e);  // in place
  chain.probs = activation_buffer(name + ".softmax.out", elements, compute);
  emit(name + ".softmax", "softmax", {scaled}, {chain.probs}, {}, kSoftmaxForwardFlops * e);
  chain.out = chain.probs;
  if (cast) {
    chain.out = activation_buffer(name + ".to_dtype.out", elements, d);
    emit(name + ".to_dtype", "copy", {chain.probs}, {chain.out}, {}, 0);
  }
  return chain;
}

BufferId ModelBuilder::unfused_softmax_backward(const std::string& name, const SoftmaxChain& chain, BufferId g,
                                                std::uint64_t elements) {
  const DType d = settings_.dtype;
  const bool cast = d != DType::fp32;
  const DType compute = cast ? DType::fp32 : d;
  const double e = static_cast<double>(elements);
  auto grad = [&](const char* op, DType t) {
    return trace_.add_buffer(name + op + ".grad_input", elements * dtype_bytes(t), Category::activation_grad);
  };
  if (cast) {
    const BufferId g32 = grad(".to_dtype", compute);
    emit(name + ".to_dtype.backward", "copy", {g}, {g32}, {}, 0);
    g = g32;
  }
  const BufferId g_scaled = grad(".softmax", compute);
  emit(name + ".softmax.backward", "softmax_backward", {g, chain.probs}, {g_scaled}, {}, kSoftmaxBackwardFlops * e);
  // masked_fill's backward zeroes the masked positions, into a new tensor.
  const BufferId g_masked = grad(".mask", compute);
  emit(name + ".mask.backward", "elementwise", {g_scaled, chain.mask}, {g_masked}, {}, kEltwiseFlops * e);
  const BufferId g_x = grad(".scale", compute);
  emit(name + ".scale.backward", "mul_backward", {g_masked}, {g_x}, {}, kEltwiseFlops * e);
  if (!cast) return g_x;
  const BufferId g_scores = grad(".to_fp32", d);
  emit(name + ".to_fp32.backward", "copy", {g_x}, {g_scores}, {}, 0);
  return g_scores;
}

Value ModelBuilder::unfused_softmax(const std::string& name, Value scores, bool causal, std::int64_t batch) {
  const Shape s = shape(scores);  // batch x heads x seq x seq
  const auto elements = static_cast<std::uint64_t>(element_count(s));
  const SoftmaxChain chain = unfused_softmax_forward(name, buffer(scores), elements, causal, batch, s[2]);
  const Value probs = value_on(chain.out, s, values_[scores.id].requires_grad);
  record_backward([=, this] {
    if (!has_grad(probs)) return;
    const BufferId g = take_grad(probs);
    if (!values_[scores.id].requires_grad) return;
    contribute(scores, unfused_softmax_backward(name, chain, g, elements), name + ".softmax");
  });
  return probs;
}

}  // namespace memsim
