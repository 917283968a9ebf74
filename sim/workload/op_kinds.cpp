#include "sim/workload/op_kinds.h"

#include <algorithm>

namespace memsim {

const std::vector<std::string>& known_op_kinds() {
  static const std::vector<std::string> kinds{
      // forward
      "conv2d", "batch_norm", "relu", "max_pool2d", "avg_pool2d", "add", "linear", "matmul",
      "log_softmax", "nll_loss", "mse_loss",
      // backward
      "conv2d_backward", "batch_norm_backward", "relu_backward", "max_pool2d_backward",
      "avg_pool2d_backward", "linear_backward", "matmul_backward", "log_softmax_backward",
      "nll_loss_backward", "mse_loss_backward", "accumulate_grad",
      // optimizer
      "sgd_step", "momentum_step", "adam_step",
      // CNN layers (issue 4): forward, backward, optimizer
      "relu6", "dropout", "cat", "pad",
      "relu6_backward", "dropout_backward", "pad_backward",
      "adamw_step",
      // sequence models (issue 4): forward, then backward
      "embedding", "layer_norm", "rms_norm", "gelu", "silu", "tanh", "mul", "sum", "softmax",
      "rotary_embedding", "bmm", "flash_attention", "fill", "lstm_cell", "gru_cell", "stack",
      "embedding_backward", "layer_norm_backward", "rms_norm_backward", "gelu_backward",
      "silu_backward", "tanh_backward", "mul_backward", "softmax_backward",
      "rotary_embedding_backward", "bmm_backward", "flash_attention_backward",
      "select_backward", "lstm_cell_backward", "gru_cell_backward",
      // Megatron's fused SwiGLU (issue 27): forward, backward
      "swiglu", "swiglu_backward",
      // Megatron's fused bias-dropout-add (its backward is dropout_backward)
      "dropout_add",
      // Gist-style stashing (policy compress, issue 7)
      "encode", "decode",
      // imported traces (issue 5): aten ops with no kind of their own above
      "elementwise", "reduction", "copy", "allocate", "other",
      // communication (issue 13): collectives and point-to-point, with Op::message_bytes
      "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
      "gather", "scatter", "barrier", "send", "recv",
      // context parallelism's ring attention: each rank sends to the next of its group
      "ring_exchange"};
  return kinds;
}

bool is_known_op_kind(const std::string& kind) {
  const auto& k = known_op_kinds();
  return std::find(k.begin(), k.end(), kind) != k.end();
}

}  // namespace memsim
