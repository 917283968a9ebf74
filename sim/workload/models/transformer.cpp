// Transformers as Hugging Face builds them, with its parameter names, so that parameter
// counts match the published ones: bert (encoder, post-norm), gpt2 and a GPT-3-style gpt
// (decoder, pre-norm, tied LM head), and llama (pre-norm RMSNorm, SwiGLU, rotary, no biases,
// untied head). One block builder serves all four; the families differ in an Arch and in
// module names.
//
// Megatron-LM's fused kernels are options (FusedKernels, the fused_* parameters): the norms,
// the scale-mask-softmax and the bias-GeLU fused by default, the SwiGLU as Hugging Face runs
// it. Left out, as the layer comments in seq_layers.cpp say: eager PyTorch's contiguous
// copies at the head split and merge (views here), HF's eager tanh-GELU (one kernel here),
// the attention mask tensor of the fused softmax, and autocast's fp32 copies (softmax, loss)
// under mixed precision.
#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/core/limits.h"
#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"
#include "sim/workload/models/transformer.h"

namespace memsim {
namespace {

using Impl = ModelBuilder::AttentionImpl;

// A mixture of experts in place of the dense MLP: Mixtral's block_sparse_moe (routed
// experts only) or, with shared experts, DeepSeekMoE's mlp (fine-grained routed experts of
// their own width, plus shared experts that see every token).
struct Moe {
  std::int64_t experts, top_k;
  double capacity_factor;       // tokens per expert = ceil(factor x tokens x top_k / experts)
  std::int64_t ffn;             // each expert's SwiGLU width
  std::int64_t shared_experts;  // 0: Mixtral's layout and names
  std::int64_t first_dense;     // the first layers keep the dense MLP (DeepSeek: 1)
};

struct Arch {
  std::int64_t layers, hidden, heads, ffn, vocab;
  bool pre_norm;   // norm before each sublayer (GPT, Llama) or after the residual (BERT)
  bool rms_norm;   // RMSNorm (Llama) or LayerNorm
  bool swiglu;     // down(silu(gate(x)) * up(x)) (Llama) or down(gelu(up(x)))
  bool bias;       // biases in the projections
  bool causal;
  bool fused_qkv;  // one projection split in three (GPT-2's c_attn) or three projections
  double dropout;  // on the attention probabilities and after each sublayer
  std::int64_t kv_heads = 0;  // k/v heads (grouped-query attention); 0: as many as heads
  bool qkv_bias = false;      // biases on q, k and v alone (Qwen2), without `bias`
  const Moe* moe = nullptr;  // mixture of experts in place of the MLP, or null
};

// Module names inside a block, as Hugging Face names them.
struct Names {
  const char* norm_attn;
  const char* norm_mlp;
  const char* q;  // or the fused projection, with fused_qkv
  const char* k;
  const char* v;
  const char* attn;
  const char* out;
  const char* attn_dropout;
  const char* attn_residual;
  const char* gate;
  const char* up;
  const char* act;
  const char* down;
  const char* mlp_dropout;
  const char* mlp_residual;
};
constexpr Names kBertNames{"attention.output.LayerNorm", "output.LayerNorm",
                           "attention.self.query", "attention.self.key",
                           "attention.self.value", "attention.self",
                           "attention.output.dense", "attention.output.dropout",
                           "attention.output.residual", nullptr,
                           "intermediate.dense", "intermediate.intermediate_act_fn",
                           "output.dense", "output.dropout",
                           "output.residual"};
constexpr Names kGptNames{"ln_1", "ln_2", "attn.c_attn", nullptr, nullptr, "attn",
                          "attn.c_proj", "attn.resid_dropout", "attn.residual", nullptr,
                          "mlp.c_fc", "mlp.act", "mlp.c_proj", "mlp.dropout", "mlp.residual"};
constexpr Names kLlamaNames{"input_layernorm", "post_attention_layernorm",
                            "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                            "self_attn", "self_attn.o_proj", nullptr, "self_attn.residual",
                            "mlp.gate_proj", "mlp.up_proj", "mlp.act_fn", "mlp.down_proj",
                            nullptr, "mlp.residual"};

struct Stack {
  ModelBuilder& m;
  const Arch& arch;
  const Names& names;
  std::int64_t batch;
  Impl impl;
  const Value* rotary;  // cos and sin tables, or null
};

Value drop(ModelBuilder& m, const std::string& name, Value x, double p) {
  return p > 0 ? m.dropout(name, x) : x;
}

// A sublayer's output h back into the residual stream x: its dropout (where the arch has one
// and p > 0), then the add; with fused_dropout_add one kernel under the add's name, as
// Megatron's bias_dropout_add_fusion (at p = 0 that kernel is the add).
Value residual(ModelBuilder& m, const std::string& prefix, const char* dropout, const char* add, Value h, Value x,
               double p) {
  if (dropout != nullptr && p > 0 && m.settings().fused.dropout_add) return m.dropout_add(prefix + add, h, x);
  if (dropout != nullptr) h = drop(m, prefix + dropout, h, p);
  return m.add(prefix + add, h, x);
}

// Megatron's f and g around a tensor-parallel pair of linears (tensor_parallel.cpp): with
// tp 1 nothing; with sequence parallelism the gather and scatter of the token shards.
Value tp_enter(ModelBuilder& m, const std::string& name, Value x) {
  if (m.settings().tp == 1) return x;
  return m.settings().sp ? m.sp_gather(name + ".sp_gather", x) : m.tp_copy(name + ".tp_copy", x);
}
Value tp_leave(ModelBuilder& m, const std::string& name, Value x) {
  if (m.settings().tp == 1) return x;
  return m.settings().sp ? m.sp_scatter(name + ".sp_scatter", x) : m.tp_reduce(name + ".tp_reduce", x);
}

Value moe_mlp(const Stack& s, const std::string& p, Value h);

// A linear of a block, with a LoRA adapter beside it when the workload's finetune.lora
// targets it (`target`: q, k, v, qkv, o, gate, up, gate_up, down).
Value project(ModelBuilder& m, const std::string& name, const char* target, Value x, std::int64_t out, bool bias) {
  const Value y = m.linear(name, x, out, bias);
  const FineTune& f = m.settings().finetune;
  return f.lora() && f.targets(target) ? m.lora(name, x, y) : y;
}

// Module names of a SwiGLU MLP under its prefix.
struct GluNames {
  const char* gate;
  const char* up;
  const char* gate_up;  // the one projection of gate and up, with fused.swiglu
  const char* act;
  const char* mul;
  const char* down;
};

// SwiGLU down(silu(gate(x)) * up(x)) of width `ffn` over x: Hugging Face's gate and up
// projections, silu and product, or with fused.swiglu one projection of both (Megatron's
// linear_fc1, named gate_up as vLLM names it) and Megatron's fused kernel.
Value swiglu_mlp(ModelBuilder& m, const std::string& p, const GluNames& n, Value x, std::int64_t hidden,
                 std::int64_t ffn, bool bias) {
  Value y;
  if (m.settings().fused.swiglu) {
    y = m.swiglu(p + n.act, project(m, p + n.gate_up, "gate_up", x, 2 * ffn, bias));
  } else {
    const Value gate = m.silu(p + n.act, project(m, p + n.gate, "gate", x, ffn, bias));
    y = m.mul(p + n.mul, gate, project(m, p + n.up, "up", x, ffn, bias));
  }
  return project(m, p + n.down, "down", y, hidden, bias);
}

// One block: attention and MLP sublayers with residuals, norms pre or post; `moe` puts the
// arch's mixture of experts in place of the MLP. Under tensor
// parallelism (tp ranks) this rank holds heads/tp of the attention (q, k, v split by
// output features, the output projection by input features) and ffn/tp of the MLP, as
// Megatron-LM splits them; the residual stream is whole (or, with sp, 1/tp of the tokens).
Value block(const Stack& s, const std::string& p, Value x, bool moe = false) {
  ModelBuilder& m = s.m;
  const Arch& a = s.arch;
  const Names& n = s.names;
  const std::int64_t t = m.settings().tp;
  auto norm = [&](const char* name, Value v) {
    return a.rms_norm ? m.rms_norm(p + name, v) : m.layer_norm(p + name, v);
  };

  Value h = a.pre_norm ? norm(n.norm_attn, x) : x;
  h = tp_enter(m, p + n.attn, h);
  Value q, k, v;
  const std::int64_t kv_width = (a.kv_heads > 0 ? a.kv_heads : a.heads) * (a.hidden / a.heads);
  if (a.fused_qkv) {
    // One projection (GPT-2's c_attn, Megatron's linear_qkv), split into q and the narrower
    // k and v under grouped-query attention.
    const Value qkv = project(m, p + n.q, "qkv", h, (a.hidden + 2 * kv_width) / t, a.bias);
    const std::vector<Value> parts = m.split(p + n.q + ".split", qkv, {a.hidden / t, kv_width / t, kv_width / t});
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    q = project(m, p + n.q, "q", h, a.hidden / t, a.bias || a.qkv_bias);
    k = project(m, p + n.k, "k", h, kv_width / t, a.bias || a.qkv_bias);
    v = project(m, p + n.v, "v", h, kv_width / t, a.bias || a.qkv_bias);
  }
  if (s.rotary != nullptr) {
    q = m.rotary(p + n.attn + ".rotary_q", q, s.rotary[0], s.rotary[1]);
    k = m.rotary(p + n.attn + ".rotary_k", k, s.rotary[0], s.rotary[1]);
  }
  h = m.attention(p + n.attn, q, k, v, s.batch, a.heads / t, a.causal, s.impl, a.dropout);
  h = project(m, p + n.out, "o", h, a.hidden, a.bias);
  h = tp_leave(m, p + n.out, h);
  x = residual(m, p, n.attn_dropout, n.attn_residual, h, x, a.dropout);
  if (!a.pre_norm) x = norm(n.norm_attn, x);

  h = a.pre_norm ? norm(n.norm_mlp, x) : x;
  h = tp_enter(m, p + "mlp", h);
  if (moe) {
    h = moe_mlp(s, p, h);
  } else if (a.swiglu) {
    h = swiglu_mlp(m, p, {n.gate, n.up, "mlp.gate_up_proj", n.act, "mlp.mul", n.down}, h, a.hidden, a.ffn / t,
                   a.bias);
  } else {
    // Fused: the bias in the GEMM, then one GeLU kernel (the kernels, bytes and saved input
    // of Megatron's bias_gelu_fusion); unfused: the GEMM, a bias add, the GeLU.
    if (a.bias && !m.settings().fused.bias_gelu)
      h = m.bias_add(p + n.up + ".bias_add", project(m, p + n.up, "up", h, a.ffn / t, false), p + n.up + ".bias");
    else
      h = project(m, p + n.up, "up", h, a.ffn / t, a.bias);
    h = m.gelu(p + n.act, h);
    h = project(m, p + n.down, "down", h, a.hidden, a.bias);
  }
  h = tp_leave(m, p + (moe ? "moe" : n.down), h);
  x = residual(m, p, n.mlp_dropout, n.mlp_residual, h, x, a.dropout);
  if (!a.pre_norm) x = norm(n.norm_mlp, x);
  return x;
}

Value blocks(const Stack& s, const std::string& prefix, Value x) {
  const Moe* moe = s.arch.moe;
  const bool full = s.m.settings().full_recompute;
  for (std::int64_t i = 0; i < s.arch.layers; ++i) {
    s.m.set_trainable(s.m.settings().finetune.trains_layer(i));
    const std::string layer = fmt::format("{}{}", prefix, i);
    s.m.begin_unit(layer, /*layer=*/true);
    if (full) s.m.begin_recompute();
    x = block(s, layer + ".", x, moe != nullptr && i >= moe->first_dense);
    if (full) s.m.end_recompute(x);
    s.m.end_unit();
  }
  s.m.set_trainable(s.m.settings().finetune.trains_final_norm());
  return x;
}

// A mixture of experts over the normed hidden states h (tokens x hidden), as Hugging Face's
// MixtralSparseMoeBlock and DeepseekMoE run it: router logits (a linear without bias),
// softmax and top-k, then per expert the gather of its tokens, its SwiGLU and the weighted
// scatter-add into one output; shared experts (one SwiGLU of shared x ffn, DeepSeek's
// layout) are added to it. Every expert gets `capacity` tokens: ceil(capacity_factor x
// tokens x top_k / experts), at most all tokens. capacity_factor 1 is perfect balance (what
// a dropless router averages to); above 1 it is a capacity limit's padded buffers, or the
// load of the busiest expert. The auxiliary load-balancing loss (a few tokens x experts
// values) is left out. Under tensor parallelism each expert's SwiGLU is split as the dense
// MLP is (Megatron's expert tensor parallelism equal to tp), the router replicated.
Value moe_mlp(const Stack& s, const std::string& p, Value h) {
  ModelBuilder& m = s.m;
  const Moe& moe = *s.arch.moe;
  const bool mixtral = moe.shared_experts == 0;
  const std::string q = p + (mixtral ? "block_sparse_moe." : "mlp.");
  static constexpr GluNames kMixtral{"w1", "w3", "w13", "act_fn", "mul", "w2"};
  static constexpr GluNames kDeepseek{"gate_proj", "up_proj", "gate_up_proj", "act_fn", "mul", "down_proj"};
  const GluNames& names = mixtral ? kMixtral : kDeepseek;
  const std::int64_t tokens = m.shape(h)[0], hidden = m.shape(h)[1], t = m.settings().tp;
  const double wanted = std::ceil(moe.capacity_factor * static_cast<double>(tokens * moe.top_k) /
                                  static_cast<double>(moe.experts));
  const std::int64_t capacity =
      std::max<std::int64_t>(1, std::min<std::int64_t>(tokens, static_cast<std::int64_t>(wanted)));

  BufferId indices = 0;
  const bool fp8 = m.set_fp8_linears(false);  // the router stays in the compute type
  const Value logits = m.linear(q + "gate", h, moe.experts, false);
  m.set_fp8_linears(fp8);
  const Value weights = m.route_top_k(q + "router", logits, moe.top_k, indices);
  Value out;
  if (const std::int64_t ranks = m.settings().ep; ranks > 1) {
    // Expert parallelism: this rank holds experts 0 .. E/ep - 1. Every routed token slot is
    // permuted into expert order and sent to its expert's rank; each local expert takes its
    // capacity from each of the ep ranks; the outputs go back the same way and are weighted
    // into the tokens.
    if (moe.experts % ranks != 0)
      throw InputError(fmt::format("parallel.ep {} does not divide the {} experts", ranks, moe.experts));
    const Value permuted = m.dispatch(q + "permute", h, capacity * moe.experts, indices);
    const Value received = m.ep_all_to_all(q + "dispatch_all_to_all", permuted);
    std::vector<Value> outputs;
    for (std::int64_t e = 0; e < moe.experts / ranks; ++e) {
      const std::string ep = fmt::format("{}experts.{}.", q, e);
      const Value xe = m.dispatch(ep + "dispatch", received, capacity * ranks, indices);
      outputs.push_back(swiglu_mlp(m, ep, names, xe, hidden, moe.ffn / t, false));
    }
    const Value gathered = m.cat(q + "experts.cat", outputs);
    const Value back = m.ep_all_to_all(q + "combine_all_to_all", gathered);
    out = m.unpermute(q + "unpermute", back, weights, indices, {tokens, hidden});
  } else {
    out = m.zeros(q + "experts.sum", {tokens, hidden});
    for (std::int64_t e = 0; e < moe.experts; ++e) {
      const std::string ep = fmt::format("{}experts.{}.", q, e);
      const Value xe = m.dispatch(ep + "dispatch", h, capacity, indices);
      const Value ye = swiglu_mlp(m, ep, names, xe, hidden, moe.ffn / t, false);
      out = m.combine(ep + "combine", out, ye, weights, indices);
    }
  }
  if (moe.shared_experts > 0) {
    const Value shared =
        swiglu_mlp(m, q + "shared_experts.", kDeepseek, h, hidden, moe.shared_experts * moe.ffn / t, false);
    out = m.add(q + "add_shared", out, shared);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Parameters the families share

}  // namespace

std::vector<ParamSpec> fused_kernel_specs(FusedFor family) {
  const bool gelu = family != FusedFor::swiglu_rms_norm, swiglu = family != FusedFor::gelu_layer_norm;
  const char* norm =
      family == FusedFor::gelu_layer_norm
          ? "true (default, as Hugging Face and Megatron-LM run it): each LayerNorm one kernel forward and one "
            "backward (torch's nn.LayerNorm, apex FusedLayerNorm), which keep its input and an fp32 mean and "
            "rstd per token; false: pytorch-pretrained-BERT's BertLayerNorm, ten elementwise ops that keep "
            "x - mean twice, the normalised input and the std per token, in dtype"
      : family == FusedFor::swiglu_rms_norm
          ? "true (default, as Megatron-LM runs it): each RMSNorm one kernel forward and one backward "
            "(TransformerEngine, apex FusedRMSNorm), which keep its input and an fp32 rstd per token; false: "
            "Hugging Face's eager LlamaRMSNorm, eight ops (six in fp32) that keep an fp32 copy of the input, "
            "the rstd and the normalised input"
          : "true (default, as Megatron-LM runs it): each norm one kernel forward and one backward (LayerNorm "
            "keeps its input and an fp32 mean and rstd per token, RMSNorm its input and rstd); false: the "
            "eager ops of pytorch-pretrained-BERT's BertLayerNorm or of Hugging Face's LlamaRMSNorm";
  std::vector<ParamSpec> specs{
      {"fused_layer_norm", norm, "true"},
      {"fused_softmax",
       "materialized and selective attention: true (default, as Megatron-LM runs it): the scale, the mask and "
       "the softmax in one kernel (FusedScaleMaskSoftmax) that keeps its output; false: Megatron's unfused "
       "path, a scale, an in-place fill of a bool attention_mask and the softmax as kernels of their own, in "
       "fp32 for fp16 and bf16 (a cast in and one out), which keeps the fp32 probabilities; megatron: the kernel "
       "where Megatron's FusedScaleMaskSoftmax takes the shape (fp16 or bf16, 16 < seq <= 4096, seq a multiple "
       "of 4, micro-batch x heads per rank a multiple of 4, of 8 at seq <= 128), the unfused path elsewhere",
       "true"}};
  if (gelu) {
    const std::string family = swiglu ? "GPT-2, BERT: " : "";
    specs.push_back({"fused_bias_gelu",
                     family +
                         "true (default, as Megatron-LM's bias_gelu_fusion and Hugging Face's nn.Linear then "
                         "GELU run it): the MLP's bias added in the GEMM or with the GeLU, one kernel after the "
                         "GEMM, which keeps the GeLU input; false: Megatron-LM without the fusion, the GEMM "
                         "without bias, then a bias add and the GeLU as two kernels",
                     "true"});
    specs.push_back({"fused_dropout_add",
                     family +
                         "true (as Megatron-LM's bias_dropout_add_fusion, on by default there): the dropout "
                         "after each sublayer and the residual add as one kernel (dropout_add), which keeps the "
                         "dropout's bool mask and writes no dropped-out copy; false (default, as Hugging Face "
                         "runs it): the dropout, then the add, two kernels",
                     "false"});
  }
  if (swiglu)
    specs.push_back({"fused_swiglu",
                     std::string(gelu ? "the Llama family: " : "") +
                         "true: gate and up as one projection of 2 x intermediate (gate_up_proj) and one SwiGLU "
                         "kernel (Megatron-LM's bias_swiglu_impl) that keeps it, 3 x intermediate values per "
                         "token; false (default, as Hugging Face runs it): gate_proj, up_proj, silu and their "
                         "product, which keep 4",
                     "false"});
  return specs;
}

void check_fused_softmax(const Params& params, Impl impl) {
  if (impl == Impl::fused && params.given("fused_softmax"))
    params.get("fused_softmax")
        .fail("applies only with attention_impl materialized or selective (FlashAttention's kernel holds the "
              "softmax)");
}

namespace {

std::vector<ParamSpec> with_common(std::vector<ParamSpec> specs, FusedFor family, const char* seq_default,
                                   const char* impl_default, const char* dropout_default) {
  specs.push_back({"seq_len", "tokens per sample", seq_default});
  specs.push_back({"attention_impl",
                   "materialized (scores tensor batch x heads x seq x seq, softmax saved), "
                   "fused (FlashAttention: no scores tensor, fp32 logsumexp saved) or selective "
                   "(materialized, its seq x seq tensors recomputed in backward: Megatron's "
                   "selective recompute)",
                   impl_default});
  specs.push_back({"dropout",
                   "probability on the attention probabilities and after each sublayer; 0 "
                   "emits no dropout ops",
                   dropout_default});
  specs.push_back({"recompute",
                   "none, or full: each layer keeps only its input and runs again in the backward "
                   "(Megatron's --recompute-granularity full, torch.utils.checkpoint per layer)",
                   "none"});
  for (ParamSpec& spec : fused_kernel_specs(family)) specs.push_back(std::move(spec));
  specs.push_back(finetune_param_spec());
  specs = with_training_params(std::move(specs));
  return specs;
}

Impl read_impl(const Params& params) {
  const std::string form = params.get("attention_impl").as_choice({"materialized", "fused", "selective"});
  const Impl impl = form == "fused" ? Impl::fused : form == "selective" ? Impl::selective : Impl::materialized;
  check_fused_softmax(params, impl);
  return impl;
}

// Context parallelism's conditions, checked where the user set it (parallel.cp): a decoder
// (`splits_sequences`), whose attention is the fused kernel that ring attention runs, over
// sequences of 2 cp chunks (cp under a bidirectional mask).
void check_cp(const Params& params, const Arch& a, std::int64_t seq, Impl impl, bool splits_sequences) {
  const std::int64_t c = read_training_settings(params).cp;
  if (c == 1) return;
  const ConfigNode cp = *params.extra("parallel")->find("cp");
  if (!splits_sequences)
    cp.fail("context parallelism splits a decoder's sequences; this encoder's pooled and classified first token is "
            "not modelled under it (the decoders gpt2, gpt, llama and hf's do)");
  if (impl != Impl::fused)
    cp.fail("context parallelism runs ring attention over FlashAttention blocks (TransformerEngine's): set "
            "attention_impl: fused");
  const std::int64_t chunks = a.causal ? 2 * c : c;
  if (seq % chunks != 0)
    cp.fail_expected(fmt::format("a cp whose {} chunks divide seq_len {}{}", chunks, seq,
                                 a.causal ? " (2 cp chunks, two per rank, balance the causal mask)" : ""));
}

// Tensor parallelism's divisibility, checked where the user set it (parallel.tp); `seq` is
// this rank's part of a sequence (1/cp of it).
void check_tp(const Params& params, const Arch& a, std::int64_t seq, std::int64_t batch) {
  const std::int64_t t = read_training_settings(params).tp;
  if (t == 1) return;
  const ConfigNode tp = *params.extra("parallel")->find("tp");
  if (a.heads % t != 0) tp.fail_expected(fmt::format("a divisor of the {} attention heads", a.heads));
  if (a.ffn % t != 0) tp.fail_expected(fmt::format("a divisor of the MLP width {}", a.ffn));
  if (a.kv_heads > 0 && a.kv_heads % t != 0)
    tp.fail_expected(fmt::format("a divisor of the {} k/v heads", a.kv_heads));
  if (a.moe != nullptr && a.moe->ffn % t != 0)
    tp.fail_expected(fmt::format("a divisor of the expert width {}", a.moe->ffn));
  if (read_training_settings(params).sp && (seq * batch) % t != 0)
    tp.fail_expected(fmt::format("a divisor of the {} tokens per micro-batch (sequence parallelism splits them)",
                                 seq * batch));
}

// The settings with the workload's finetune section checked against the model (the layers
// it may freeze, the projections LoRA may target, the parts blocks_only leaves out) and its
// default targets filled in: q and v (PEFT's default for Llama and BERT), or the fused qkv.
TrainingSettings tuned(const TrainingSettings& settings, const std::string& name, const Arch& a, bool blocks_only) {
  TrainingSettings s = settings;
  FineTune& f = s.finetune;
  if (!f.node) return s;
  const ConfigNode& node = *f.node;
  using Freeze = FineTune::Freeze;
  if (f.freeze == Freeze::first_layers && f.first_layers > a.layers)
    node.at("freeze").at("first_layers").fail_expected(fmt::format("at most the {} layers of {}", a.layers, name));
  if (blocks_only && (f.freeze == Freeze::embeddings || f.freeze == Freeze::all_but_head))
    node.at("freeze").fail(fmt::format("model {} with blocks_only: true has no {}", name,
                                       f.freeze == Freeze::embeddings ? "embeddings" : "head"));
  if (!f.lora()) return s;
  std::vector<std::string> allowed;
  if (a.fused_qkv)
    allowed = {"qkv"};
  else
    allowed = {"q", "k", "v"};
  allowed.push_back("o");
  if (a.swiglu && s.fused.swiglu)
    allowed.push_back("gate_up");
  else if (a.swiglu)
    allowed.insert(allowed.end(), {"gate", "up"});
  else
    allowed.push_back("up");
  allowed.push_back("down");
  if (f.lora_targets.empty()) {
    f.lora_targets = a.fused_qkv ? std::vector<std::string>{"qkv"} : std::vector<std::string>{"q", "v"};
    return s;
  }
  const std::vector<ConfigNode> items = node.at("lora").at("targets").items();
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string& t = f.lora_targets[i];
    if (std::find(allowed.begin(), allowed.end(), t) != allowed.end()) continue;
    std::string why;
    if (a.fused_qkv && (t == "q" || t == "k" || t == "v"))
      why = ": q, k and v are one projection there (qkv)";
    else if (t == "qkv")
      why = ": q, k and v are projections of their own there";
    else if (a.swiglu && s.fused.swiglu && (t == "gate" || t == "up"))
      why = ": fused_swiglu makes gate and up one projection (gate_up)";
    else if (t == "gate_up" && a.swiglu)
      why = ": gate_up is the projection of fused_swiglu: true";
    else if (t == "gate" || t == "gate_up")
      why = ": its MLP is up, GeLU, down";
    items[i].fail(fmt::format("expected a projection of {} ({}), got '{}'{}", name, fmt::join(allowed, ", "), t, why));
  }
  return s;
}

// The vocabulary rows this rank's embedding and LM head hold: Megatron pads the vocabulary
// to a multiple of 128 x tp (make-vocab-size-divisible-by 128) and splits it evenly; with
// tp 1 the table is as the model defines it.
std::int64_t vocab_rows(std::int64_t vocab, std::int64_t t) {
  if (t == 1) return vocab;
  const std::int64_t unit = 128 * t;
  return (vocab + unit - 1) / unit * 128;
}

// After a vocabulary-parallel embedding: the partial rows summed over the ranks.
Value embedded(ModelBuilder& m, const std::string& name, Value x) {
  return m.settings().tp == 1 ? x : m.tp_reduce(name + ".tp_reduce", x);
}
// Into the blocks: under sequence parallelism this rank's tokens only.
Value into_blocks(ModelBuilder& m, const std::string& name, Value x) {
  return m.settings().sp ? m.sp_split(name + ".sp_split", x) : x;
}

void check_heads(const Params& params, std::int64_t hidden, std::int64_t heads) {
  if (hidden % heads != 0)
    params.get("heads").fail_expected(fmt::format("a divisor of hidden ({})", hidden));
}

std::string details(std::int64_t seq, Impl impl, const TrainingSettings& s) {
  const char* form = impl == Impl::fused ? "fused" : impl == Impl::selective ? "selective-recompute" : "materialized";
  return fmt::format("seq {}, {} attention; {}", seq, form, s.summary());
}

// ---------------------------------------------------------------------------------------
// BERT: BertModel (embeddings, encoder, pooler) with a classification head, or
// BertForMaskedLM (no pooler; an MLM head whose decoder is tied to the word embeddings).

Trace generate_bert(const Params& params) {
  const bool large = params.get("variant").as_choice({"base", "large"}) == "large";
  const std::int64_t seq = params.get("seq_len").as_int_in(1, 512);
  const bool mlm = params.get("head").as_choice({"classifier", "mlm"}) == "mlm";
  const std::int64_t labels_n = params.get("num_labels").as_int_in(1, 1'000'000);
  const Impl impl = read_impl(params);
  const double p = params.get("dropout").as_fraction();
  const TrainingSettings settings = read_training_settings(params);
  BertShape b;
  if (large) {
    b.layers = 24;
    b.hidden = 1024;
    b.heads = 16;
    b.ffn = 4096;
  }
  return bert_encoder(params, large ? "bert-large" : "bert-base", b, mlm, labels_n, seq, impl, p,
                      settings);
}

}  // namespace

Trace bert_encoder(const Params& params, const std::string& name, const BertShape& b, bool mlm,
                   std::int64_t labels_n, std::int64_t seq, Impl impl, double p,
                   const TrainingSettings& settings) {
  const Arch a{.layers = b.layers, .hidden = b.hidden, .heads = b.heads, .ffn = b.ffn,
               .vocab = b.vocab, .pre_norm = false, .rms_norm = false, .swiglu = false,
               .bias = true, .causal = false, .fused_qkv = false, .dropout = p};
  check_cp(params, a, seq, impl, false);
  check_tp(params, a, seq, settings.batch);
  const std::int64_t t = settings.tp;
  ModelBuilder m(tuned(settings, name, a, false));
  m.set_trainable(m.settings().finetune.trains_embeddings());
  const std::int64_t n = settings.batch, tokens = n * seq;
  const Value ids = m.input("input_ids", {tokens}, DType::int64);
  const Value types = m.input("token_type_ids", {tokens}, DType::int64);
  const Value positions = m.input("position_ids", {seq}, DType::int64);
  const Value labels = m.input("labels", {mlm ? tokens : n}, DType::int64);

  Value x = m.embedding("bert.embeddings.word_embeddings", ids, vocab_rows(a.vocab, t), a.hidden);
  x = embedded(m, "bert.embeddings.word_embeddings", x);
  const Value pos =
      m.embedding("bert.embeddings.position_embeddings", positions, b.max_positions, a.hidden);
  const Value type =
      m.embedding("bert.embeddings.token_type_embeddings", types, b.type_vocab, a.hidden);
  x = m.add("bert.embeddings.add_token_types", x, type);
  x = m.add_broadcast("bert.embeddings.add_positions", x, pos);
  x = m.layer_norm("bert.embeddings.LayerNorm", x);
  x = into_blocks(m, "bert.embeddings", x);
  x = drop(m, "bert.embeddings.dropout", x, p);
  x = blocks({m, a, kBertNames, n, impl, nullptr}, "bert.encoder.layer.", x);
  m.set_trainable(m.settings().finetune.trains_head());  // the pooler and the classifier, or the MLM head
  m.set_fp8_linears(false);  // the heads stay in the compute type
  // The heads read every token (the classifier replicated on each rank).
  if (settings.sp) x = m.sp_gather("bert.encoder.sp_gather", x);

  if (mlm) {
    x = m.linear("cls.predictions.transform.dense", x, a.hidden, true);
    x = m.gelu("cls.predictions.transform.transform_act_fn", x);
    x = m.layer_norm("cls.predictions.transform.LayerNorm", x);
    if (t > 1) x = m.tp_copy("cls.predictions.decoder.tp_copy", x);
    x = m.tied_linear("cls.predictions.decoder", x, "bert.embeddings.word_embeddings.weight",
                      true);
  } else {
    // The pooler reads each sample's first token: a view that keeps the last hidden state.
    x = m.select("bert.pooler.first_token", x, {n, a.hidden});
    x = m.tanh("bert.pooler.activation", m.linear("bert.pooler.dense", x, a.hidden, true));
    x = drop(m, "dropout", x, p);
    x = m.linear("classifier", x, labels_n, true);
  }
  m.cross_entropy(x, labels);

  return m.finish(name, fmt::format("{} ({} head, {})", name, mlm ? "mlm" : "classifier",
                                    details(seq, impl, m.settings())),
                  seq);
}

namespace {

// ---------------------------------------------------------------------------------------
// GPT-2 and GPT-3-style decoders: GPT2LMHeadModel (learned positions, pre-norm, fused QKV,
// tanh-GELU MLP of 4 x hidden, final LayerNorm, LM head tied to the token embeddings).

Trace gpt_decoder(const std::string& name, const Arch& a, std::int64_t max_positions,
                  std::int64_t seq, Impl impl, bool blocks_only, const TrainingSettings& settings,
                  bool tie_embeddings = true) {
  ModelBuilder m(tuned(settings, name, a, blocks_only));
  m.set_trainable(m.settings().finetune.trains_embeddings());
  const std::int64_t t = settings.tp;
  // This rank's positions of each sequence: 1/cp of them under context parallelism.
  const std::int64_t n = settings.batch, positions_here = seq / settings.cp, tokens = n * positions_here;
  const Stack stack{m, a, kGptNames, n, impl, nullptr};
  const std::string description = fmt::format(
      "{} ({} layers x {}, {} heads{}, {}{}{})", name, a.layers, a.hidden, a.heads,
      a.kv_heads > 0 && a.kv_heads != a.heads ? fmt::format(" ({} kv)", a.kv_heads) : std::string(),
      details(seq, impl, m.settings()), blocks_only ? ", blocks only" : "",
      !blocks_only && !tie_embeddings ? ", untied head" : "");
  if (blocks_only) {
    // The blocks alone, between a hidden-state input and an MSE loss.
    // Under sequence parallelism this rank's tokens.
    const std::int64_t rows = settings.sp ? tokens / t : tokens;
    Value x = m.input("hidden_states", {rows, a.hidden}, settings.dtype);
    const Value target = m.input("target", {rows, a.hidden}, settings.dtype);
    x = blocks(stack, "transformer.h.", x);
    m.mse_loss(x, target);
    return m.finish(name, description, seq);
  }
  const Value ids = m.input("input_ids", {tokens}, DType::int64);
  const Value positions = m.input("position_ids", {positions_here}, DType::int64);
  // Shifted by one position in the labels, as Hugging Face's loss does now.
  const Value labels = m.input("labels", {tokens}, DType::int64);
  Value x = m.embedding("transformer.wte", ids, vocab_rows(a.vocab, t), a.hidden);
  x = embedded(m, "transformer.wte", x);
  const Value pos = m.embedding("transformer.wpe", positions, max_positions, a.hidden);
  x = m.add_broadcast("transformer.add_positions", x, pos);
  x = into_blocks(m, "transformer", x);
  x = drop(m, "transformer.drop", x, a.dropout);
  x = blocks(stack, "transformer.h.", x);
  x = m.layer_norm("transformer.ln_f", x);
  m.set_trainable(m.settings().finetune.trains_head());
  // The head: a column-parallel linear over the vocabulary (Megatron's vocab-parallel
  // cross-entropy adds three all-reduces of one number per token, not modelled).
  x = tp_enter(m, "lm_head", x);
  x = tie_embeddings ? m.tied_linear("lm_head", x, "transformer.wte.weight", false)
                     : m.linear("lm_head", x, vocab_rows(a.vocab, t), false);
  m.cross_entropy(x, labels);
  return m.finish(name, description, seq);
}

Arch gpt_arch(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t vocab,
              double dropout) {
  return {.layers = layers, .hidden = hidden, .heads = heads, .ffn = 4 * hidden, .vocab = vocab,
          .pre_norm = true, .rms_norm = false, .swiglu = false, .bias = true, .causal = true,
          .fused_qkv = true, .dropout = dropout};
}

}  // namespace

Trace gpt2_decoder(const Params& params, const std::string& name, const Gpt2Shape& g,
                   std::int64_t seq, Impl impl, double dropout, const TrainingSettings& settings) {
  Arch a = gpt_arch(g.layers, g.hidden, g.heads, g.vocab, dropout);
  a.ffn = g.ffn;
  check_cp(params, a, seq, impl, true);
  check_tp(params, a, seq / settings.cp, settings.batch);
  return gpt_decoder(name, a, g.max_positions, seq, impl, false, settings);
}

namespace {

Trace generate_gpt2(const Params& params) {
  struct Variant {
    const char* variant;
    const char* name;
    std::int64_t layers, hidden, heads;
  };
  static constexpr Variant kVariants[] = {{"small", "gpt2", 12, 768, 12},
                                          {"medium", "gpt2-medium", 24, 1024, 16},
                                          {"large", "gpt2-large", 36, 1280, 20},
                                          {"xl", "gpt2-xl", 48, 1600, 25}};
  const std::string variant = params.get("variant").as_choice({"small", "medium", "large", "xl"});
  const std::int64_t seq = params.get("seq_len").as_int_in(1, 1024);
  const Impl impl = read_impl(params);
  const double p = params.get("dropout").as_fraction();
  const TrainingSettings settings = read_training_settings(params);
  Variant v = kVariants[0];
  for (const Variant& candidate : kVariants)
    if (variant == candidate.variant) v = candidate;
  const Arch a = gpt_arch(v.layers, v.hidden, v.heads, 50257, p);
  check_cp(params, a, seq, impl, true);
  check_tp(params, a, seq / settings.cp, settings.batch);
  return gpt_decoder(v.name, a, 1024, seq, impl, false, settings);
}

Trace generate_gpt(const Params& params) {
  const std::int64_t layers = params.get("layers").as_int_in(1, 10'000);
  const std::int64_t hidden = params.get("hidden").as_int_in(1, 1 << 20);
  const std::int64_t heads = params.get("heads").as_int_in(1, 1 << 20);
  check_heads(params, hidden, heads);
  const std::int64_t vocab = params.get("vocab").as_int_in(1, 1 << 24);
  const std::int64_t max_positions = params.get("max_positions").as_int_in(1, 1 << 24);
  const ConfigNode seq_node = params.get("seq_len");
  const std::int64_t seq = seq_node.as_int_in(1, 1 << 24);
  if (seq > max_positions)
    seq_node.fail_expected(fmt::format("at most max_positions ({})", max_positions));
  const bool blocks_only = params.get("blocks_only").as_bool();
  const Impl impl = read_impl(params);
  const double p = params.get("dropout").as_fraction();
  const ConfigNode kv = params.get("num_kv_heads");
  const std::int64_t kv_heads = kv.is_scalar() && kv.as_string() == "heads" ? heads : kv.as_int_in(1, 1 << 20);
  if (heads % kv_heads != 0) kv.fail_expected(fmt::format("a divisor of heads ({})", heads));
  const bool tie = params.get("tie_embeddings").as_bool();
  if (blocks_only && params.given("tie_embeddings"))
    params.get("tie_embeddings").fail("applies only without blocks_only (the blocks alone have no head)");
  const TrainingSettings settings = read_training_settings(params);
  Arch a = gpt_arch(layers, hidden, heads, vocab, p);
  a.kv_heads = kv_heads;
  check_cp(params, a, seq, impl, true);
  check_tp(params, a, seq / settings.cp, settings.batch);
  return gpt_decoder("gpt", a, max_positions, seq, impl, blocks_only, settings, tie);
}

// ---------------------------------------------------------------------------------------
// Llama: LlamaForCausalLM, and the models built like it: Mistral (grouped-query attention),
// Mixtral (a mixture of experts in every layer), Qwen2 (biases on q, k and v), DeepSeekMoE
// (fine-grained and shared experts after dense first layers).

}  // namespace

void check_decoder_size(const DecoderShape& d, const TrainingSettings& settings, const ConfigNode& at) {
  const FusedKernels& fused = settings.fused;
  // Counted from the generator (ops per layer of the step, forward to optimizer): a dense
  // layer 44, a mixture of experts 35 and 20 per routed expert, 15 for its shared experts;
  // a fused SwiGLU 6 fewer in each, an unfused norm 14 more (two per layer and the final
  // one), an unfused softmax 8 more per layer.
  const double swiglu = fused.swiglu ? -6 : 0, norm = fused.layer_norm ? 0 : 14, softmax = fused.softmax ? 0 : 8;
  const auto layers = static_cast<double>(d.layers);
  const double moe_layers = d.experts > 0 ? static_cast<double>(d.layers - d.first_dense) : 0;
  double ops = 13 + norm + layers * (2 * norm + softmax) + (44 + swiglu) * (layers - moe_layers) +
                     moe_layers * (35 + (20 + swiglu) * static_cast<double>(d.experts) +
                                   (d.shared_experts > 0 ? 15 + swiglu : 0));
  // A LoRA adapter: A, B, the scale and the add, their backward and a sum into the input's
  // gradient, two optimizer steps; two more ops with its dropout. The MLP's targets are on
  // every expert's projections too.
  const FineTune& tune = settings.finetune;
  if (tune.lora()) {
    const double per_adapter = tune.lora_dropout > 0 ? 12 : 10;
    double attention = 0, mlp = 0;
    for (const std::string& t : tune.lora_targets)
      (t == "q" || t == "k" || t == "v" || t == "o" ? attention : mlp) += 1;
    if (tune.lora_targets.empty()) attention = 2;  // q and v
    const double mlps = (layers - moe_layers) + moe_layers * static_cast<double>(d.experts + (d.shared_experts > 0));
    ops += per_adapter * (attention * layers + mlp * mlps);
  }
  if (!over_op_limit(ops)) return;
  if (d.experts > 0)
    at.fail(fmt::format("{} experts in each of {} layers make {}", d.experts, d.layers, ops_over_limit(ops)));
  at.fail(fmt::format("{} layers make {}", d.layers, ops_over_limit(ops)));
}

Trace llama_decoder(const Params& params, const std::string& name, const DecoderShape& d,
                    std::int64_t seq, ModelBuilder::AttentionImpl impl, double dropout,
                    const TrainingSettings& settings) {
  Moe moe{.experts = d.experts, .top_k = d.top_k, .capacity_factor = d.capacity_factor,
          .ffn = d.moe_ffn, .shared_experts = d.shared_experts, .first_dense = d.first_dense};
  Arch a{.layers = d.layers, .hidden = d.hidden, .heads = d.heads, .ffn = d.ffn, .vocab = d.vocab,
         .pre_norm = true, .rms_norm = true, .swiglu = true, .bias = false, .causal = true,
         .fused_qkv = false, .dropout = dropout, .kv_heads = d.kv_heads, .qkv_bias = d.qkv_bias};
  if (d.experts > 0) a.moe = &moe;
  check_cp(params, a, seq, impl, true);
  check_tp(params, a, seq / settings.cp, settings.batch);

  ModelBuilder m(tuned(settings, name, a, false));
  m.set_trainable(m.settings().finetune.trains_embeddings());
  // This rank's positions of each sequence: 1/cp of them under context parallelism.
  const std::int64_t n = settings.batch, positions_here = seq / settings.cp, tokens = n * positions_here,
                     head_dim = d.hidden / d.heads;
  const Value ids = m.input("input_ids", {tokens}, DType::int64);
  const Value labels = m.input("labels", {tokens}, DType::int64);
  // LlamaRotaryEmbedding's tables, computed once per step without gradient; taken as given.
  const Value rotary[2] = {m.input("rotary.cos", {positions_here, head_dim}, settings.dtype),
                           m.input("rotary.sin", {positions_here, head_dim}, settings.dtype)};
  const std::int64_t t = settings.tp;
  Value x = m.embedding("model.embed_tokens", ids, vocab_rows(d.vocab, t), d.hidden);
  x = embedded(m, "model.embed_tokens", x);
  x = into_blocks(m, "model", x);
  x = blocks({m, a, kLlamaNames, n, impl, rotary}, "model.layers.", x);
  x = m.rms_norm("model.norm", x);
  m.set_trainable(m.settings().finetune.trains_head());
  m.set_fp8_linears(false);
  x = tp_enter(m, "lm_head", x);
  x = d.tie_embeddings ? m.tied_linear("lm_head", x, "model.embed_tokens.weight", false)
                       : m.linear("lm_head", x, vocab_rows(d.vocab, t), false);
  m.cross_entropy(x, labels);
  std::string shape = fmt::format("{} layers x {}, {} heads", d.layers, d.hidden, d.heads);
  if (d.kv_heads != d.heads) shape += fmt::format(" ({} kv)", d.kv_heads);
  shape += fmt::format(", ffn {}", d.ffn);
  if (d.experts > 0)
    shape += fmt::format(", {} experts top-{}{}", d.experts, d.top_k,
                         d.shared_experts > 0
                             ? fmt::format(" + {} shared, expert ffn {}", d.shared_experts, d.moe_ffn)
                             : std::string());
  return m.finish(name, fmt::format("{} ({}, {})", name, shape, details(seq, impl, m.settings())), seq);
}

namespace {

Trace generate_llama(const Params& params) {
  DecoderShape d;
  d.layers = params.get("layers").as_int_in(1, 10'000);
  d.hidden = params.get("hidden").as_int_in(1, 1 << 20);
  d.heads = params.get("heads").as_int_in(1, 1 << 20);
  check_heads(params, d.hidden, d.heads);
  if ((d.hidden / d.heads) % 2 != 0)
    params.get("heads").fail_expected(
        fmt::format("a divisor of hidden ({}) that leaves an even head size (rotary)", d.hidden));
  const ConfigNode kv = params.get("num_kv_heads");
  d.kv_heads = kv.is_scalar() && kv.as_string() == "heads" ? d.heads : kv.as_int_in(1, 1 << 20);
  if (d.heads % d.kv_heads != 0)
    kv.fail_expected(fmt::format("a divisor of heads ({})", d.heads));
  d.ffn = params.get("intermediate").as_int_in(1, 1 << 24);
  d.vocab = params.get("vocab").as_int_in(1, 1 << 24);
  d.qkv_bias = params.get("qkv_bias").as_bool();
  d.tie_embeddings = params.get("tie_embeddings").as_bool();
  d.experts = params.get("num_experts").as_int_in(0, 1 << 16);
  const ConfigNode top_k = params.get("top_k");
  d.top_k = top_k.as_int_in(1, 1 << 16);
  if (d.experts > 0 && d.top_k > d.experts)
    top_k.fail_expected(fmt::format("at most num_experts ({})", d.experts));
  const ConfigNode factor = params.get("capacity_factor");
  d.capacity_factor = factor.as_double();
  if (!(d.capacity_factor > 0 && d.capacity_factor <= 1e6))
    factor.fail_expected("a number above 0 (1: perfectly balanced experts)");
  d.shared_experts = params.get("num_shared_experts").as_int_in(0, 1 << 16);
  const ConfigNode moe_ffn = params.get("moe_intermediate");
  d.moe_ffn = moe_ffn.is_scalar() && moe_ffn.as_string() == "intermediate"
                  ? d.ffn
                  : moe_ffn.as_int_in(1, 1 << 24);
  d.first_dense = params.get("first_dense_layers").as_int_in(0, d.layers);
  if (d.experts == 0)
    for (const char* key : {"top_k", "capacity_factor", "num_shared_experts", "moe_intermediate",
                            "first_dense_layers"})
      if (params.given(key)) params.get(key).fail("applies only with num_experts above 0");
  const std::int64_t seq = params.get("seq_len").as_int_in(1, 1 << 24);
  const Impl impl = read_impl(params);
  const double p = params.get("dropout").as_fraction();
  const TrainingSettings settings = read_training_settings(params);
  if (settings.ep > 1 && d.experts % settings.ep != 0)
    params.extra("parallel")->find("ep")->fail_expected(fmt::format("a divisor of the {} experts", d.experts));
  check_decoder_size(d, settings, params.get(d.experts > 0 ? "num_experts" : "layers"));
  return llama_decoder(params, "llama", d, seq, impl, p, settings);
}

}  // namespace

ModelInfo bert_model() {
  return {"bert",
          "BERT encoder (base, large) as Hugging Face builds it, classifier or MLM head",
          with_common({{"variant", "base (12 layers x 768, 12 heads) or large (24 x 1024, 16)",
                        "base"},
                       {"head", "classifier (pooler, then num_labels outputs) or mlm (masked "
                                "LM over every token, decoder tied to the word embeddings)",
                        "classifier"},
                       {"num_labels", "outputs of the classifier head", "2"}},
                      FusedFor::gelu_layer_norm, "128", "materialized", "0.1"),
          generate_bert};
}

ModelInfo gpt2_model() {
  return {"gpt2", "GPT-2 (small, medium, large, xl) as Hugging Face builds it, LM loss",
          with_common({{"variant", "small (12 x 768), medium (24 x 1024), large (36 x 1280) or "
                                   "xl (48 x 1600)",
                        "small"}},
                      FusedFor::gelu_layer_norm, "1024", "materialized", "0.1"),
          generate_gpt2};
}

ModelInfo gpt_model() {
  return {"gpt",
          "GPT-3-style decoder by layers, hidden and heads (GPT-2 blocks, MLP of 4 x hidden)",
          with_common({{"layers", "transformer blocks", "12"},
                       {"hidden", "model width", "768"},
                       {"heads", "attention heads; must divide hidden", "12"},
                       {"vocab", "vocabulary size", "50257"},
                       {"max_positions", "learned position embeddings (the longest sequence)",
                        "2048"},
                       {"num_kv_heads", "k/v heads, a divisor of heads: grouped-query attention in the fused "
                                        "qkv projection (Megatron's --num-query-groups); `heads`: as many as heads",
                        "heads"},
                       {"tie_embeddings", "the LM head reuses the token embeddings (false: Megatron's "
                                          "--untie-embeddings-and-output-weights)",
                        "true"},
                       {"blocks_only", "true: the blocks alone, hidden states in and an MSE "
                                       "loss out (no embeddings, final norm or LM head)",
                        "false"}},
                      FusedFor::gelu_layer_norm, "2048", "materialized", "0.1"),
          generate_gpt};
}

ModelInfo llama_model() {
  return {"llama", "Llama decoder (RMSNorm, SwiGLU, rotary, no biases), LM loss; grouped-query attention, "
                   "mixtures of experts; 7B by default",
          with_common({{"layers", "decoder layers", "32"},
                       {"hidden", "model width", "4096"},
                       {"heads", "attention heads; must divide hidden, leaving an even head size",
                        "32"},
                       {"num_kv_heads", "k/v heads, a divisor of heads: grouped-query "
                                        "attention (1: multi-query); `heads`: as many as heads",
                        "heads"},
                       {"intermediate", "SwiGLU width (of the dense layers, with experts)",
                        "11008"},
                       {"vocab", "vocabulary size", "32000"},
                       {"qkv_bias", "biases on q, k and v (Qwen2)", "false"},
                       {"tie_embeddings", "the LM head reuses the token embeddings", "false"},
                       {"num_experts", "routed experts in place of each MLP (Mixtral: "
                                       "block_sparse_moe); 0: dense",
                        "0"},
                       {"top_k", "experts each token is routed to", "2"},
                       {"capacity_factor",
                        "tokens per expert = ceil(capacity_factor x tokens x top_k / "
                        "num_experts); 1: perfectly balanced",
                        "1.0"},
                       {"num_shared_experts", "experts every token goes through (DeepSeekMoE's "
                                              "layout and names when above 0)",
                        "0"},
                       {"moe_intermediate", "each expert's SwiGLU width; `intermediate`: the "
                                            "dense width",
                        "intermediate"},
                       {"first_dense_layers", "leading layers that keep the dense MLP", "0"}},
                      FusedFor::swiglu_rms_norm, "2048", "materialized", "0"),
          generate_llama};
}

}  // namespace memsim
