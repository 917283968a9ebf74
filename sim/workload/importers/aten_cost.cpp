#include "sim/workload/importers/aten_cost.h"

#include <algorithm>
#include <array>

namespace memsim {
namespace {

bool one_of(std::string_view s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

double numel_of(const std::vector<const EtTensor*>& arg) {
  double n = 0;
  for (const auto* t : arg) n += static_cast<double>(t->numel);
  return n;
}

double prod_from(const std::vector<std::int64_t>& shape, std::size_t from) {
  double p = 1;
  for (std::size_t i = from; i < shape.size(); ++i) p *= static_cast<double>(std::max<std::int64_t>(shape[i], 0));
  return p;
}

const EtTensor* first(const std::vector<std::vector<const EtTensor*>>& args, std::size_t i) {
  return i < args.size() && !args[i].empty() ? args[i].front() : nullptr;
}

bool is_float(DType d) { return d == DType::fp32 || d == DType::fp16 || d == DType::bf16 || d == DType::fp8 || d == DType::tf32; }

constexpr std::array kMatmul{std::string_view("mm"), std::string_view("addmm"), std::string_view("matmul"),
                             std::string_view("linear"), std::string_view("addmv"), std::string_view("mv"),
                             std::string_view("dot"), std::string_view("bmm"), std::string_view("baddbmm")};
constexpr std::array kConv{std::string_view("conv1d"), std::string_view("conv2d"), std::string_view("conv3d"),
                           std::string_view("convolution"), std::string_view("_convolution"),
                           std::string_view("mkldnn_convolution"), std::string_view("cudnn_convolution"),
                           std::string_view("thnn_conv2d"), std::string_view("_slow_conv2d_forward"),
                           std::string_view("_nnpack_spatial_convolution")};

bool in(std::string_view s, const auto& list) { return std::find(list.begin(), list.end(), s) != list.end(); }

}  // namespace

AtenCost triton_cost(std::string_view name, const std::vector<std::vector<const EtTensor*>>& inputs) {
  AtenCost c;
  c.kind = name.find("_red_") != std::string_view::npos || name.find("_per_") != std::string_view::npos
               ? "reduction"
               : "elementwise";
  double largest = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> seen;
  for (const auto& arg : inputs)
    for (const auto* t : arg) {
      if (c.bytes == 0) c.dtype = dtype_from_tensor_type(t->type);
      largest = std::max(largest, static_cast<double>(t->numel));
      const std::pair<std::int64_t, std::int64_t> key{t->tensor, t->storage};
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      c.bytes += static_cast<double>(t->bytes);
    }
  c.flops = is_float(c.dtype) ? largest : 0;
  return c;
}

DType dtype_from_tensor_type(std::string_view type) {
  if (type.find("Half") != std::string_view::npos) return DType::fp16;
  if (type.find("BFloat16") != std::string_view::npos) return DType::bf16;
  if (type.find("Float8") != std::string_view::npos) return DType::fp8;
  if (type.find("long") != std::string_view::npos) return DType::int64;
  if (type.find("(int)") != std::string_view::npos) return DType::int32;
  if (type.find("bool") != std::string_view::npos) return DType::boolean;
  if (type.find("char") != std::string_view::npos) return DType::int8;
  return DType::fp32;  // float, double
}

bool is_cost_kernel(std::string_view n) {
  if (n.substr(0, 9) == "_foreach_" || n.substr(0, 7) == "_fused_") return true;
  // linear and matmul are composites: the mm/addmm/bmm under them do the work.
  return (in(n, kMatmul) && n != "linear" && n != "matmul") || in(n, kConv) ||
         one_of(n, {"convolution_backward", "native_batch_norm", "native_batch_norm_backward",
                    "native_layer_norm", "native_layer_norm_backward", "native_group_norm",
                    "native_group_norm_backward", "_softmax", "_log_softmax", "_softmax_backward_data",
                    "_log_softmax_backward_data", "nll_loss_forward", "nll_loss_backward",
                    "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d",
                    "avg_pool2d_backward", "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward",
                    "embedding_dense_backward", "mse_loss", "mse_loss_backward",
                    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention"});
}

bool is_view_op(std::string_view n) {
  return one_of(n, {"as_strided", "view", "_reshape_alias", "reshape", "t", "transpose", "permute",
                    "expand", "expand_as", "broadcast_to", "squeeze", "unsqueeze", "select", "slice",
                    "narrow", "detach", "detach_", "alias", "resolve_conj", "resolve_neg", "to",
                    "contiguous", "unbind", "split", "split_with_sizes", "chunk", "view_as",
                    "flatten", "unflatten", "_unsafe_view", "lift_fresh", "diagonal", "numpy_T",
                    "movedim", "unfold", "real", "imag", "type_as", "_has_compatible_shallow_copy_type",
                    "is_same_size", "size", "stride", "dim", "requires_grad_", "set_"});
}

bool is_allocation_op(std::string_view n) {
  return one_of(n, {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "resize_",
                    "_empty_affine_quantized"});
}

// Calls `each(type, name)` for the arguments of `schema`, split at top-level commas ('*'
// marks the keyword-only ones and is no argument of its own).
template <typename F>
void for_each_argument(const std::string& schema, F each) {
  const auto open = schema.find('(');
  if (schema.empty() || open == std::string::npos) return;
  int depth = 0;
  std::size_t start = open + 1;
  for (std::size_t i = open + 1; i < schema.size() && depth >= 0; ++i) {
    const char c = schema[i];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if ((c == ',' && depth == 0) || depth < 0) {
      std::string_view a(schema.data() + start, i - start);
      while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
      if (a != "*" && !a.empty()) {
        const auto space = a.rfind(' ');
        const std::string_view type = space == std::string_view::npos ? a : a.substr(0, space);
        std::string_view name = space == std::string_view::npos ? std::string_view() : a.substr(space + 1);
        if (const auto eq = name.find('='); eq != std::string_view::npos) name = name.substr(0, eq);
        each(type, name);
      }
      start = i + 1;
    }
  }
}

std::vector<std::string> argument_names(const std::string& schema) {
  std::vector<std::string> out;
  for_each_argument(schema, [&](std::string_view, std::string_view name) { out.emplace_back(name); });
  return out;
}

std::vector<bool> mutated_arguments(const std::string& schema, std::string_view name, std::size_t count) {
  std::vector<bool> out(count, false);
  const auto open = schema.find('(');
  if (schema.empty() || open == std::string::npos) {
    if (!name.empty() && name.back() == '_' && count > 0 && !is_view_op(name)) out[0] = true;
    return out;
  }
  std::size_t arg = 0;
  for_each_argument(schema, [&](std::string_view type, std::string_view) {
    if (arg < count && type.find('!') != std::string_view::npos) out[arg] = true;
    ++arg;
  });
  return out;
}

AtenCost aten_cost(std::string_view n, const std::vector<std::vector<const EtTensor*>>& in_args,
                   const std::vector<std::vector<const EtTensor*>>& out_args) {
  AtenCost c;
  const EtTensor* in0 = first(in_args, 0);
  const EtTensor* out0 = first(out_args, 0);
  if (const EtTensor* t = out0 ? out0 : in0) c.dtype = dtype_from_tensor_type(t->type);
  // Bytes: every distinct tensor read or written once.
  std::vector<std::pair<std::int64_t, std::int64_t>> seen;
  for (const auto* side : {&in_args, &out_args})
    for (const auto& arg : *side)
      for (const auto* t : arg) {
        const std::pair<std::int64_t, std::int64_t> key{t->tensor, t->storage};
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        c.bytes += static_cast<double>(t->bytes);
      }
  const double out_numel = out0 ? numel_of(out_args[0]) : 0;
  const double in_numel = in0 ? numel_of(in_args[0]) : 0;

  if (in(n, kMatmul)) {
    c.kind = (n == "bmm" || n == "baddbmm") ? "bmm" : "matmul";
    // Each output element is a dot product over the inner dimension of the first matrix.
    const bool has_bias = n == "addmm" || n == "baddbmm" || n == "addmv";
    const EtTensor* a = first(in_args, has_bias ? 1 : 0);
    double k = a && !a->shape.empty() ? static_cast<double>(a->shape.back()) : 0;
    if (n == "dot") k = a ? static_cast<double>(a->numel) : 0;
    c.flops = 2 * std::max(out_numel, n == "dot" ? 1.0 : 0.0) * k;
    if (has_bias || (n == "linear" && first(in_args, 2))) c.flops += out_numel;
  } else if (in(n, kConv)) {
    c.kind = "conv2d";
    const EtTensor* w = first(in_args, 1);
    if (w) c.flops = 2 * out_numel * prod_from(w->shape, 1);
  } else if (n == "convolution_backward") {
    c.kind = "conv2d_backward";
    const EtTensor* w = first(in_args, 2);
    if (w) c.flops = 4 * in_numel * prod_from(w->shape, 1);  // grad input + grad weight
  } else if (one_of(n, {"native_batch_norm", "batch_norm", "native_layer_norm", "layer_norm",
                        "native_group_norm", "group_norm"})) {
    c.kind = n.find("layer") != std::string_view::npos ? "layer_norm" : "batch_norm";
    c.flops = 5 * in_numel;
  } else if (one_of(n, {"native_batch_norm_backward", "native_layer_norm_backward",
                        "native_group_norm_backward"})) {
    c.kind = n.find("layer") != std::string_view::npos ? "layer_norm_backward" : "batch_norm_backward";
    c.flops = 8 * in_numel;
  } else if (one_of(n, {"_softmax", "softmax", "_log_softmax", "log_softmax"})) {
    c.kind = n.find("log") != std::string_view::npos ? "log_softmax" : "softmax";
    c.flops = 5 * in_numel;
  } else if (one_of(n, {"_softmax_backward_data", "_log_softmax_backward_data"})) {
    c.kind = n.find("log") != std::string_view::npos ? "log_softmax_backward" : "softmax_backward";
    c.flops = 3 * in_numel;
  } else if (one_of(n, {"nll_loss_forward", "nll_loss", "nll_loss2d_forward"})) {
    c.kind = "nll_loss";
    c.flops = in_numel;
  } else if (one_of(n, {"nll_loss_backward", "nll_loss2d_backward"})) {
    c.kind = "nll_loss_backward";
    c.flops = out_numel;
  } else if (one_of(n, {"mse_loss", "mse_loss_backward"})) {
    c.kind = n == "mse_loss" ? "mse_loss" : "mse_loss_backward";
    c.flops = 3 * in_numel;
  } else if (one_of(n, {"max_pool2d_with_indices", "max_pool2d"})) {
    c.kind = "max_pool2d";
    c.flops = in_numel;
  } else if (n == "max_pool2d_with_indices_backward") {
    c.kind = "max_pool2d_backward";
    c.flops = out_numel;
  } else if (one_of(n, {"avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool2d"})) {
    c.kind = "avg_pool2d";
    c.flops = in_numel;
  } else if (one_of(n, {"avg_pool2d_backward", "_adaptive_avg_pool2d_backward"})) {
    c.kind = "avg_pool2d_backward";
    c.flops = out_numel;
  } else if (one_of(n, {"sum", "mean", "amax", "amin", "max", "min", "norm", "linalg_vector_norm",
                        "var", "std", "var_mean", "argmax", "argmin", "prod", "logsumexp", "all", "any"})) {
    c.kind = n == "sum" || n == "mean" ? "sum" : "reduction";
    c.flops = in_numel;
  } else if (one_of(n, {"copy_", "clone", "_to_copy", "_copy_from", "_copy_from_and_resize",
                        "index_select", "gather", "scatter", "scatter_add_", "index_put_", "index",
                        "repeat", "constant_pad_nd", "embedding"})) {
    c.kind = n == "embedding" ? "embedding" : n == "constant_pad_nd" ? "pad" : "copy";
  } else if (one_of(n, {"cat", "stack"})) {
    c.kind = std::string(n);
  } else if (is_allocation_op(n)) {
    c.kind = "allocate";
    c.bytes = 0;
  } else if (one_of(n, {"fill_", "zero_", "zeros", "ones", "zeros_like", "ones_like", "full",
                        "full_like", "new_zeros", "new_ones", "scalar_tensor"})) {
    c.kind = "fill";
  } else if (one_of(n, {"embedding_dense_backward", "embedding_backward"})) {
    c.kind = "embedding_backward";
  } else if (n.substr(0, 7) == "_fused_") {
    // One kernel for the whole step over every parameter: Adam's ~10 operations per element,
    // SGD's ~3 (with momentum).
    const bool adam = n.find("adam") != std::string_view::npos;
    c.kind = n.find("adamw") != std::string_view::npos ? "adamw_step" : adam ? "adam_step" : "sgd_step";
    c.flops = (adam ? 10 : 3) * in_numel;
  } else {
    // Elementwise: one operation per element written (per element read for in-place ops and
    // the _foreach_ family, which return nothing).
    static const std::initializer_list<std::string_view> kPointwise{
        "add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_", "relu", "relu_",
        "clamp_min", "clamp_min_", "clamp", "clamp_", "threshold", "threshold_", "threshold_backward",
        "sigmoid", "sigmoid_", "sigmoid_backward", "tanh", "tanh_", "tanh_backward", "gelu",
        "gelu_backward", "silu", "silu_", "silu_backward", "exp", "exp_", "log", "log_", "sqrt",
        "sqrt_", "rsqrt", "pow", "pow_", "neg", "neg_", "abs", "where", "addcmul", "addcmul_",
        "addcdiv", "addcdiv_", "lerp_", "maximum", "minimum", "hardtanh", "hardtanh_",
        "hardtanh_backward", "leaky_relu", "leaky_relu_backward", "elu", "elu_backward",
        "native_dropout", "native_dropout_backward", "dropout", "bernoulli_", "masked_fill",
        "masked_fill_", "eq", "ne", "gt", "lt", "ge", "le", "sign", "reciprocal", "square",
        "log_sigmoid_forward", "log_sigmoid_backward", "softplus", "softplus_backward", "erf"};
    const bool foreach = n.substr(0, 9) == "_foreach_";
    if (foreach || one_of(n, kPointwise)) {
      if (n == "relu" || n == "relu_" || n == "clamp_min" || n == "clamp_min_" || n == "threshold")
        c.kind = "relu";
      else if (n == "threshold_backward")
        c.kind = "relu_backward";
      else if (n == "add" || n == "add_" || n == "sub" || n == "sub_")
        c.kind = "add";
      else if (n == "mul" || n == "mul_" || n == "div" || n == "div_")
        c.kind = "mul";
      else if (one_of(n, {"tanh", "tanh_backward", "gelu", "gelu_backward", "silu", "silu_backward"}))
        c.kind = std::string(n);
      else
        c.kind = "elementwise";
      c.flops = out_numel > 0 ? out_numel : in_numel;
    }
  }
  if (!is_float(c.dtype)) c.flops = 0;  // integer work has no FLOP rate on any device
  return c;
}

}  // namespace memsim
