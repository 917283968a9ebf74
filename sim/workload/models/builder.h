#pragma once
// What the model generators share: the training settings every model takes (batch, dtype,
// mixed precision, optimizer, in-place activations, convolution lowering) and ModelBuilder,
// a small recorder in the manner of PyTorch autograd. A generator calls layers in forward
// order; each layer emits its forward op at once and records its backward. finish()
// replays the record in reverse (the order in which autograd runs a sequential graph),
// then emits one optimizer step per parameter.
//
// Liveness follows autograd: a backward op reads exactly what PyTorch saves for it, so the
// saved tensors stay alive until then. Gradients reaching a tensor from two consumers are
// summed as PyTorch's InputBuffer does (see ModelBuilder::contribute in builder.cpp). The
// layers and their FLOP counts are in layers.cpp.
//
// Op kinds (device YAML roofline efficiencies are keyed by these; keep op_kinds.cpp, the
// list the platform loader checks efficiency keys against, in step):
//   forward   conv2d batch_norm relu max_pool2d avg_pool2d add linear matmul
//             log_softmax nll_loss mse_loss relu6 dropout cat pad
//   backward  conv2d_backward batch_norm_backward relu_backward max_pool2d_backward
//             avg_pool2d_backward linear_backward matmul_backward log_softmax_backward
//             nll_loss_backward mse_loss_backward accumulate_grad relu6_backward
//             dropout_backward pad_backward
//   optimizer sgd_step momentum_step adam_step adamw_step
// There is no add_backward, cat_backward or flatten op: autograd passes those gradients on
// unchanged (cat's as views into the one gradient buffer).
//
// Names follow torchvision: op "layer1.0.conv1", its output "layer1.0.conv1.out", its
// parameter "layer1.0.conv1.weight" with gradient "layer1.0.conv1.weight.grad"; backward op
// "layer1.0.conv1.backward" with output "layer1.0.conv1.grad_input".
#include "sim/core/error.h"
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/core/params.h"
#include "sim/workload/trace.h"

namespace memsim {

enum class Optimizer : std::uint8_t { sgd, momentum, adam, adamw };
std::string_view to_string(Optimizer o);
/// State tensors per parameter: sgd 0, momentum 1 (momentum_buffer), adam and adamw 2
/// (exp_avg, exp_avg_sq).
int optimizer_state_count(Optimizer o);

/// How a convolution runs: `direct` (no scratch; what cuDNN's implicit-GEMM kernels need),
/// or `im2col` (the input lowered to a matrix first, as Caffe did: see conv2d).
enum class ConvAlgo : std::uint8_t { direct, im2col };
std::string_view to_string(ConvAlgo a);

/// Which of Megatron-LM's fused kernels the transformer layers run (the transformer
/// generators' fused_* parameters; no other model has these layers). Each one changes what
/// is saved for the backward and how many kernels run: see docs/workloads.md.
struct FusedKernels {
  /// LayerNorm and RMSNorm as one kernel forward and one backward (apex FusedLayerNorm,
  /// Megatron's and TransformerEngine's norms, torch's nn.LayerNorm); false: the norm
  /// written out in elementwise ops (layer_norm, rms_norm).
  bool layer_norm = true;
  /// The attention's scale, mask and softmax in one kernel saving only its output
  /// (Megatron's FusedScaleMaskSoftmax); false: Megatron's unfused path (attention).
  bool softmax = true;
  /// With softmax: only where Megatron's kernel takes the scores' shape
  /// (megatron_softmax_kernel_takes), its unfused path elsewhere, as FusedScaleMaskSoftmax
  /// chooses per call (`fused_softmax: megatron`).
  bool softmax_shape_rules = false;
  /// The MLP's bias add and GeLU as one kernel after the GEMM (Megatron's bias_gelu_fusion);
  /// false: a separate bias add (bias_add) before the GeLU.
  bool bias_gelu = true;
  /// SwiGLU as one kernel over a 2 x ffn projection (Megatron's bias_swiglu_impl, swiglu);
  /// false: gate and up projections, silu and a product, as Hugging Face runs it.
  bool swiglu = false;
  /// The dropout after each sublayer and the residual add as one kernel (Megatron's
  /// bias_dropout_add_fusion, dropout_add); false: two kernels, as Hugging Face runs them.
  bool dropout_add = false;
};

/// Whether Megatron-LM's fused scale-mask-softmax kernel takes scores of `dtype`, `batch` x
/// `heads` (this rank's) x `seq` x `seq` (FusedScaleMaskSoftmax.is_kernel_available).
bool megatron_softmax_kernel_takes(DType dtype, std::int64_t batch, std::int64_t heads, std::int64_t seq,
                                   bool causal);

/// Fine-tuning (the transformer generators' `finetune` key; docs/workloads.md): which
/// weights are frozen, and the LoRA adapters added beside the frozen projections. A frozen
/// weight has no gradient, no optimizer state and no master copy; a layer whose weights are
/// frozen computes only its input's gradient, and only where something below it trains.
struct FineTune {
  /// none: every weight trains. embeddings: the embedding tables (and BERT's embedding
  /// LayerNorm). first_layers: those and the first `first_layers` blocks. all_but_head:
  /// everything but the head after the final norm. all: every weight of the model (the
  /// LoRA adapters train).
  enum class Freeze : std::uint8_t { none, embeddings, first_layers, all_but_head, all };
  Freeze freeze = Freeze::none;
  std::int64_t first_layers = 0;
  /// LoRA (Hu et al.; PEFT's LoraConfig): per targeted projection W (d_in x d_out) a
  /// trainable A (d_in x rank) and B (rank x d_out); 0: no adapters.
  std::int64_t lora_rank = 0;
  double lora_alpha = 0;    // the output of B is scaled by alpha / rank
  double lora_dropout = 0;  // dropout on the adapter's input (PEFT's lora_dropout)
  /// The projections that get an adapter, by short name: q, k, v, qkv (a fused
  /// projection), o, gate, up, gate_up (fused_swiglu), down.
  std::vector<std::string> lora_targets;
  /// The `finetune` section, for messages about the model it does not fit; none without one.
  std::optional<ConfigNode> node;

  bool lora() const { return lora_rank > 0; }
  bool targets(std::string_view projection) const;
  bool trains_embeddings() const { return freeze == Freeze::none; }
  bool trains_layer(std::int64_t i) const {
    return freeze == Freeze::none || freeze == Freeze::embeddings || (freeze == Freeze::first_layers && i >= first_layers);
  }
  bool trains_final_norm() const { return freeze != Freeze::all_but_head && freeze != Freeze::all; }
  bool trains_head() const { return freeze != Freeze::all; }
  /// "lora r16 on q, v (alpha 32), base frozen" and the like, for Trace::description.
  std::string summary() const;
};

struct TrainingSettings {
  std::int64_t batch = 32;
  /// Element type of activations, weights and gradients; of the optimizer state too, unless
  /// mixed_precision.
  DType dtype = DType::fp32;
  /// fp16/bf16 compute with fp32 master weights and fp32 optimizer state (apex O2,
  /// Megatron, DeepSpeed): per parameter a "<param>.master" weight buffer besides the half
  /// one. Needs dtype fp16 or bf16.
  bool mixed_precision = false;
  Optimizer optimizer = Optimizer::momentum;
  /// false turns the activations a model runs in place (torchvision's ReLU(inplace=True))
  /// out of place; a model's out-of-place activations stay so either way.
  bool inplace = true;
  ConvAlgo conv_algo = ConvAlgo::direct;
  /// Megatron's fp32 main gradients: each parameter's gradient accumulates into a
  /// persistent fp32 "<param>.main_grad" (its grad buffer), which the optimizer reads.
  bool fp32_main_grads = false;
  /// The optimizer state's element type when given (fp32, fp16, bf16, or int8: 8-bit Adam,
  /// see optimizer_state_bytes); else state_dtype().
  std::optional<DType> optimizer_state_dtype;
  /// TransformerEngine-style FP8 linears: an fp8 copy of each weight, the saved input in
  /// fp8, per-tensor scaling state (see ModelBuilder::linear).
  bool fp8 = false;
  /// Tensor parallelism of the workload's `parallel:` section (tp, sp): the model is this
  /// rank's part of it. Models that cannot split say so; the transformers split.
  std::uint32_t tp = 1;
  bool sp = false;
  /// Megatron's --tp-comm-overlap (with sp): each forward all-gather overlaps the column-parallel
  /// GEMMs that read it and each forward reduce-scatter the row-parallel GEMM that makes its
  /// input (see ModelBuilder::sp_gather).
  bool tp_comm_overlap = false;
  /// `recompute: full` (the models that declare it): each layer keeps only its input and is
  /// run again in the backward (ModelBuilder::begin_recompute).
  bool full_recompute = false;
  std::uint32_t ep = 1;  // expert-parallel ranks (parallel.ep)
  /// Context-parallel ranks (parallel.cp): the model is this rank's 1/cp of each sequence,
  /// and its attention passes k and v around the cp ranks (context_parallel_attention).
  std::uint32_t cp = 1;
  /// The fused_* parameters of the models that declare them; else the defaults.
  FusedKernels fused;
  /// The `finetune` key of the models that declare it (the transformers); else none.
  FineTune finetune;
  /// The workload's `parallel:` section, where tp and ep were read (for the message of a
  /// model that cannot split over them); none without one.
  std::optional<ConfigNode> parallel;
  /// The element type of master weights and optimizer state: fp32 with mixed precision.
  DType state_dtype() const { return mixed_precision ? DType::fp32 : dtype; }
  /// Bytes of one optimizer state tensor of `elements`. int8 is bitsandbytes' 8-bit
  /// optimizer: one byte per element and one fp32 absmax per block of 2048 elements, for
  /// tensors of at least 4096 elements (min_8bit_size); smaller ones keep fp32 state.
  std::uint64_t optimizer_state_bytes(std::uint64_t elements) const;
  /// "batch 64, fp32, momentum" (then ", mixed", ", relu out of place", ", im2col",
  /// ", unfused softmax", ... where not the default), for Trace::description.
  std::string summary() const;
};

/// The declaration of `finetune`, for the transformer generators to append to their own.
ParamSpec finetune_param_spec();
/// Reads a `finetune` value (finetune.cpp); a bad one is an InputError located at it.
FineTune read_finetune(const ConfigNode& node);

/// Declarations of `batch`, `dtype`, `mixed_precision`, `optimizer`, `inplace` and
/// `conv_algo`, for a model to append to its own.
std::vector<ParamSpec> training_param_specs();

/// `model_specs` followed by training_param_specs(): a model's whole parameter list.
std::vector<ParamSpec> with_training_params(std::vector<ParamSpec> model_specs);

/// An image classifier's parameters: `model_specs`, then image_size (square, at least
/// `min_image_size` pixels) and num_classes, then the training parameters.
std::vector<ParamSpec> image_classifier_specs(std::vector<ParamSpec> model_specs, int min_image_size);
/// Reads them; a bad value is an InputError located at the value.
TrainingSettings read_training_settings(const Params& params);

using Shape = std::vector<std::int64_t>;
/// A generated tensor past any memory (more than 2^50 elements): the model's parameters are
/// out of range. generate_workload names the spec file and the model.
class TensorTooLarge : public InputError {
 public:
  using InputError::InputError;
};
/// A generated step past the op limit (sim/core/limits.h), found while building it: the
/// model's sizes multiply past what a run can hold. generate_workload names the spec file.
class StepTooLarge : public InputError {
 public:
  using InputError::InputError;
};
/// The shape's element count; TensorTooLarge beyond 2^50 (never a product that wraps).
std::int64_t element_count(const Shape& shape);

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
  /// With conv_algo im2col, the forward and the backward op each get a workspace of the
  /// lowered input, N x (C/groups x K x K) x (Hout x Wout) elements — except a 1x1 stride-1
  /// unpadded convolution, whose lowered input is the input itself.
  Value conv2d(const std::string& name, Value x, std::int64_t out_channels, std::int64_t kernel,
               std::int64_t stride, std::int64_t padding, bool bias = false,
               std::int64_t groups = 1);
  /// Training-mode batch norm; also updates running_mean/var and num_batches_tracked
  /// (persistent Category::other buffers, not parameters).
  Value batch_norm(const std::string& name, Value x);
  /// In place when `inplace` and settings().inplace; saves its result either way.
  Value relu(const std::string& name, Value x, bool inplace);
  /// ReLU6 (hardtanh to [0, 6]), in place as relu. In place it saves its result; out of
  /// place its input (hardtanh_backward's `self`), as autograd does.
  Value relu6(const std::string& name, Value x, bool inplace);
  /// `ceil_mode` rounds the output size up, as nn.MaxPool2d(ceil_mode=True).
  Value max_pool2d(const std::string& name, Value x, std::int64_t kernel, std::int64_t stride,
                   std::int64_t padding, bool ceil_mode = false);
  /// Average pooling without padding (kind avg_pool2d); saves its input.
  Value avg_pool2d(const std::string& name, Value x, std::int64_t kernel, std::int64_t stride);
  /// Adaptive average pooling to out_size x out_size (kind avg_pool2d).
  Value adaptive_avg_pool2d(const std::string& name, Value x, std::int64_t out_size);
  /// Training-mode dropout: an output and a bool mask of the same element count, which
  /// backward reads (native_dropout). Out of place, as nn.Dropout().
  Value dropout(const std::string& name, Value x);
  /// `self += other`, in place on self's buffer (a residual connection).
  Value add_(const std::string& name, Value self, Value other);
  /// `a + b` into a new buffer (MobileNetV2's `x + self.conv(x)`).
  Value add(const std::string& name, Value a, Value b);
  /// `residual + dropout(x)` as one kernel (kind dropout_add: Megatron-LM's
  /// bias_dropout_add_fused_train), keeping the bool mask as dropout does; the backward is
  /// dropout's, and the residual takes the output's gradient as it is.
  Value dropout_add(const std::string& name, Value x, Value residual);
  /// torch.cat along the channels into a new buffer (also for a single tensor). Backward
  /// hands each input a view of the one gradient buffer: no op, no new buffer.
  Value cat(const std::string& name, const std::vector<Value>& xs);
  /// The option-A shortcut of the CIFAR ResNets: x[:, :, ::stride, ::stride] zero-padded to
  /// `out_channels` channels (kind pad), into a new buffer; backward (pad_backward) scatters
  /// the gradient back into a new input-sized buffer, as slice_backward does.
  Value subsample_pad(const std::string& name, Value x, std::int64_t stride,
                      std::int64_t out_channels);
  /// NCHW -> N x CHW: a view, no op and no new buffer.
  Value flatten(Value x);
  /// y = x W^T + b; one backward op for all its gradients. With fp8 (settings().fp8 and
  /// set_fp8_linears) as TransformerEngine's Linear: the weight is cast to a persistent
  /// fp8 copy "<name>.weight.fp8" (1 byte per element) and the input to fp8 (one cast per
  /// input value, shared by the linears reading it), which the GEMMs read and the backward
  /// saves instead of the input; "<name>.fp8_meta" holds the delayed-scaling state of its
  /// five fp8 tensors (input, weight, output; output and input gradients), each an amax
  /// history of 1024 fp32 (TE's default amax_history_len) plus scale and inverse scale.
  /// The backward casts the output gradient to fp8 in a workspace.
  Value linear(const std::string& name, Value x, std::int64_t out_features, bool bias);
  /// Whether parameters made from now on train (the default) or are frozen: a frozen
  /// parameter has no gradient, optimizer state, master copy or main_grad, and a layer's
  /// output needs a gradient only when its input does or one of its weights trains.
  /// Returns the previous setting.
  bool set_trainable(bool on);
  /// A LoRA adapter (settings().finetune) on the linear `name` that made y from x:
  /// y + (dropout(x) A B) x alpha / rank, with A (`name.lora_A`, d_in x rank) and B
  /// (`name.lora_B`, rank x d_out) trainable linears in the compute type whatever
  /// set_trainable says, then a scale and an out-of-place add, as PEFT's lora.Linear runs.
  Value lora(const std::string& name, Value x, Value y);
  /// x times a constant into a new buffer (kind mul); saves nothing, and its backward
  /// scales the gradient into a new buffer.
  Value scale(const std::string& name, Value x);
  /// Whether linear() runs in fp8 from now on (when settings().fp8; on by default then).
  /// Transformer generators keep the LM head and MoE routers in the compute type, as
  /// Megatron with TransformerEngine does. Returns the previous setting.
  bool set_fp8_linears(bool on);
  /// y = x W^T without bias; backward as two matmul_backward ops, for the input (omitted
  /// when x needs no gradient) and for the weight.
  Value matmul(const std::string& name, Value x, std::int64_t out_features);

  // Losses end the forward pass; backward starts from them.
  /// log_softmax then nll_loss, as F.cross_entropy runs them. `labels` are int64 class ids.
  void cross_entropy(Value logits, Value labels);
  /// Mean squared error against `target`.
  void mse_loss(Value y, Value target);

  // ---- sequence-model layers (defined in seq_layers.cpp) ----
  // (attention() is in attention_layer.cpp, recurrent() in recurrent_layer.cpp.) Their op
  // kinds, besides the ones above:
  //   forward   embedding layer_norm rms_norm gelu silu tanh mul sum softmax
  //             rotary_embedding bmm flash_attention fill lstm_cell gru_cell stack swiglu
  //   backward  embedding_backward layer_norm_backward rms_norm_backward gelu_backward
  //             silu_backward tanh_backward mul_backward softmax_backward
  //             rotary_embedding_backward bmm_backward flash_attention_backward
  //             select_backward lstm_cell_backward gru_cell_backward stack swiglu_backward
  // and copy (repeat_kv, a mixture of experts' dispatch, the fp8 casts of linear, the
  // dtype casts of the unfused norms and softmax), elementwise (their sqrt, rsqrt, mask
  // fill and broadcasts).
  // Sequence values are token-major matrices, `tokens x features` with tokens = batch x
  // seq_len (each sample's positions contiguous), so linear() applies to them as is.
  // Attention splits and merges heads as views. Recurrent layers take `seq x batch x
  // features`, as nn.LSTM does without batch_first.

  /// Rows of a `rows x dim` table looked up by int64 `indices` (shape [k]); output k x dim.
  /// Saves the indices; backward is embedding_dense_backward (a dense table gradient).
  Value embedding(const std::string& name, Value indices, std::int64_t rows, std::int64_t dim);
  /// y = x W^T (+ b) with W the existing parameter `weight_name` (a tied LM head): its
  /// gradient is added to the one the other user of W produces.
  Value tied_linear(const std::string& name, Value x, const std::string& weight_name, bool bias);
  /// LayerNorm over the last dimension (weight, bias): saves input, mean and rstd (fp32).
  /// Without settings().fused.layer_norm, pytorch-pretrained-BERT's BertLayerNorm in ten
  /// elementwise ops, which saves x - mean twice, the normalised input and the row std.
  Value layer_norm(const std::string& name, Value x);
  /// RMSNorm over the last dimension (weight only), as a fused kernel: saves input and rstd.
  /// Without settings().fused.layer_norm, Hugging Face's eager LlamaRMSNorm, which saves
  /// an fp32 copy of the input, the fp32 rstd and the normalised input.
  Value rms_norm(const std::string& name, Value x);
  /// Activations, out of place. gelu and silu save their input, tanh its output.
  Value gelu(const std::string& name, Value x);
  Value silu(const std::string& name, Value x);
  Value tanh(const std::string& name, Value x);
  /// Elementwise a * b (same shape); saves both operands.
  Value mul(const std::string& name, Value a, Value b);
  /// Megatron's fused SwiGLU (bias_swiglu_impl without bias): x is `tokens x 2f`, gate and
  /// up side by side (one fc1 projection); returns silu(gate) * up, `tokens x f`, in one
  /// kernel that saves x alone (kinds swiglu, swiglu_backward).
  Value swiglu(const std::string& name, Value x);
  /// x + b with b a new parameter `bias_name` of x's width added to every row (a linear's
  /// bias outside its GEMM: Megatron's skip_bias_add without bias_gelu_fusion). Saves
  /// nothing; the backward passes the gradient on and sums it over the rows into b's.
  Value bias_add(const std::string& name, Value x, const std::string& bias_name);
  /// a + b into a new buffer where b has fewer rows than a and is repeated down it (learned
  /// position embeddings added to every sample); b's gradient is a sum over the repeats
  /// (kind sum). Same shapes go to add().
  Value add_broadcast(const std::string& name, Value a, Value b);
  /// Softmax over the last dimension; saves its output.
  Value softmax(const std::string& name, Value x);
  /// `parts` equal column blocks of x as views (a fused QKV projection split in three);
  /// backward concatenates their gradients.
  std::vector<Value> split(const std::string& name, Value x, int parts);
  /// Columns of the given widths (a fused q, k and v of grouped-query attention).
  std::vector<Value> split(const std::string& name, Value x, const std::vector<std::int64_t>& widths);
  /// A strided view of part of x with shape `view` (the last time step, each sample's first
  /// token). Backward scatters the gradient into zeros of x's shape (select_backward).
  Value select(const std::string& name, Value x, Shape view);
  /// Rotary position embedding of q or k (`tokens x hidden`), with seq x head_dim cos and
  /// sin tables. Saves only the tables.
  Value rotary(const std::string& name, Value x, Value cos, Value sin);

  // ---- tensor and sequence parallelism (tensor_parallel.cpp) ----
  // Megatron-LM's conjugate operators around a column-parallel then row-parallel pair of
  // linears, over process group "tp" (parallelize() defines its ranks). Each emits a
  // communication op of kind all_reduce, all_gather or reduce_scatter with `message_bytes`
  // the whole tensor per rank.
  /// f: identity forward; backward all-reduces the gradient in place.
  Value tp_copy(const std::string& name, Value x);
  /// g: all-reduces x in place forward; backward passes the gradient on.
  Value tp_reduce(const std::string& name, Value x);
  /// Sequence-parallel f: all-gathers the token shard x (`tokens/tp x h`) into a new full
  /// buffer; backward reduce-scatters the gradient into a shard. The full buffer is not
  /// saved: a linear reading it saves the shard and all-gathers it again in its backward
  /// (Megatron's LinearWithGradAccumulationAndAsyncCommunication).
  Value sp_gather(const std::string& name, Value x);
  /// Sequence-parallel g: reduce-scatters x (`tokens x h` partial sums) into a new shard;
  /// backward all-gathers the gradient.
  Value sp_scatter(const std::string& name, Value x);
  /// Sequence-parallel split of a full, already reduced tensor: this rank's rows copied out
  /// (no communication); backward all-gathers the gradient.
  Value sp_split(const std::string& name, Value x);

  /// Full activation recomputation of the layers built between begin_recompute() and
  /// end_recompute() (Megatron's --recompute-granularity full, torch.utils.checkpoint): the
  /// backward first runs their forward ops again ("NAME@recompute", from the region's
  /// input) and its ops read what that made, so the forward keeps only the region's input.
  /// `out` is the region's output: a region that needs no gradient is not run again.
  void begin_recompute();
  void end_recompute(Value out);
  /// The ops (forward, backward and the optimizer's steps of its parameters) built between
  /// begin_unit() and end_unit() belong to the module `name` (Trace::units), one of the
  /// model's repeated layers when `layer`: what ZeRO-3 gathers as one and the pipeline splits
  /// between, whatever the ops are named. Outside a unit, an op's module is its name's
  /// (assign_units_from_names).
  void begin_unit(const std::string& name, bool layer);
  void end_unit();

  enum class AttentionImpl : std::uint8_t { materialized, fused, selective };
  /// Multi-head scaled dot-product attention over q (`tokens x hidden`, split into `heads`)
  /// and k, v (`tokens x kv_width`: grouped-query attention when kv_width is a divisor of
  /// hidden in whole heads; the materialized and selective forms repeat them to q's width
  /// first). materialized: scores = q k^T (batch x heads x seq x seq), softmax (its
  /// output saved; scale and mask fused into it, or without settings().fused.softmax
  /// Megatron's unfused scale, mask fill and softmax, in fp32 for half types, on a bool
  /// mask input "attention_mask"), optional dropout on the probabilities, then probs v. fused
  /// (FlashAttention): one op that saves q, k, v, its output and the fp32 logsumexp, and no
  /// seq x seq tensor. `dropout_p` applies to the probabilities. With settings().cp > 1, q,
  /// k and v are this rank's tokens (1/cp of each sequence) and the fused form runs as ring
  /// attention over the cp ranks (context_parallel_attention); the others are not modelled
  /// under context parallelism (std::invalid_argument: the generators refuse them first).
  Value attention(const std::string& name, Value q, Value k, Value v, std::int64_t batch,
                  std::int64_t heads, bool causal, AttentionImpl impl, double dropout_p);

  // ---- mixture of experts (moe_layer.cpp) ----
  /// A router's softmax over `logits` (tokens x experts; the probabilities kept in fp32, as
  /// Mixtral does) and its top_k picks per token. Returns the routing weights (tokens x
  /// top_k, in dtype); `indices` receives the int64 picks (tokens x top_k).
  Value route_top_k(const std::string& name, Value logits, std::int64_t top_k,
                    BufferId& indices);
  /// The `rows` tokens of x (tokens x features) routed to one expert, gathered by index
  /// (kind copy). Backward scatters their gradient into zeros of x's shape.
  Value dispatch(const std::string& name, Value x, std::int64_t rows, BufferId indices);
  /// A zero-filled value (kind fill) without gradient: the sum the experts add into.
  Value zeros(const std::string& name, Shape shape);
  /// out += weights x y, scattered back to y's tokens (index_add_), in place on out's
  /// buffer (kind mul). Saves y, the weights and the indices.
  Value combine(const std::string& name, Value out, Value y, Value weights, BufferId indices);
  /// Expert parallelism's exchange over group "ep": x's rows to the ranks of their experts
  /// (or back), one all-to-all into a new buffer of x's size; backward the same for the
  /// gradient.
  Value ep_all_to_all(const std::string& name, Value x);
  /// The experts' outputs (y, in expert order) weighted and summed back to `out_shape`'s
  /// tokens (Megatron's unpermute); saves y, the weights and the indices.
  Value unpermute(const std::string& name, Value y, Value weights, BufferId indices, Shape out_shape);

  enum class RecurrentCell : std::uint8_t { rnn_tanh, lstm, gru };
  /// Layer `layer` of a unidirectional nn.RNN/LSTM/GRU (zero initial state, biases) over x
  /// (`seq x batch x features`), unrolled per time step as PyTorch's native CUDA path
  /// runs it; returns the stacked outputs `seq x batch x hidden`. Parameters are named as
  /// nn.LSTM names them: `name.weight_ih_l{layer}`, ... Backward runs through time in
  /// reverse step order. With `last_only` it returns only the last step's hidden state
  /// (`batch x hidden`) and nothing is stacked: a hand-written per-step loop whose loss
  /// reads h_T, the setting of Gruslys et al.'s memory-efficient BPTT.
  Value recurrent(const std::string& name, int layer, Value x, RecurrentCell cell,
                  std::int64_t hidden, bool last_only = false);

 private:
  // Helpers of the sequence layers.
  /// Where a backward op writes parameter p's gradient: the .grad itself the first time
  /// (AccumulateGrad steals it), else a new buffer `part_name` for add_param_grad().
  BufferId param_grad_target(std::uint32_t p, const std::string& part_name);
  /// Sums `target` into p's .grad in place (AccumulateGrad's `grad += new`); nothing when
  /// target is the .grad itself.
  void add_param_grad(std::uint32_t p, BufferId target, const std::string& op_name);
  std::uint32_t find_parameter(const std::string& name) const;
  Value unary(const std::string& name, Value x, std::string_view kind, double forward_flops,
              double backward_flops, bool saves_output);
  Value materialized_attention(const std::string& name, Value q, Value k, Value v,
                               std::int64_t batch, std::int64_t heads, bool causal, double dropout_p);
  Value fused_attention(const std::string& name, Value q, Value k, Value v, std::int64_t batch,
                        std::int64_t heads, bool causal);
  Value repeat_kv(const std::string& name, Value x, std::int64_t groups);
  struct QkvGrads {
    BufferId q, k, v;  // kNoBuffer where the operand needs none
  };
  QkvGrads qkv_grads(const std::string& name, Value q, Value k, Value v, double q_bytes, double kv_bytes);
  Value context_parallel_attention(const std::string& name, Value q, Value k, Value v, std::int64_t batch,
                                   std::int64_t heads, bool causal);

 public:
  // ---- end of sequence-model layers ----

  /// Emits the backward pass and the optimizer steps; the builder is spent afterwards.
  Trace finish(std::string name, std::string description, std::int64_t sample_tokens = 0);

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
    BufferId master = kNoOp;  // the fp32 copy under mixed precision, else none
    BufferId main_grad = kNoOp;  // the persistent fp32 gradient with fp32_main_grads
    BufferId fp8 = kNoOp;        // the weight's fp8 copy, for an fp8 linear
    bool trainable = true;       // false: frozen (set_trainable)
    UnitId unit = kNoUnit;       // the module it belongs to (begin_unit)
  };
  static constexpr BufferId kNoBuffer = kNoOp;

  Value new_value(std::string name, Shape shape, bool requires_grad);
  Value alias(Value of, Shape shape, bool requires_grad);
  /// A value on an existing activation buffer in dtype (the last of an unfused chain).
  Value value_on(BufferId b, Shape shape, bool requires_grad);
  std::uint32_t parameter(std::string name, std::uint64_t elements);
  BufferId parameter_grad(std::uint32_t p);
  BufferId activation_buffer(std::string name, std::uint64_t elements, DType dtype);
  BufferId grad_buffer(const std::string& op_name, Value like);
  using Ids = SmallVec<BufferId, 2>;
  OpId emit(std::string name, std::string_view kind, Ids inputs, Ids outputs, Ids updates, double flops);

  Value activation(const std::string& name, std::string_view kind, Value x, bool inplace,
                   bool saves_input_out_of_place);
  /// The im2col workspace of a convolution on `in` (zero when direct or the identity).
  std::uint64_t im2col_bytes(const Shape& in, std::int64_t kernel, std::int64_t stride,
                             std::int64_t padding, std::int64_t groups, std::int64_t ho,
                             std::int64_t wo) const;

  /// What a backward op reads for saved input x: x's buffer, or for a sequence-parallel
  /// gather (sp_gather) the full tensor all-gathered again from the shard, once per backward.
  BufferId saved_input(Value x);
  OpId emit_comm(std::string name, std::string_view kind, std::vector<BufferId> inputs,
                 std::vector<BufferId> outputs, std::vector<BufferId> updates,
                 std::uint64_t message_bytes, const char* group = "tp");
  /// Records the backward of a collective that made y from x: y's gradient goes through the
  /// collective `kind` into a new gradient of x's shape; `overlap` (tp_comm_overlap) pipelines
  /// an all-gather with the GEMM that reads its output, and a reduce-scatter with the GEMM
  /// that makes its input, as the forward's are.
  void comm_backward(const std::string& name, Value x, Value y, std::string_view kind, std::uint64_t message_bytes,
                     const char* group = "tp", bool overlap = false);
  /// tp_comm_overlap's all-gather of `bytes` making `out` from `in`: a head of 1/tp that makes
  /// `out`, then the rest in flight beside the GEMMs reading it (whose outputs' readers wait).
  void overlapped_all_gather(const std::string& name, BufferId in, BufferId out, std::uint64_t bytes,
                             const char* group);
  /// tp_comm_overlap's reduce-scatter of `bytes` from `in` into `out`: (tp - 1)/tp issued when
  /// the GEMM making `in` starts, then a tail of 1/tp reading `in`.
  void overlapped_reduce_scatter(const std::string& name, BufferId in, BufferId out, std::uint64_t bytes,
                                 const char* group);
  /// The backward op of a weighted sum of y (combine, unpermute): the gradients of y and of
  /// the weights (kNoBuffer for one that needs none) from the output's gradient g.
  std::pair<BufferId, BufferId> weighted_backward(const std::string& name, BufferId g, Value y, Value weights,
                                                  BufferId indices, double flops);
  Value recomputed_attention(const std::string& name, Value q, Value k, Value v,
                             std::int64_t batch, std::int64_t heads, bool causal, double dropout_p);

  // The unfused forms of the fused kernels (fused_kernels.cpp).
  Value unfused_layer_norm(const std::string& name, Value x);
  Value unfused_rms_norm(const std::string& name, Value x);
  /// What the backward of the unfused scale-mask-softmax reads.
  struct SoftmaxChain {
    BufferId mask;   // the bool mask, saved by the masked fill
    BufferId probs;  // the softmax output (fp32 for half types), saved by its backward
    BufferId out;    // the probabilities in dtype: probs, or their cast
  };
  /// Whether the attention's softmax is the fused kernel for scores of batch x heads x seq x
  /// seq (fused.softmax, and with fused.softmax_shape_rules the shape Megatron's kernel takes).
  bool fused_softmax_runs(std::int64_t batch, std::int64_t heads, std::int64_t seq, bool causal) const;
  /// Its forward ops on `scores` (batch x heads x seq x seq, `elements`), named under `name`.
  SoftmaxChain unfused_softmax_forward(const std::string& name, BufferId scores, std::uint64_t elements,
                                       bool causal, std::int64_t batch, std::int64_t seq);
  /// Its backward ops from the gradient g of chain.out; returns the scores' gradient.
  BufferId unfused_softmax_backward(const std::string& name, const SoftmaxChain& chain, BufferId g,
                                    std::uint64_t elements);
  /// The unfused chain on the materialised scores, as a layer: returns the probabilities.
  Value unfused_softmax(const std::string& name, Value scores, bool causal, std::int64_t batch);
  /// The bool mask every layer's unfused softmax reads, made once: causal, seq x seq
  /// (Megatron's [1, 1, s, s]); else the padding mask batch x seq x seq ([b, 1, s, s]).
  BufferId attention_mask(bool causal, std::int64_t batch, std::int64_t seq);

  bool has_grad(Value v) const;
  BufferId take_grad(Value v);
  void contribute(Value v, BufferId grad, const std::string& consumer);
  std::uint32_t& holders(BufferId b);

  // Adds `op` to the step; StepTooLarge past the op limit, before the step grows further.
  OpId add_op(Op op);

  TrainingSettings settings_;
  Trace trace_;
  std::uint64_t op_limit_;  // sim/core/limits.h, read once
  Phase phase_ = Phase::forward;
  std::vector<ValueInfo> values_;
  std::vector<BufferId> grad_;          // per value: its gradient so far, or kNoBuffer
  std::vector<std::uint32_t> holders_;  // per buffer: how many grad_ slots hold it
  std::vector<Parameter> params_;
  // The backward of each recorded layer, with the unit it was recorded in (its backward ops'
  // unit too).
  struct TapeEntry {
    UnitId unit;
    std::function<void()> backward;
  };
  std::vector<TapeEntry> tape_;
  void record_backward(std::function<void()> backward) { tape_.push_back({unit_, std::move(backward)}); }
  UnitId unit_ = kNoUnit;                            // the open unit (begin_unit), or none
  std::unordered_map<std::string, UnitId> unit_index_;  // Trace::units by name
  // fp32_main_grads: bf16 gradients made by the op being emitted, to add into main_grad.
  std::vector<std::pair<std::uint32_t, BufferId>> pending_main_grads_;
  bool fp8_linears_ = false;                          // linear() runs in fp8 now
  bool trainable_ = true;                             // parameters made now train
  std::unordered_map<std::uint32_t, BufferId> fp8_inputs_;  // value id -> its fp8 cast
  struct Regather {
    Value shard;
    std::string name;
    BufferId again = kNoBuffer;  // the backward's all-gathered copy, once made
  };
  std::vector<std::pair<std::uint32_t, Regather>> regather_;  // by value id of the full tensor
  // tp_comm_overlap: a gathered tensor whose readers run while the rest of its all-gather is in
  // flight (buffer -> that all-gather), and their outputs, whose readers wait for it.
  std::unordered_map<BufferId, OpId> overlapped_gather_, gated_by_;
  bool tp_used_ = false;  // a tensor-parallel layer ran: the model splits over tp
  OpId recompute_from_ = kNoOp;  // the first op of the open recomputed region
  std::unordered_map<BufferId, BufferId> remap_;  // during a region's backward: its forward buffers' remakes
  bool ep_used_ = false;  // an expert-parallel exchange ran
  bool cp_used_ = false;  // a context-parallel attention ran
  BufferId attention_mask_ = kNoBuffer;  // the unfused softmax's mask input, once made
};

}  // namespace memsim
