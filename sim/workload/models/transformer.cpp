// Transformers as Hugging Face builds them, with its parameter names, so that parameter
// counts match the published ones: bert (encoder, post-norm), gpt2 and a GPT-3-style gpt
// (decoder, pre-norm, tied LM head), and llama (pre-norm RMSNorm, SwiGLU, rotary, no biases,
// untied head). One block builder serves all four; the families differ in an Arch and in
// module names.
//
// Left out, as the layer comments in seq_layers.cpp say: eager PyTorch's contiguous copies
// at the head split and merge (views here), the separate scale and mask ops around the
// softmax (fused here), HF's eager RMSNorm and tanh-GELU (fused kernels here), the attention
// mask tensor, and autocast's fp32 copies (softmax, loss) under mixed precision.
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

using Impl = ModelBuilder::AttentionImpl;

struct Arch {
  std::int64_t layers, hidden, heads, ffn, vocab;
  bool pre_norm;   // norm before each sublayer (GPT, Llama) or after the residual (BERT)
  bool rms_norm;   // RMSNorm (Llama) or LayerNorm
  bool swiglu;     // down(silu(gate(x)) * up(x)) (Llama) or down(gelu(up(x)))
  bool bias;       // biases in the projections
  bool causal;
  bool fused_qkv;  // one projection split in three (GPT-2's c_attn) or three projections
  double dropout;  // on the attention probabilities and after each sublayer
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

// One block: attention and MLP sublayers with residuals, norms pre or post. Under tensor
// parallelism (tp ranks) this rank holds heads/tp of the attention (q, k, v split by
// output features, the output projection by input features) and ffn/tp of the MLP, as
// Megatron-LM splits them; the residual stream is whole (or, with sp, 1/tp of the tokens).
Value block(const Stack& s, const std::string& p, Value x) {
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
  if (a.fused_qkv) {
    const Value qkv = m.linear(p + n.q, h, 3 * a.hidden / t, a.bias);
    const std::vector<Value> parts = m.split(p + n.q + ".split", qkv, 3);
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    q = m.linear(p + n.q, h, a.hidden / t, a.bias);
    k = m.linear(p + n.k, h, a.hidden / t, a.bias);
    v = m.linear(p + n.v, h, a.hidden / t, a.bias);
  }
  if (s.rotary != nullptr) {
    q = m.rotary(p + n.attn + ".rotary_q", q, s.rotary[0], s.rotary[1]);
    k = m.rotary(p + n.attn + ".rotary_k", k, s.rotary[0], s.rotary[1]);
  }
  h = m.attention(p + n.attn, q, k, v, s.batch, a.heads / t, a.causal, s.impl, a.dropout);
  h = m.linear(p + n.out, h, a.hidden, a.bias);
  h = tp_leave(m, p + n.out, h);
  if (n.attn_dropout != nullptr) h = drop(m, p + n.attn_dropout, h, a.dropout);
  x = m.add(p + n.attn_residual, h, x);
  if (!a.pre_norm) x = norm(n.norm_attn, x);

  h = a.pre_norm ? norm(n.norm_mlp, x) : x;
  h = tp_enter(m, p + "mlp", h);
  if (a.swiglu) {
    const Value gate = m.silu(p + n.act, m.linear(p + n.gate, h, a.ffn / t, a.bias));
    h = m.mul(p + "mlp.mul", gate, m.linear(p + n.up, h, a.ffn / t, a.bias));
  } else {
    h = m.gelu(p + n.act, m.linear(p + n.up, h, a.ffn / t, a.bias));
  }
  h = m.linear(p + n.down, h, a.hidden, a.bias);
  h = tp_leave(m, p + n.down, h);
  if (n.mlp_dropout != nullptr) h = drop(m, p + n.mlp_dropout, h, a.dropout);
  x = m.add(p + n.mlp_residual, h, x);
  if (!a.pre_norm) x = norm(n.norm_mlp, x);
  return x;
}

Value blocks(const Stack& s, const std::string& prefix, Value x) {
  for (std::int64_t i = 0; i < s.arch.layers; ++i)
    x = block(s, fmt::format("{}{}.", prefix, i), x);
  return x;
}

// ---------------------------------------------------------------------------------------
// Parameters the families share

std::vector<ParamSpec> with_common(std::vector<ParamSpec> specs, const char* seq_default,
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
  specs = with_training_params(std::move(specs));
  return specs;
}

Impl read_impl(const Params& params) {
  const std::string impl = params.get("attention_impl").as_choice({"materialized", "fused", "selective"});
  return impl == "fused" ? Impl::fused : impl == "selective" ? Impl::selective : Impl::materialized;
}

// Tensor parallelism's divisibility, checked where the user set it (parallel.tp).
void check_tp(const Params& params, const Arch& a, std::int64_t seq, std::int64_t batch) {
  const std::int64_t t = read_training_settings(params).tp;
  if (t == 1) return;
  const ConfigNode tp = *params.extra("parallel")->find("tp");
  if (a.heads % t != 0) tp.fail_expected(fmt::format("a divisor of the {} attention heads", a.heads));
  if (a.ffn % t != 0) tp.fail_expected(fmt::format("a divisor of the MLP width {}", a.ffn));
  if (read_training_settings(params).sp && (seq * batch) % t != 0)
    tp.fail_expected(fmt::format("a divisor of the {} tokens per micro-batch (sequence parallelism splits them)",
                                 seq * batch));
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
  Arch a{.layers = 12, .hidden = 768, .heads = 12, .ffn = 3072, .vocab = 30522,
         .pre_norm = false, .rms_norm = false, .swiglu = false, .bias = true, .causal = false,
         .fused_qkv = false, .dropout = p};
  if (large) {
    a.layers = 24;
    a.hidden = 1024;
    a.heads = 16;
    a.ffn = 4096;
  }

  check_tp(params, a, seq, settings.batch);
  const std::int64_t t = settings.tp;
  ModelBuilder m(settings);
  const std::int64_t n = settings.batch, tokens = n * seq;
  const Value ids = m.input("input_ids", {tokens}, DType::int64);
  const Value types = m.input("token_type_ids", {tokens}, DType::int64);
  const Value positions = m.input("position_ids", {seq}, DType::int64);
  const Value labels = m.input("labels", {mlm ? tokens : n}, DType::int64);

  Value x = m.embedding("bert.embeddings.word_embeddings", ids, vocab_rows(a.vocab, t), a.hidden);
  x = embedded(m, "bert.embeddings.word_embeddings", x);
  const Value pos = m.embedding("bert.embeddings.position_embeddings", positions, 512, a.hidden);
  const Value type = m.embedding("bert.embeddings.token_type_embeddings", types, 2, a.hidden);
  x = m.add("bert.embeddings.add_token_types", x, type);
  x = m.add_broadcast("bert.embeddings.add_positions", x, pos);
  x = m.layer_norm("bert.embeddings.LayerNorm", x);
  x = into_blocks(m, "bert.embeddings", x);
  x = drop(m, "bert.embeddings.dropout", x, p);
  x = blocks({m, a, kBertNames, n, impl, nullptr}, "bert.encoder.layer.", x);
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

  const std::string name = large ? "bert-large" : "bert-base";
  return m.finish(name, fmt::format("{} ({} head, {})", name, mlm ? "mlm" : "classifier",
                                    details(seq, impl, settings)));
}

// ---------------------------------------------------------------------------------------
// GPT-2 and GPT-3-style decoders: GPT2LMHeadModel (learned positions, pre-norm, fused QKV,
// tanh-GELU MLP of 4 x hidden, final LayerNorm, LM head tied to the token embeddings).

Trace gpt_decoder(const std::string& name, const Arch& a, std::int64_t max_positions,
                  std::int64_t seq, Impl impl, bool blocks_only, const TrainingSettings& settings) {
  ModelBuilder m(settings);
  const std::int64_t t = settings.tp;
  const std::int64_t n = settings.batch, tokens = n * seq;
  const Stack stack{m, a, kGptNames, n, impl, nullptr};
  const std::string description = fmt::format("{} ({} layers x {}, {} heads, {}{})", name, a.layers,
                                              a.hidden, a.heads, details(seq, impl, settings),
                                              blocks_only ? ", blocks only" : "");
  if (blocks_only) {
    // The blocks alone, between a hidden-state input and an MSE loss.
    // Under sequence parallelism this rank's tokens.
    const std::int64_t rows = settings.sp ? tokens / t : tokens;
    Value x = m.input("hidden_states", {rows, a.hidden}, settings.dtype);
    const Value target = m.input("target", {rows, a.hidden}, settings.dtype);
    x = blocks(stack, "transformer.h.", x);
    m.mse_loss(x, target);
    return m.finish(name, description);
  }
  const Value ids = m.input("input_ids", {tokens}, DType::int64);
  const Value positions = m.input("position_ids", {seq}, DType::int64);
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
  // The head: a column-parallel linear over the vocabulary (Megatron's vocab-parallel
  // cross-entropy adds three all-reduces of one number per token, not modelled).
  x = tp_enter(m, "lm_head", x);
  x = m.tied_linear("lm_head", x, "transformer.wte.weight", false);
  m.cross_entropy(x, labels);
  return m.finish(name, description);
}

Arch gpt_arch(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t vocab,
              double dropout) {
  return {.layers = layers, .hidden = hidden, .heads = heads, .ffn = 4 * hidden, .vocab = vocab,
          .pre_norm = true, .rms_norm = false, .swiglu = false, .bias = true, .causal = true,
          .fused_qkv = true, .dropout = dropout};
}

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
  check_tp(params, a, seq, settings.batch);
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
  const TrainingSettings settings = read_training_settings(params);
  const Arch a = gpt_arch(layers, hidden, heads, vocab, p);
  check_tp(params, a, seq, settings.batch);
  return gpt_decoder("gpt", a, max_positions, seq, impl, blocks_only, settings);
}

// ---------------------------------------------------------------------------------------
// Llama: LlamaForCausalLM.

Trace generate_llama(const Params& params) {
  const std::int64_t layers = params.get("layers").as_int_in(1, 10'000);
  const std::int64_t hidden = params.get("hidden").as_int_in(1, 1 << 20);
  const std::int64_t heads = params.get("heads").as_int_in(1, 1 << 20);
  check_heads(params, hidden, heads);
  if ((hidden / heads) % 2 != 0)
    params.get("heads").fail_expected(
        fmt::format("a divisor of hidden ({}) that leaves an even head size (rotary)", hidden));
  const std::int64_t ffn = params.get("intermediate").as_int_in(1, 1 << 24);
  const std::int64_t vocab = params.get("vocab").as_int_in(1, 1 << 24);
  const std::int64_t seq = params.get("seq_len").as_int_in(1, 1 << 24);
  const Impl impl = read_impl(params);
  const double p = params.get("dropout").as_fraction();
  const TrainingSettings settings = read_training_settings(params);
  const Arch a{.layers = layers, .hidden = hidden, .heads = heads, .ffn = ffn, .vocab = vocab,
               .pre_norm = true, .rms_norm = true, .swiglu = true, .bias = false, .causal = true,
               .fused_qkv = false, .dropout = p};
  check_tp(params, a, seq, settings.batch);

  ModelBuilder m(settings);
  const std::int64_t n = settings.batch, tokens = n * seq, head_dim = hidden / heads;
  const Value ids = m.input("input_ids", {tokens}, DType::int64);
  const Value labels = m.input("labels", {tokens}, DType::int64);
  // LlamaRotaryEmbedding's tables, computed once per step without gradient; taken as given.
  const Value rotary[2] = {m.input("rotary.cos", {seq, head_dim}, settings.dtype),
                           m.input("rotary.sin", {seq, head_dim}, settings.dtype)};
  const std::int64_t t = settings.tp;
  Value x = m.embedding("model.embed_tokens", ids, vocab_rows(vocab, t), hidden);
  x = embedded(m, "model.embed_tokens", x);
  x = into_blocks(m, "model", x);
  x = blocks({m, a, kLlamaNames, n, impl, rotary}, "model.layers.", x);
  x = m.rms_norm("model.norm", x);
  x = tp_enter(m, "lm_head", x);
  x = m.linear("lm_head", x, vocab_rows(vocab, t), false);
  m.cross_entropy(x, labels);
  return m.finish("llama", fmt::format("llama ({} layers x {}, {} heads, ffn {}, {})", layers,
                                       hidden, heads, ffn, details(seq, impl, settings)));
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
                      "128", "materialized", "0.1"),
          generate_bert};
}

ModelInfo gpt2_model() {
  return {"gpt2", "GPT-2 (small, medium, large, xl) as Hugging Face builds it, LM loss",
          with_common({{"variant", "small (12 x 768), medium (24 x 1024), large (36 x 1280) or "
                                   "xl (48 x 1600)",
                        "small"}},
                      "1024", "materialized", "0.1"),
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
                       {"blocks_only", "true: the blocks alone, hidden states in and an MSE "
                                       "loss out (no embeddings, final norm or LM head)",
                        "false"}},
                      "2048", "materialized", "0.1"),
          generate_gpt};
}

ModelInfo llama_model() {
  return {"llama", "Llama decoder (RMSNorm, SwiGLU, rotary, no biases), LM loss; 7B by default",
          with_common({{"layers", "decoder layers", "32"},
                       {"hidden", "model width", "4096"},
                       {"heads", "attention heads; must divide hidden, leaving an even head size",
                        "32"},
                       {"intermediate", "SwiGLU width", "11008"},
                       {"vocab", "vocabulary size", "32000"}},
                      "2048", "materialized", "0"),
          generate_llama};
}

}  // namespace memsim
