#pragma once
// The transformer families' builders by shape, for the generators in transformer.cpp and
// for Hugging Face's config.json (hf_config.cpp), so that both build the same model.
// `params` locates errors about the workload's parallel: section (tensor parallelism's
// divisibility).
#include <cstdint>
#include <string>
#include <vector>

#include "sim/workload/models/builder.h"

namespace memsim {

/// Which layers a family's fused-kernel options (FusedKernels) act on: LayerNorm and a GeLU
/// MLP (bert, gpt2, gpt), RMSNorm and SwiGLU (llama), or either (hf).
enum class FusedFor : std::uint8_t { gelu_layer_norm, swiglu_rms_norm, either };
/// The declarations of fused_layer_norm, fused_softmax and fused_bias_gelu or fused_swiglu,
/// each saying which framework its default and its alternative follow (read by
/// read_training_settings).
std::vector<ParamSpec> fused_kernel_specs(FusedFor family);
/// fused_softmax given with attention_impl fused: an InputError at the key (FlashAttention
/// has no softmax kernel of its own).
void check_fused_softmax(const Params& params, ModelBuilder::AttentionImpl impl);

/// A Llama-style decoder (LlamaForCausalLM and the models built like it).
struct DecoderShape {
  std::int64_t layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000;
  bool qkv_bias = false;        // biases on q, k and v alone (Qwen2)
  bool tie_embeddings = false;  // the LM head reuses model.embed_tokens.weight
  // A mixture of experts in place of the MLP when experts > 0 (see moe_mlp).
  std::int64_t experts = 0, top_k = 2;
  double capacity_factor = 1.0;
  std::int64_t moe_ffn = 11008, shared_experts = 0, first_dense = 0;
};
Trace llama_decoder(const Params& params, const std::string& name, const DecoderShape& shape, std::int64_t seq,
                    ModelBuilder::AttentionImpl impl, double dropout,
                    const TrainingSettings& settings);
/// About how many ops llama_decoder makes of `shape` (forward, backward and optimizer) with
/// the settings' fused kernels and LoRA adapters, from its layers and each mixture of
/// experts' experts, before anything is built. `at` is the key that multiplies them
/// (num_experts with experts, else layers): an InputError located there when they are more
/// than the op limit (sim/core/limits.h).
void check_decoder_size(const DecoderShape& shape, const TrainingSettings& settings, const ConfigNode& at);

/// GPT2LMHeadModel: learned positions, fused QKV, GELU MLP of `ffn`, tied LM head.
struct Gpt2Shape {
  std::int64_t layers = 12, hidden = 768, heads = 12, ffn = 3072, vocab = 50257,
               max_positions = 1024;
};
Trace gpt2_decoder(const Params& params, const std::string& name, const Gpt2Shape& shape, std::int64_t seq,
                   ModelBuilder::AttentionImpl impl, double dropout,
                   const TrainingSettings& settings);

/// BertModel (embeddings, post-norm encoder, pooler) with a classifier of `num_labels` on
/// the pooler, or BertForMaskedLM (`mlm`: no pooler, an MLM head tied to the embeddings).
struct BertShape {
  std::int64_t layers = 12, hidden = 768, heads = 12, ffn = 3072, vocab = 30522,
               max_positions = 512, type_vocab = 2;
};
Trace bert_encoder(const Params& params, const std::string& name, const BertShape& shape, bool mlm,
                   std::int64_t num_labels, std::int64_t seq, ModelBuilder::AttentionImpl impl,
                   double dropout, const TrainingSettings& settings);

}  // namespace memsim
