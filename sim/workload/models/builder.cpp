#include "sim/workload/models/builder.h"
#include "sim/workload/parallel.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/core/checked.h"
#include "sim/core/limits.h"
#include "sim/workload/analysis.h"
#include "sim/workload/recomputed_ops.h"

namespace memsim {
namespace {

// Summing two gradients: one add per element.
constexpr double kAccumulateFlops = 1;

// Optimizer FLOPs per parameter: sgd w -= lr*g; momentum also b = mu*b + g (PyTorch SGD
// with momentum); adam two moment updates, bias corrections, sqrt, divide and step; adamw
// adds the decoupled weight decay w -= lr*wd*w.
double optimizer_flops(Optimizer o) {
  switch (o) {
    case Optimizer::sgd: return 2;
    case Optimizer::momentum: return 4;
    case Optimizer::adam: return 12;
    case Optimizer::adamw: return 14;
  }
  return 0;
}
// Mixed precision: the half gradient is unscaled into fp32 and the master weight is cast
// back to the half copy, one FLOP each per parameter.
constexpr double kMixedPrecisionStepFlops = 2;

// PyTorch's names for the state tensors.
constexpr std::string_view kStateNames[4][2] = {
    {}, {"momentum_buffer"}, {"exp_avg", "exp_avg_sq"}, {"exp_avg", "exp_avg_sq"}};

}  // namespace

std::string_view to_string(Optimizer o) {
  switch (o) {
    case Optimizer::sgd: return "sgd";
    case Optimizer::momentum: return "momentum";
    case Optimizer::adam: return "adam";
    case Optimizer::adamw: return "adamw";
  }
  return "?";
}

std::string_view to_string(ConvAlgo a) { return a == ConvAlgo::direct ? "direct" : "im2col"; }

int optimizer_state_count(Optimizer o) {
  switch (o) {
    case Optimizer::sgd: return 0;
    case Optimizer::momentum: return 1;
    case Optimizer::adam: return 2;
    case Optimizer::adamw: return 2;
  }
  return 0;
}

std::uint64_t TrainingSettings::optimizer_state_bytes(std::uint64_t elements) const {
  const DType d = optimizer_state_dtype.value_or(state_dtype());
  if (d != DType::int8) return elements * dtype_bytes(d);
  constexpr std::uint64_t kBlock = 2048, kMin8bitElements = 4096;
  if (elements < kMin8bitElements) return elements * 4;
  return elements + (elements + kBlock - 1) / kBlock * 4;
}

std::string TrainingSettings::summary() const {
  std::string s = fmt::format("batch {}, {}{}, {}", batch, to_string(dtype),
                              mixed_precision ? " mixed" : "", to_string(optimizer));
  if (optimizer_state_dtype) s += fmt::format(" ({} state)", to_string(*optimizer_state_dtype));
  if (fp32_main_grads) s += ", fp32 main grads";
  if (fp8) s += ", fp8";
  if (!inplace) s += ", relu out of place";
  if (conv_algo != ConvAlgo::direct) s += fmt::format(", {}", to_string(conv_algo));
  const FusedKernels usual;
  if (fused.layer_norm != usual.layer_norm) s += ", unfused norms";
  if (fused.softmax != usual.softmax) s += ", unfused softmax";
  if (fused.softmax_shape_rules) s += ", Megatron's softmax kernel where it fits";
  if (fused.bias_gelu != usual.bias_gelu) s += ", unfused bias-gelu";
  if (fused.swiglu != usual.swiglu) s += ", fused swiglu";
  if (fused.dropout_add != usual.dropout_add) s += ", fused dropout-add";
  if (finetune.freeze != FineTune::Freeze::none || finetune.lora()) s += ", " + finetune.summary();
  return s;
}

std::vector<ParamSpec> training_param_specs() {
  return {
      {"batch", "samples per mini-batch", "32"},
      {"dtype", "element type of activations, weights and gradients (and of the optimizer "
                "state unless mixed_precision): fp32, fp16 or bf16", "fp32"},
      {"mixed_precision", "true: dtype fp16/bf16 compute with fp32 master weights and fp32 "
                          "optimizer state (needs dtype fp16 or bf16)", "false"},
      {"optimizer", "sgd (no state), momentum (one buffer per parameter), adam or adamw (two)",
       "momentum"},
      {"inplace", "run the activations the model runs in place (torchvision's "
                  "ReLU(inplace=True)) in place; false: out of place", "true"},
      {"conv_algo", "direct, or im2col: each convolution and its backward get a workspace of "
                    "the lowered input, N x (C/groups x K x K) x (Hout x Wout)", "direct"},
      {"main_grads", "dtype (each .grad in dtype, freed by its step), or fp32: Megatron's "
                     "persistent fp32 main_grad per parameter (needs mixed_precision; 18 bytes "
                     "per parameter with adamw)", "dtype"},
      {"optimizer_state_dtype", "auto (fp32 with mixed_precision, else dtype), fp32, fp16, "
                                "bf16, or int8 (8-bit Adam: 1 byte per element plus an fp32 "
                                "absmax per block of 2048)", "auto"},
      {"fp8", "true: TransformerEngine-style FP8 linears (fp8 weight copies and saved inputs, "
              "scaling state; needs dtype fp16 or bf16)", "false"},
  };
}

std::vector<ParamSpec> with_training_params(std::vector<ParamSpec> model_specs) {
  for (auto& s : training_param_specs()) model_specs.push_back(std::move(s));
  return model_specs;
}

std::vector<ParamSpec> image_classifier_specs(std::vector<ParamSpec> model_specs,
                                              int min_image_size) {
  model_specs.push_back({"image_size",
                         fmt::format("height and width of the square input images, in pixels (at "
                                     "least {})",
                                     min_image_size),
                         "224"});
  model_specs.push_back({"num_classes", "outputs of the final fully connected layer", "1000"});
  return with_training_params(std::move(model_specs));
}

TrainingSettings read_training_settings(const Params& params) {
  TrainingSettings s;
  s.batch = params.get("batch").as_int_in(1, 1'000'000);
  s.dtype = *dtype_from_string(params.get("dtype").as_choice({"fp32", "fp16", "bf16"}));
  const ConfigNode mixed = params.get("mixed_precision");
  s.mixed_precision = mixed.as_bool();
  if (s.mixed_precision && s.dtype == DType::fp32) {
    if (params.given("mixed_precision")) mixed.fail("needs dtype fp16 or bf16, got fp32");
    s.mixed_precision = false;  // a model's default of true (hf) yields to dtype: fp32
  }
  const std::string opt =
      params.get("optimizer").as_choice({"sgd", "momentum", "adam", "adamw"});
  s.optimizer = opt == "sgd"        ? Optimizer::sgd
                : opt == "momentum" ? Optimizer::momentum
                : opt == "adam"     ? Optimizer::adam
                                    : Optimizer::adamw;
  const ConfigNode main_grads = params.get("main_grads");
  s.fp32_main_grads = main_grads.as_choice({"dtype", "fp32"}) == "fp32";
  if (s.fp32_main_grads && !s.mixed_precision)
    main_grads.fail("fp32 main grads need mixed_precision: true");
  const std::string state = params.get("optimizer_state_dtype")
                                .as_choice({"auto", "fp32", "fp16", "bf16", "int8"});
  if (state != "auto") s.optimizer_state_dtype = *dtype_from_string(state);
  const ConfigNode fp8 = params.get("fp8");
  s.fp8 = fp8.as_bool();
  if (s.fp8 && s.dtype == DType::fp32) fp8.fail("needs dtype fp16 or bf16, got fp32");
  s.inplace = params.get("inplace").as_bool();
  s.conv_algo = params.get("conv_algo").as_choice({"direct", "im2col"}) == "direct"
                    ? ConvAlgo::direct
                    : ConvAlgo::im2col;
  // Read where the model declares them (the transformers).
  for (const ParamSpec& spec : params.specs()) {
    if (spec.name == "recompute") s.full_recompute = params.get("recompute").as_choice({"none", "full"}) == "full";
    if (spec.name == "fused_layer_norm") s.fused.layer_norm = params.get(spec.name).as_bool();
    if (spec.name == "fused_softmax") {
      const ConfigNode n = params.get(spec.name);
      s.fused.softmax_shape_rules = n.as_choice({"true", "false", "megatron"}) == "megatron";
      s.fused.softmax = s.fused.softmax_shape_rules || n.as_bool();
    }
    if (spec.name == "fused_bias_gelu") s.fused.bias_gelu = params.get(spec.name).as_bool();
    if (spec.name == "fused_swiglu") s.fused.swiglu = params.get(spec.name).as_bool();
    if (spec.name == "fused_dropout_add") s.fused.dropout_add = params.get(spec.name).as_bool();
    if (spec.name == "finetune") s.finetune = read_finetune(params.get(spec.name));
  }
  if (auto section = params.extra("parallel"); section && section->is_map()) {
    // The workload's parallel section, read again in full by generate_workload.
    const ParallelSettings p = read_parallel_settings(Params(*section, parallel_param_specs(), "parallel"), s.batch);
    s.tp = p.tp;
    s.sp = p.sp;
    s.tp_comm_overlap = p.tp_comm_overlap;
    s.ep = p.ep;
    s.cp = p.cp;
    s.parallel = *section;
    if (const FineTune& f = s.finetune; f.node) {
      if (f.lora() && p.tp > 1)
        f.node->at("lora").fail(fmt::format(
            "LoRA adapters with tensor parallelism (parallel.tp {}) are not modelled; use dp or pp", p.tp));
      if (f.freeze != FineTune::Freeze::none && p.zero == 3)
        f.node->find("freeze").value_or(*f.node).fail(
            "frozen weights with parallel.zero 3 are not modelled (ZeRO-3 would shard them too); use zero 0 to 2");
    }
  }
  return s;
}

std::int64_t element_count(const Shape& shape) {
  // Checked: parameters at the top of their ranges (a batch of a million 8192 x 8192 images)
  // multiply past 64 bits; 2^50 elements is past any memory already (1 PiB of bytes).
  constexpr std::uint64_t kMostElements = std::uint64_t{1} << 50;
  std::optional<std::uint64_t> n = 1;
  for (auto d : shape) n = n && d >= 0 ? checked_mul(*n, static_cast<std::uint64_t>(d)) : std::nullopt;
  if (!n || *n > kMostElements)
    throw TensorTooLarge(fmt::format("a tensor of shape [{}] has more than 2^50 elements, past any memory: lower the "
                                 "batch or the model's sizes",
                                 fmt::join(shape, ", ")));
  return static_cast<std::int64_t>(*n);
}

// ---------------------------------------------------------------------------------------
// Bookkeeping

ModelBuilder::ModelBuilder(const TrainingSettings& settings)
    : settings_(settings), op_limit_(op_limit()), fp8_linears_(settings.fp8) {}

OpId ModelBuilder::add_op(Op op) {
  if (trace_.ops.size() >= op_limit_)
    throw StepTooLarge(fmt::format("the step has more than {} ops, the limit (raise it with --max-ops N or "
                                   "MEMSIM_MAX_OPS=N)",
                                   format_limit(op_limit_)));
  if (op.unit == kNoUnit) op.unit = unit_;
  return trace_.add_op(std::move(op));
}

void ModelBuilder::begin_unit(const std::string& name, bool layer) {
  const auto [it, fresh] = unit_index_.try_emplace(name, static_cast<UnitId>(trace_.units.size()));
  if (fresh) trace_.units.push_back({name, layer});
  unit_ = it->second;
}

void ModelBuilder::end_unit() { unit_ = kNoUnit; }

bool ModelBuilder::set_fp8_linears(bool on) {
  const bool was = fp8_linears_;
  fp8_linears_ = on && settings_.fp8;
  return was;
}

const Shape& ModelBuilder::shape(Value v) const { return values_.at(v.id).shape; }
BufferId ModelBuilder::buffer(Value v) const { return values_.at(v.id).buffer; }

void ModelBuilder::reserve(std::size_t ops, std::size_t buffers) {
  trace_.ops.reserve(ops);
  trace_.buffers.reserve(buffers);
  holders_.reserve(buffers);
}

BufferId ModelBuilder::activation_buffer(std::string name, std::uint64_t elements,
                                         DType dtype) {
  return trace_.add_buffer(std::move(name), elements * dtype_bytes(dtype),
                           Category::activation);
}

Value ModelBuilder::new_value(std::string name, Shape shape, bool requires_grad) {
  const auto elements = static_cast<std::uint64_t>(element_count(shape));
  const BufferId b = activation_buffer(std::move(name), elements, settings_.dtype);
  values_.push_back({b, std::move(shape), requires_grad});
  grad_.push_back(kNoBuffer);
  return Value{static_cast<std::uint32_t>(values_.size() - 1)};
}

Value ModelBuilder::alias(Value of, Shape shape, bool requires_grad) {
  values_.push_back({buffer(of), std::move(shape), requires_grad});
  grad_.push_back(kNoBuffer);
  return Value{static_cast<std::uint32_t>(values_.size() - 1)};
}

Value ModelBuilder::value_on(BufferId b, Shape shape, bool requires_grad) {
  values_.push_back({b, std::move(shape), requires_grad});
  grad_.push_back(kNoBuffer);
  return Value{static_cast<std::uint32_t>(values_.size() - 1)};
}

Value ModelBuilder::input(const std::string& name, Shape shape, DType dtype) {
  const auto elements = static_cast<std::uint64_t>(element_count(shape));
  const BufferId b = trace_.add_buffer(name, elements * dtype_bytes(dtype), Category::input);
  values_.push_back({b, std::move(shape), false});
  grad_.push_back(kNoBuffer);
  return Value{static_cast<std::uint32_t>(values_.size() - 1)};
}

bool ModelBuilder::set_trainable(bool on) {
  const bool was = trainable_;
  trainable_ = on;
  return was;
}

std::uint32_t ModelBuilder::parameter(std::string name, std::uint64_t elements) {
  const std::uint64_t bytes = elements * dtype_bytes(settings_.dtype);
  Parameter p{name, trace_.add_buffer(name, bytes, Category::weight, true), {}, elements,
              kNoBuffer};
  p.unit = unit_;
  if (!trainable_) {
    // Frozen: the weight alone, in dtype; no optimizer ever reads or writes it.
    p.trainable = false;
    params_.push_back(std::move(p));
    return static_cast<std::uint32_t>(params_.size() - 1);
  }
  // Master weights and optimizer state are in state_dtype() (fp32 under mixed precision).
  const std::uint64_t state_bytes = elements * dtype_bytes(settings_.state_dtype());
  if (settings_.mixed_precision)
    p.master = trace_.add_buffer(name + ".master", state_bytes, Category::weight, true);
  const int states = optimizer_state_count(settings_.optimizer);
  const int opt = static_cast<int>(settings_.optimizer);
  for (int i = 0; i < states; ++i)
    p.state.push_back(trace_.add_buffer(name + "." + std::string(kStateNames[opt][i]),
                                        settings_.optimizer_state_bytes(elements),
                                        Category::optimizer_state, true));
  // Megatron's main_grad lives for the whole run (its DDP grad buffer, zeroed at the start of
  // each step); the backward adds each bf16 gradient into it as soon as it is made.
  if (settings_.fp32_main_grads)
    p.main_grad = trace_.add_buffer(name + ".main_grad", elements * 4, Category::gradient, true);
  params_.push_back(std::move(p));
  return static_cast<std::uint32_t>(params_.size() - 1);
}

BufferId ModelBuilder::parameter_grad(std::uint32_t p) {
  Parameter& param = params_[p];
  if (!param.trainable) throw std::logic_error(fmt::format("a gradient for frozen parameter '{}'", param.name));
  // Created by the backward op; AccumulateGrad then steals it as .grad (grads start as None
  // after zero_grad(set_to_none=True)), so no copy op.
  param.grad = trace_.add_buffer(param.name + ".grad", trace_.buffers[param.weight].bytes,
                                 Category::gradient);
  // With fp32 main grads the bf16 .grad lives only from the backward op that makes it to
  // the add into main_grad right after (Megatron's grad hook; with gradient-accumulation
  // fusion the weight GEMM adds into main_grad itself and no bf16 .grad is ever made).
  if (param.main_grad != kNoBuffer) pending_main_grads_.emplace_back(p, param.grad);
  return param.grad;
}

BufferId ModelBuilder::grad_buffer(const std::string& op_name, Value like) {
  const auto elements = static_cast<std::uint64_t>(element_count(shape(like)));
  return trace_.add_buffer(op_name + ".grad_input", elements * dtype_bytes(settings_.dtype),
                           Category::activation_grad);
}

OpId ModelBuilder::emit(std::string name, std::string_view kind, Ids inputs, Ids outputs, Ids updates,
                        double flops) {
  if (!remap_.empty())  // inside a recomputed region's backward: read the remakes
    for (auto* list : {&inputs, &updates})
      for (BufferId& b : *list)
        if (auto it = remap_.find(b); it != remap_.end()) b = it->second;
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.phase = phase_;
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.updates = std::move(updates);
  op.flops = flops;
  op.dtype = settings_.dtype;
  op.bytes_moved = bytes_moved(trace_, op);
  // tp_comm_overlap: a reader of an overlapped gather's output runs alongside the rest of the
  // gather, and what reads its outputs waits for the gather to end (the forward's gathers are
  // forgotten when the backward starts: each has ended long before).
  OpId overlapped = kNoOp;
  if (phase_ != Phase::optimizer && (!overlapped_gather_.empty() || !gated_by_.empty()))
    for (const auto* list : {&op.inputs, &op.updates})
      for (BufferId b : *list) {
        if (auto it = overlapped_gather_.find(b); it != overlapped_gather_.end()) overlapped = it->second;
        if (auto it = gated_by_.find(b); it != gated_by_.end() &&
                                         std::find(op.waits_for.begin(), op.waits_for.end(), it->second) ==
                                             op.waits_for.end())
          op.waits_for.push_back(it->second);
      }
  const OpId id = add_op(std::move(op));
  if (overlapped != kNoOp)
    for (BufferId b : trace_.ops[id].outputs) gated_by_[b] = overlapped;
  if (!pending_main_grads_.empty()) {
    // Each gradient this op made is added into its parameter's main_grad at once.
    std::vector<std::pair<std::uint32_t, BufferId>> waiting;
    std::vector<std::pair<std::uint32_t, BufferId>> made;
    for (const auto& pg : pending_main_grads_) {
      const auto& outs = trace_.ops[id].outputs;
      (std::find(outs.begin(), outs.end(), pg.second) != outs.end() ? made : waiting).push_back(pg);
    }
    pending_main_grads_ = std::move(waiting);
    for (const auto& [p, g] : made)
      emit(params_[p].name + ".main_grad.accumulate", "accumulate_grad", {g}, {},
           {params_[p].main_grad}, kAccumulateFlops * static_cast<double>(params_[p].elements));
  }
  return id;
}

std::uint32_t& ModelBuilder::holders(BufferId b) {
  if (b >= holders_.size()) holders_.resize(trace_.buffers.size(), 0);
  return holders_[b];
}

bool ModelBuilder::has_grad(Value v) const { return grad_[v.id] != kNoBuffer; }

BufferId ModelBuilder::take_grad(Value v) {
  const BufferId g = grad_[v.id];
  grad_[v.id] = kNoBuffer;
  --holders(g);
  return g;
}

// A second gradient for a tensor is summed into the first, as autograd's InputBuffer does:
// in place (accumulate_grad updates the first buffer, reading the new one, which then dies)
// when no other tensor's gradient slot still holds the first buffer — PyTorch checks the
// same thing through the tensor's use count — else out of place into a new buffer. In place
// is what PyTorch does in the residual blocks here, and it allocates nothing.
//
// A gradient may be a view into a larger buffer (cat's backward hands out slices of its one
// gradient): the slot then holds the whole buffer, and a sum goes out of place into a new
// buffer of the tensor's own size, as PyTorch does for a non-dense view.
void ModelBuilder::contribute(Value v, BufferId grad, const std::string& consumer) {
  const BufferId first = grad_[v.id];
  if (first == kNoBuffer) {
    grad_[v.id] = grad;
    ++holders(grad);
    return;
  }
  const auto elements = static_cast<double>(element_count(shape(v)));
  const std::uint64_t own_bytes =
      static_cast<std::uint64_t>(element_count(shape(v))) * dtype_bytes(settings_.dtype);
  if (holders(first) == 1 && trace_.buffers[first].bytes == own_bytes) {
    emit(consumer + ".accumulate_grad", "accumulate_grad", {grad}, {}, {first},
         kAccumulateFlops * elements);
    return;
  }
  const BufferId sum =
      trace_.add_buffer(consumer + ".grad_sum", own_bytes, Category::activation_grad);
  emit(consumer + ".accumulate_grad", "accumulate_grad", {first, grad}, {sum}, {},
       kAccumulateFlops * elements);
  --holders(first);
  grad_[v.id] = sum;
  ++holders(sum);
}

// ---------------------------------------------------------------------------------------

void ModelBuilder::begin_recompute() {
  recompute_from_ = static_cast<OpId>(trace_.ops.size());
  // Runs last of the region's backward: its remakes are not read past it.
  record_backward([this] { remap_.clear(); });
}

void ModelBuilder::end_recompute(Value out) {
  const OpId from = recompute_from_, to = static_cast<OpId>(trace_.ops.size());
  recompute_from_ = kNoOp;
  // Frozen and below everything that trains: no backward reads the region.
  if (!values_[out.id].requires_grad) return;
  // Runs first of the region's backward: the forward ops again, on buffers of their own.
  record_backward([this, from, to] {
    for (OpId id = from; id < to; ++id) {
      Op op = trace_.ops[id];
      op.name += kRecomputedOpSuffix;
      op.phase = Phase::backward;
      op.waits_for.clear();
      for (auto* list : {&op.inputs, &op.updates})
        for (BufferId& b : *list)
          if (auto it = remap_.find(b); it != remap_.end()) b = it->second;
      for (BufferId& b : op.outputs) {
        const Buffer& orig = trace_.buffers[b];
        const BufferId again = trace_.add_buffer(orig.name + "@recompute", orig.bytes, orig.category, false);
        remap_[b] = again;
        b = again;
      }
      add_op(std::move(op));
    }
  });
}

Trace ModelBuilder::finish(std::string name, std::string description, std::int64_t sample_tokens) {
  // Located at the value (a file's line or the --set that gave it).
  auto refuse = [&](const char* key, std::uint32_t value, const std::string& why) {
    if (settings_.parallel)
      if (auto node = settings_.parallel->find(key)) node->fail(why);
    throw InputError(fmt::format("parallel.{} {}: {}", key, value, why));
  };
  if (settings_.tp > 1 && !tp_used_)
    refuse("tp", settings_.tp,
           fmt::format("model {} does not split over tensor-parallel ranks; the transformers (bert, gpt2, gpt, "
                       "llama) do",
                       name));
  if (settings_.cp > 1 && !cp_used_)
    refuse("cp", settings_.cp,
           fmt::format("model {} does not split its sequences over context-parallel ranks; the decoders (gpt2, gpt, "
                       "llama, hf) with attention_impl: fused do",
                       name));
  if (settings_.ep > 1 && !ep_used_)
    refuse("ep", settings_.ep, fmt::format("model {} has no experts to split over expert-parallel ranks", name));
  const FineTune& tune = settings_.finetune;
  if (tune.node && std::none_of(params_.begin(), params_.end(), [](const Parameter& p) { return p.trainable; }))
    tune.node->fail(fmt::format("freezes every weight of {} and adds no LoRA adapter: nothing is left to train (a "
                                "head tied to the token embeddings is frozen with them)",
                                name));
  phase_ = Phase::backward;
  // Every overlapped gather of the forward has ended long before the backward reads its output.
  overlapped_gather_.clear();
  gated_by_.clear();
  for (auto it = tape_.rbegin(); it != tape_.rend(); ++it) {
    unit_ = it->unit;
    it->backward();
  }
  tape_.clear();

  // One step per parameter tensor, in model.parameters() order (the order of creation).
  // The gradient is its last use, so it dies after the step. Under mixed precision the step
  // reads the half gradient, updates the fp32 master and state in fp32, and writes the
  // half weight back from the master.
  phase_ = Phase::optimizer;
  const std::string kind = fmt::format("{}_step", to_string(settings_.optimizer));
  const double flops_per_param = optimizer_flops(settings_.optimizer) +
                                 (settings_.mixed_precision ? kMixedPrecisionStepFlops : 0);
  for (const Parameter& p : params_) {
    if (p.grad == kNoBuffer) continue;
    std::vector<BufferId> updates{p.weight};
    if (p.master != kNoBuffer) updates.push_back(p.master);
    updates.insert(updates.end(), p.state.begin(), p.state.end());
    const BufferId grad = p.main_grad != kNoBuffer ? p.main_grad : p.grad;
    unit_ = p.unit;
    const OpId step = emit(p.name + ".step", kind, {grad}, {}, std::move(updates),
                           flops_per_param * static_cast<double>(p.elements));
    trace_.ops[step].dtype = settings_.state_dtype();
  }
  unit_ = kNoUnit;
  trace_.name = std::move(name);
  trace_.description = std::move(description);
  for (const Parameter& p : params_) trace_.parameters += p.elements;
  trace_.samples = static_cast<std::uint64_t>(settings_.batch);
  trace_.sample_tokens = static_cast<std::uint64_t>(sample_tokens);
  return std::move(trace_);
}

}  // namespace memsim
