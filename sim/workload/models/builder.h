#pragma once
// What the model generators share: the training settings every model takes (batch, dtype,
// optimizer) and ModelBuilder, a small recorder in the manner of PyTorch autograd. A
// generator calls layers in forward order; each layer emits its forward op at once and
// records its backward. finish() replays the record in reverse (the order in which
// autograd runs a sequential graph), then emits one optimizer step per parameter.
//
// Liveness follows autograd: a backward op reads exactly what PyTorch saves for it, so the
// saved tensors stay alive until then. Gradients reaching a tensor from two consumers are
// summed as PyTorch's InputBuffer does (see ModelBuilder::contribute in builder.cpp). The
// layers and their FLOP counts are in layers.cpp.
//
// Op kinds (device YAML roofline efficiencies are keyed by these; keep op_kinds.cpp, the
// list the platform loader checks efficiency keys against, in step):
//   forward   conv2d batch_norm relu max_pool2d avg_pool2d add linear matmul
//             log_softmax nll_loss mse_loss
//   backward  conv2d_backward batch_norm_backward relu_backward max_pool2d_backward
//             avg_pool2d_backward linear_backward matmul_backward log_softmax_backward
//             nll_loss_backward mse_loss_backward accumulate_grad
//   optimizer sgd_step momentum_step adam_step
// There is no add_backward or flatten op: autograd passes those gradients on unchanged.
//
// Names follow torchvision: op "layer1.0.conv1", its output "layer1.0.conv1.out", its
// parameter "layer1.0.conv1.weight" with gradient "layer1.0.conv1.weight.grad"; backward op
// "layer1.0.conv1.backward" with output "layer1.0.conv1.grad_input".
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/params.h"
#include "sim/workload/trace.h"

namespace memsim {

enum class Optimizer : std::uint8_t { sgd, momentum, adam };
std::string_view to_string(Optimizer o);
/// State tensors per parameter: sgd 0, momentum 1 (momentum_buffer), adam 2 (exp_avg,
/// exp_avg_sq).
int optimizer_state_count(Optimizer o);

struct TrainingSettings {
  std::int64_t batch = 32;
  DType dtype = DType::fp32;  // activations, weights, gradients and optimizer state
  Optimizer optimizer = Optimizer::momentum;
  /// "batch 64, fp32, momentum", for Trace::description.
  std::string summary() const;
};

/// Declarations of `batch`, `dtype` and `optimizer`, for a model to append to its own.
std::vector<ParamSpec> training_param_specs();
/// Reads them; a bad value is an InputError located at the value.
TrainingSettings read_training_settings(const Params& params);

using Shape = std::vector<std::int64_t>;
std::int64_t element_count(const Shape& shape);

/// Bytes an op reads and writes: inputs and outputs once, updates twice (read, then write).
double bytes_moved(const Trace& trace, const Op& op);

/// Number of parameters: the elements of the Category::weight buffers, stored as
/// `weight_dtype` (the trace does not keep element sizes).
std::uint64_t parameter_count(const Trace& trace, DType weight_dtype);

/// A tensor value in the forward graph. An in-place op (relu with inplace, add_) makes a new
/// Value on the same buffer, as autograd bumps a tensor's version.
struct Value {
  std::uint32_t id = 0;
};

class ModelBuilder {
 public:
  explicit ModelBuilder(const TrainingSettings& settings);
  ModelBuilder(const ModelBuilder&) = delete;
  ModelBuilder& operator=(const ModelBuilder&) = delete;

  const TrainingSettings& settings() const { return settings_; }
  const Shape& shape(Value v) const;
  BufferId buffer(Value v) const;
  /// Reserves room for about this many ops and buffers (large generated models).
  void reserve(std::size_t ops, std::size_t buffers);

  /// Part of the mini-batch (Category::input), resident at the start; needs no gradient.
  Value input(const std::string& name, Shape shape, DType dtype);

  // Layers on NCHW (2-d) or NC (1-d) values. Each creates its parameters on first use:
  // weights are Category::weight, persistent, with the optimizer's state next to them.
  Value conv2d(const std::string& name, Value x, std::int64_t out_channels, std::int64_t kernel,
               std::int64_t stride, std::int64_t padding, bool bias = false,
               std::int64_t groups = 1);
  /// Training-mode batch norm; also updates running_mean/var and num_batches_tracked
  /// (persistent Category::other buffers, not parameters).
  Value batch_norm(const std::string& name, Value x);
  Value relu(const std::string& name, Value x, bool inplace);
  Value max_pool2d(const std::string& name, Value x, std::int64_t kernel, std::int64_t stride,
                   std::int64_t padding);
  /// Adaptive average pooling to out_size x out_size (kind avg_pool2d).
  Value adaptive_avg_pool2d(const std::string& name, Value x, std::int64_t out_size);
  /// `self += other`, in place on self's buffer (a residual connection).
  Value add_(const std::string& name, Value self, Value other);
  /// NCHW -> N x CHW: a view, no op and no new buffer.
  Value flatten(Value x);
  /// y = x W^T + b; one backward op for all its gradients.
  Value linear(const std::string& name, Value x, std::int64_t out_features, bool bias);
  /// y = x W^T without bias; backward as two matmul_backward ops, for the input (omitted
  /// when x needs no gradient) and for the weight.
  Value matmul(const std::string& name, Value x, std::int64_t out_features);

  // Losses end the forward pass; backward starts from them.
  /// log_softmax then nll_loss, as F.cross_entropy runs them. `labels` are int64 class ids.
  void cross_entropy(Value logits, Value labels);
  /// Mean squared error against `target`.
  void mse_loss(Value y, Value target);

  // ---- sequence-model layers (defined in seq_layers.cpp) ----
  // ---- end of sequence-model layers ----

  /// Emits the backward pass and the optimizer steps; the builder is spent afterwards.
  Trace finish(std::string name, std::string description);

 private:
  struct ValueInfo {
    BufferId buffer;
    Shape shape;
    bool requires_grad;
  };
  struct Parameter {
    std::string name;
    BufferId weight;
    std::vector<BufferId> state;  // optimizer state, Category::optimizer_state
    std::uint64_t elements;
    BufferId grad;
  };
  static constexpr BufferId kNoBuffer = kNoOp;

  Value new_value(std::string name, Shape shape, bool requires_grad);
  Value alias(Value of, Shape shape, bool requires_grad);
  std::uint32_t parameter(std::string name, std::uint64_t elements);
  BufferId parameter_grad(std::uint32_t p);
  BufferId activation_buffer(std::string name, std::uint64_t elements, DType dtype);
  BufferId grad_buffer(const std::string& op_name, Value like);
  OpId emit(std::string name, std::string_view kind, std::vector<BufferId> inputs,
            std::vector<BufferId> outputs, std::vector<BufferId> updates, double flops);

  bool has_grad(Value v) const;
  BufferId take_grad(Value v);
  void contribute(Value v, BufferId grad, const std::string& consumer);
  std::uint32_t& holders(BufferId b);

  TrainingSettings settings_;
  Trace trace_;
  Phase phase_ = Phase::forward;
  std::vector<ValueInfo> values_;
  std::vector<BufferId> grad_;          // per value: its gradient so far, or kNoBuffer
  std::vector<std::uint32_t> holders_;  // per buffer: how many grad_ slots hold it
  std::vector<Parameter> params_;
  std::vector<std::function<void()>> tape_;  // backward of each recorded layer
};

}  // namespace memsim
