// `model: hf`: a Hugging Face config.json the user already has, turned into the same model
// the native family builds (transformer.h). The training settings (batch, seq_len, dtype,
// optimizer, ...) come from the workload beside `config`; the file gives the shapes. Unlike
// the native models (fp32, momentum: the papers' CNN training), they default to what a
// fine-tuning run with Hugging Face's Trainer uses: bf16 mixed precision and AdamW.
//
// The JSON is read by the project's one reader (ConfigNode; JSON is YAML), so a bad field is
// reported as "config.json:LINE:COL: key: expected ..., got ...". Read, per architecture:
//   LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM:
//     hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size;
//     num_key_value_heads (default: heads), tie_word_embeddings (default false), head_dim
//     (must be hidden / heads when given), attention_bias and mlp_bias (must be false when
//     given; Qwen2 has biases on q, k and v by design); Mixtral: num_local_experts,
//     num_experts_per_tok; attention_dropout (default 0) for the dropout.
//   DeepseekForCausalLM (DeepSeekMoE, its remote code): the Llama fields, then
//     n_routed_experts, n_shared_experts, num_experts_per_tok, moe_intermediate_size,
//     first_k_dense_replace (default 0), moe_layer_freq (must be 1 when given); scoring_func
//     and norm_topk_prob change no tensor's size.
//   GPT2LMHeadModel: n_embd, n_layer, n_head, vocab_size, n_positions, n_inner (null: 4 x
//     n_embd), tie_word_embeddings (must be true when given), resid_pdrop (default 0.1; the
//     native gpt2 has one dropout for embd_pdrop, attn_pdrop and resid_pdrop).
//   BertModel (with a classifier of num_labels on the pooler, so that it trains),
//   BertForSequenceClassification, BertForMaskedLM: hidden_size, num_hidden_layers,
//     num_attention_heads, intermediate_size, vocab_size, max_position_embeddings,
//     type_vocab_size, hidden_dropout_prob (default 0.1; also for the attention
//     probabilities, attention_probs_dropout_prob being the same in the published models).
// Every other field is ignored, because it does not change memory: rope_theta and
// rope_scaling (the rotary tables keep their size), rms_norm_eps and layer_norm_eps,
// sliding_window and use_sliding_window (FlashAttention skips blocks outside the window but
// saves the same tensors; eager attention masks a full scores tensor), max_position_embeddings
// of the rotary decoders, hidden_act (silu and gelu save the same), initializer_range,
// the token ids, torch_dtype (the workload's dtype rules), use_cache, router_aux_loss_coef
// and output_router_logits, transformers_version, model_type.
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/workload/models/models.h"
#include "sim/workload/models/transformer.h"

namespace memsim {
namespace {

namespace fs = std::filesystem;
using Impl = ModelBuilder::AttentionImpl;

const std::vector<std::string> kArchitectures{
    "LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM",
    "DeepseekForCausalLM", "GPT2LMHeadModel", "BertModel", "BertForSequenceClassification",
    "BertForMaskedLM"};

constexpr std::int64_t kMostWidth = 1 << 20, kMostVocab = 1 << 24;

// A field the architecture's mapping cannot do without.
std::int64_t need(const ConfigNode& cfg, const std::string& arch, const char* key,
                  std::int64_t hi) {
  if (!cfg.has(key)) cfg.fail(fmt::format("missing key '{}', which {} needs", key, arch));
  return cfg.at(key).as_int_in(1, hi);
}

// A field that may be absent or null (Hugging Face's default), else an integer.
std::int64_t or_default(const ConfigNode& cfg, const char* key, std::int64_t fallback,
                        std::int64_t hi) {
  const auto v = cfg.find(key);
  return !v || v->is_null() ? fallback : v->as_int_in(1, hi);
}

bool flag(const ConfigNode& cfg, const char* key, bool fallback) {
  const auto v = cfg.find(key);
  return !v || v->is_null() ? fallback : v->as_bool();
}

double probability(const ConfigNode& cfg, const char* key, double fallback) {
  const auto v = cfg.find(key);
  return !v || v->is_null() ? fallback : v->as_fraction();
}

// A field whose other values change memory in a way no native family builds.
void require_flag(const ConfigNode& cfg, const char* key, bool wanted, const char* why) {
  const auto v = cfg.find(key);
  if (v && !v->is_null() && v->as_bool() != wanted)
    v->fail_expected(fmt::format("{} ({})", wanted ? "true" : "false", why));
}

void check_divides(const ConfigNode& cfg, const char* heads_key, std::int64_t hidden,
                   std::int64_t heads) {
  if (hidden % heads != 0)
    cfg.at(heads_key).fail_expected(fmt::format("a divisor of the hidden size ({})", hidden));
}

// The trace's name: the config's model_type ("mistral", "qwen2", ...), else the family's.
std::string model_type(const ConfigNode& cfg, const char* family) {
  const auto v = cfg.find("model_type");
  return v && v->is_scalar() ? v->as_string() : family;
}

bool file_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

fs::path config_path(const ConfigNode& node) {
  fs::path p(node.as_string());
  if (p.is_relative() && node.file() != "-" && file_exists(node.file()))
    p = (fs::path(node.file()).parent_path() / p).lexically_normal();
  return p;
}

Trace llama_like(const std::string& arch, const ConfigNode& cfg, const Params& params,
                 std::int64_t seq, Impl impl, const TrainingSettings& settings) {
  DecoderShape d;
  d.hidden = need(cfg, arch, "hidden_size", kMostWidth);
  d.ffn = need(cfg, arch, "intermediate_size", kMostVocab);
  d.layers = need(cfg, arch, "num_hidden_layers", 10'000);
  d.heads = need(cfg, arch, "num_attention_heads", kMostWidth);
  check_divides(cfg, "num_attention_heads", d.hidden, d.heads);
  if ((d.hidden / d.heads) % 2 != 0)
    cfg.at("num_attention_heads").fail_expected("heads of an even size (rotary)");
  d.kv_heads = or_default(cfg, "num_key_value_heads", d.heads, kMostWidth);
  if (d.heads % d.kv_heads != 0)
    cfg.at("num_key_value_heads")
        .fail_expected(fmt::format("a divisor of num_attention_heads ({})", d.heads));
  d.vocab = need(cfg, arch, "vocab_size", kMostVocab);
  d.tie_embeddings = flag(cfg, "tie_word_embeddings", false);
  if (const auto head_dim = cfg.find("head_dim"); head_dim && !head_dim->is_null()) {
    if (head_dim->as_int_in(1, kMostWidth) != d.hidden / d.heads)
      head_dim->fail_expected(fmt::format("hidden_size / num_attention_heads ({}); other head "
                                          "sizes are not modelled",
                                          d.hidden / d.heads));
  }
  require_flag(cfg, "attention_bias", false, "biases on the attention projections are not modelled");
  require_flag(cfg, "mlp_bias", false, "biases on the MLP are not modelled");
  d.qkv_bias = arch == "Qwen2ForCausalLM";
  const bool moe = arch == "MixtralForCausalLM" || arch == "DeepseekForCausalLM";
  if (arch == "MixtralForCausalLM") {
    d.experts = need(cfg, arch, "num_local_experts", 1 << 16);
    d.top_k = need(cfg, arch, "num_experts_per_tok", d.experts);
    d.moe_ffn = d.ffn;
  }
  if (arch == "DeepseekForCausalLM") {
    d.experts = need(cfg, arch, "n_routed_experts", 1 << 16);
    d.top_k = need(cfg, arch, "num_experts_per_tok", d.experts);
    d.moe_ffn = need(cfg, arch, "moe_intermediate_size", kMostVocab);
    d.shared_experts = need(cfg, arch, "n_shared_experts", 1 << 16);
    const auto first = cfg.find("first_k_dense_replace");
    d.first_dense = !first || first->is_null() ? 0 : first->as_int_in(0, d.layers);
    if (or_default(cfg, "moe_layer_freq", 1, d.layers) != 1)
      cfg.at("moe_layer_freq").fail_expected("1 (experts in every layer after the dense ones)");
  }
  if (moe) {
    const ConfigNode factor = params.get("capacity_factor");
    d.capacity_factor = factor.as_double();
    if (!(d.capacity_factor > 0 && d.capacity_factor <= 1e6))
      factor.fail_expected("a number above 0 (1: perfectly balanced experts)");
  }
  check_decoder_size(d, settings,
                     cfg.at(arch == "MixtralForCausalLM"    ? "num_local_experts"
                            : arch == "DeepseekForCausalLM" ? "n_routed_experts"
                                                            : "num_hidden_layers"));
  const double p = params.given("dropout") ? params.get("dropout").as_fraction()
                                           : probability(cfg, "attention_dropout", 0);
  return llama_decoder(params, model_type(cfg, "llama"), d, seq, impl, p, settings);
}

Trace gpt2(const ConfigNode& cfg, const Params& params, std::int64_t seq, Impl impl,
           const TrainingSettings& settings) {
  const std::string arch = "GPT2LMHeadModel";
  Gpt2Shape g;
  g.hidden = need(cfg, arch, "n_embd", kMostWidth);
  g.layers = need(cfg, arch, "n_layer", 10'000);
  g.heads = need(cfg, arch, "n_head", kMostWidth);
  check_divides(cfg, "n_head", g.hidden, g.heads);
  g.vocab = need(cfg, arch, "vocab_size", kMostVocab);
  g.max_positions = need(cfg, arch, "n_positions", kMostVocab);
  g.ffn = or_default(cfg, "n_inner", 4 * g.hidden, kMostVocab);
  require_flag(cfg, "tie_word_embeddings", true, "GPT-2's LM head is tied to wte");
  if (seq > g.max_positions)
    params.get("seq_len").fail_expected(fmt::format("at most n_positions ({})", g.max_positions));
  const double p = params.given("dropout") ? params.get("dropout").as_fraction()
                                           : probability(cfg, "resid_pdrop", 0.1);
  return gpt2_decoder(params, model_type(cfg, "gpt2"), g, seq, impl, p, settings);
}

Trace bert(const std::string& arch, const ConfigNode& cfg, const Params& params,
           std::int64_t seq, Impl impl, const TrainingSettings& settings) {
  BertShape b;
  b.hidden = need(cfg, arch, "hidden_size", kMostWidth);
  b.layers = need(cfg, arch, "num_hidden_layers", 10'000);
  b.heads = need(cfg, arch, "num_attention_heads", kMostWidth);
  check_divides(cfg, "num_attention_heads", b.hidden, b.heads);
  b.ffn = need(cfg, arch, "intermediate_size", kMostVocab);
  b.vocab = need(cfg, arch, "vocab_size", kMostVocab);
  b.max_positions = need(cfg, arch, "max_position_embeddings", kMostVocab);
  b.type_vocab = need(cfg, arch, "type_vocab_size", kMostVocab);
  if (seq > b.max_positions)
    params.get("seq_len").fail_expected(
        fmt::format("at most max_position_embeddings ({})", b.max_positions));
  const double p = params.given("dropout") ? params.get("dropout").as_fraction()
                                           : probability(cfg, "hidden_dropout_prob", 0.1);
  const std::int64_t labels = params.get("num_labels").as_int_in(1, 1'000'000);
  return bert_encoder(params, model_type(cfg, "bert"), b, arch == "BertForMaskedLM", labels, seq, impl,
                      p, settings);
}

Trace generate_hf(const Params& params) {
  const ConfigNode path_node = params.get("config");
  const fs::path path = config_path(path_node);
  if (!file_exists(path))
    path_node.fail(fmt::format("no such file '{}' (a path is relative to the workload file)",
                               path.string()));
  const ConfigNode cfg = ConfigNode::parse_file(path.string());
  if (!cfg.is_map()) cfg.fail_expected("a JSON object (a Hugging Face config.json)");
  const ConfigNode archs = cfg.at("architectures");
  if (!archs.is_sequence() || archs.items().size() != 1)
    archs.fail_expected("a list of one architecture name");
  const std::string arch = archs.items()[0].as_choice(kArchitectures);
  const std::int64_t seq = params.get("seq_len").as_int_in(1, 1 << 24);
  const std::string form =
      params.get("attention_impl").as_choice({"materialized", "fused", "selective"});
  const Impl impl = form == "fused"       ? Impl::fused
                    : form == "selective" ? Impl::selective
                                          : Impl::materialized;
  check_fused_softmax(params, impl);
  const TrainingSettings settings = read_training_settings(params);
  // Keys of one family are errors with another, never ignored.
  const bool llama_family = arch != "GPT2LMHeadModel" && arch.rfind("Bert", 0) != 0;
  if (!llama_family && params.given("fused_swiglu"))
    params.get("fused_swiglu").fail(fmt::format("applies only to the Llama family's SwiGLU, not {}", arch));
  if (llama_family && params.given("fused_dropout_add"))
    params.get("fused_dropout_add").fail(fmt::format("applies only to the dropouts of GPT-2 and BERT, not {}", arch));
  if (llama_family && params.given("fused_bias_gelu"))
    params.get("fused_bias_gelu").fail(fmt::format("applies only to the GeLU MLP of GPT-2 and BERT, not {}", arch));
  if (arch != "MixtralForCausalLM" && arch != "DeepseekForCausalLM" &&
      params.given("capacity_factor"))
    params.get("capacity_factor").fail(fmt::format("applies only to a mixture of experts, not {}", arch));
  if (arch.rfind("Bert", 0) != 0 && params.given("num_labels"))
    params.get("num_labels").fail(fmt::format("applies only to BERT's classifier, not {}", arch));
  if (arch == "GPT2LMHeadModel") return gpt2(cfg, params, seq, impl, settings);
  if (arch.rfind("Bert", 0) == 0) return bert(arch, cfg, params, seq, impl, settings);
  return llama_like(arch, cfg, params, seq, impl, settings);
}

// Its own parameters, the fused-kernel options of either family, the training settings.
std::vector<ParamSpec> hf_specs() {
  std::vector<ParamSpec> specs{
      {"config", "path of the config.json, relative to the workload file", std::nullopt},
      {"seq_len", "tokens per sample", "2048"},
      {"attention_impl",
       "fused (FlashAttention; what Hugging Face's default sdpa runs in training), "
       "materialized (eager) or selective (materialized, the seq x seq tensors "
       "recomputed in backward)",
       "fused"},
      {"dropout", "overrides the config's dropout (attention_dropout, resid_pdrop, "
                  "hidden_dropout_prob)",
       "the config's"},
      {"capacity_factor", "Mixtral, DeepSeekMoE: tokens per expert = ceil(capacity_factor x tokens "
                          "x top_k / experts); 1: perfectly balanced",
       "1.0"},
      {"num_labels", "BERT without an LM head: outputs of the classifier on the pooler", "2"}};
  for (ParamSpec& spec : fused_kernel_specs(FusedFor::either)) specs.push_back(std::move(spec));
  specs.push_back(finetune_param_spec());
  specs = with_training_params(std::move(specs));
  // Fine-tuning as Hugging Face's Trainer does it with `bf16=True`: autocast to bf16 over
  // fp32 master weights, and its default optimizer, AdamW (adamw_torch). A key given in the
  // workload wins.
  for (ParamSpec& spec : specs) {
    if (spec.name == "dtype") {
      spec.default_value = "bf16";
      spec.description += " (hf: bf16, as Trainer(bf16=True))";
    } else if (spec.name == "mixed_precision") {
      spec.default_value = "true";
      spec.description += " (hf: true, as Trainer(bf16=True): fp32 master weights; false with dtype: fp32)";
    } else if (spec.name == "optimizer") {
      spec.default_value = "adamw";
      spec.description += " (hf: adamw, Trainer's default optim adamw_torch)";
    }
  }
  return specs;
}

}  // namespace

ModelInfo hf_model() {
  return {"hf",
          "a Hugging Face config.json (Llama, Mistral, Mixtral, Qwen2, DeepSeekMoE, GPT-2, "
          "BERT), built as the native family builds it",
          hf_specs(), generate_hf};
}

}  // namespace memsim
