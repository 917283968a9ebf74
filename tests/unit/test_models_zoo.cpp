// Today's LLM architectures and recipes: parameter counts of the presets and of hand-written
// Hugging Face config.json files (tests/data/hf) against the published ones, grouped-query
// attention, mixtures of experts, and the bytes per parameter of fp32 main gradients,
// low-precision optimizer state and FP8 training.
#include <gtest/gtest.h>

#include <string>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/workload/analysis.h"
#include "sim/workload/trace.h"
#include "sim/workload/workload.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

Trace from_file(const std::string& relative) {
  return generate_workload(ConfigNode::parse_file(std::string(MEMSIM_SOURCE_DIR) + "/" + relative));
}

std::string error_from_file(const std::string& relative) {
  try {
    from_file(relative);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::uint64_t persistent_bytes(const Trace& t) {
  std::uint64_t sum = 0;
  for (const Buffer& b : t.buffers)
    if (b.persistent) sum += b.bytes;
  return sum;
}

// Bytes of forward activations still live when the forward pass ends.
bool saved_by_forward(const Trace& t, const std::string& buffer) {
  const Liveness l = compute_liveness(t);
  OpId end = 0;
  for (const Op& op : t.ops)
    if (op.phase == Phase::forward) end = op.id;
  const Buffer& b = buffer_named(t, buffer);
  return b.producer <= end && l.last_use[b.id] != kNoOp && l.last_use[b.id] > end;
}

const std::string kTiny =
    "model: llama\nlayers: 1\nhidden: 64\nheads: 8\nintermediate: 96\nvocab: 100\nseq_len: 16\n"
    "batch: 1\n";

struct Published {
  const char* preset;
  const char* config;
  std::uint64_t parameters;
};

TEST(ZooModels, ParameterCountsMatchThePublishedOnes) {
  for (const Published& p : {Published{"llama3-8b", "llama3-8b", 8'030'261'248u},
                             Published{"llama3-70b", "llama3-70b", 70'553'706'496u},
                             Published{"mistral-7b", "mistral-7b", 7'241'732'096u},
                             Published{"mixtral-8x7b", "mixtral-8x7b", 46'702'792'704u}}) {
    EXPECT_EQ(from_file(std::string("workloads/") + p.preset + ".yaml").parameters, p.parameters)
        << p.preset;
    EXPECT_EQ(from_file(std::string("tests/data/hf/") + p.config + ".yaml").parameters,
              p.parameters)
        << p.config;
  }
  // DeepSeekMoE 16B's published 16.4B; GPT-3's 175B.
  EXPECT_EQ(from_file("workloads/deepseek-moe-16b.yaml").parameters, 16'375'728'128u);
  EXPECT_EQ(from_file("tests/data/hf/deepseek-moe-16b.yaml").parameters, 16'375'728'128u);
  EXPECT_EQ(from_file("workloads/gpt3-175b.yaml").parameters, 174'604'259'328u);
  // Llama 3.1 405B's model card: 405,853,388,800.
  EXPECT_EQ(from_file("workloads/llama3-405b.yaml").parameters, 405'853'388'800u);
}

TEST(ZooModels, HuggingFaceConfigsOfTheOtherFamilies) {
  // Qwen2-0.5B: biases on q, k and v, tied embeddings.
  const Trace qwen = from_file("tests/data/hf/qwen2-0.5b.yaml");
  EXPECT_EQ(qwen.parameters, 494'032'768u);
  EXPECT_NE(find_buffer(qwen, "model.layers.0.self_attn.k_proj.bias"), nullptr);
  EXPECT_EQ(find_buffer(qwen, "model.layers.0.self_attn.o_proj.bias"), nullptr);
  EXPECT_EQ(find_buffer(qwen, "lm_head.weight"), nullptr);
  // As the native gpt2 and bert (mlm head) build them.
  EXPECT_EQ(from_file("tests/data/hf/gpt2.yaml").parameters, 124'439'808u);
  EXPECT_EQ(from_file("tests/data/hf/bert-base-uncased.yaml").parameters, 109'514'298u);
}

TEST(ZooModels, HuggingFaceReaderErrorsNameTheFileAndKey) {
  const std::string dir = std::string(MEMSIM_SOURCE_DIR) + "/tests/data/hf/bad/";
  EXPECT_EQ(error_from_file("tests/data/hf/bad/falcon.yaml"),
            dir + "falcon.json:2:21: architectures[0]: expected one of LlamaForCausalLM, "
                  "MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, DeepseekForCausalLM, "
                  "GPT2LMHeadModel, BertModel, BertForSequenceClassification, BertForMaskedLM, "
                  "got "
                  "'FalconForCausalLM'");
  EXPECT_EQ(error_from_file("tests/data/hf/bad/kv_heads.yaml"),
            dir + "kv_heads.json:8:26: num_key_value_heads: expected an integer, got "
                  "'eight'");
}

// ---------------------------------------------------------------------------------------
// Grouped-query attention

TEST(ZooGqa, KeyAndValueProjectionsHaveKvHeadsWidth) {
  const Trace t = generate(kTiny + "num_kv_heads: 2\nattention_impl: fused\n");
  // head size 8: k and v are 2 x 8 = 16 wide.
  EXPECT_EQ(buffer_named(t, "model.layers.0.self_attn.k_proj.weight").bytes, 64u * 16 * 4);
  EXPECT_EQ(buffer_named(t, "model.layers.0.self_attn.q_proj.weight").bytes, 64u * 64 * 4);
  // FlashAttention reads k and v at their width (no repeat) and saves them so.
  const Op& fa = op_named(t, "model.layers.0.self_attn");
  EXPECT_EQ(buffer_named(t, "model.layers.0.self_attn.grad_k").bytes, 16u * 16 * 4);
  EXPECT_EQ(buffer_named(t, "model.layers.0.self_attn.grad_q").bytes, 16u * 64 * 4);
  // The FLOPs are those of 8 query heads: 4 b s^2 h, halved by the causal mask.
  EXPECT_DOUBLE_EQ(fa.flops, 4.0 * 16 * 16 * 64 * 0.5);
  const Trace mha = generate(kTiny + "attention_impl: fused\n");
  EXPECT_DOUBLE_EQ(op_named(mha, "model.layers.0.self_attn").flops, fa.flops);
  EXPECT_EQ(mha.parameters - t.parameters, 2u * 64 * (64 - 16));
}

TEST(ZooGqa, MaterializedAttentionRepeatsKeysAndValues) {
  const Trace t = generate(kTiny + "num_kv_heads: 1\n");
  // Multi-query: repeat_kv copies k and v to q's width; the matmuls save the copies.
  const Op& repeat = op_named(t, "model.layers.0.self_attn.repeat_k");
  EXPECT_EQ(repeat.kind, "copy");
  EXPECT_EQ(buffer_named(t, "model.layers.0.self_attn.repeat_k.out").bytes, 16u * 64 * 4);
  EXPECT_TRUE(saved_by_forward(t, "model.layers.0.self_attn.repeat_k.out"));
  EXPECT_TRUE(saved_by_forward(t, "model.layers.0.self_attn.repeat_v.out"));
  // The repeat's gradient is summed back to one head.
  EXPECT_EQ(op_named(t, "model.layers.0.self_attn.repeat_k.backward").kind, "sum");
  EXPECT_EQ(buffer_named(t, "model.layers.0.self_attn.repeat_k.grad_input").bytes, 16u * 8 * 4);
  EXPECT_NO_THROW(validate(t, "x"));
}

TEST(ZooGqa, KvHeadsMustDivideHeads) {
  EXPECT_EQ(error_of(kTiny + "num_kv_heads: 3\n"),
            "t.yaml:9:15: num_kv_heads: expected a divisor of heads (8), got '3'");
}

// ---------------------------------------------------------------------------------------
// Mixture of experts

const std::string kMoe = kTiny + "num_experts: 4\ntop_k: 2\n";

TEST(ZooMoe, ParametersPerExpertAndRouter) {
  const Trace dense = generate(kTiny);
  const Trace moe = generate(kMoe);
  // 4 experts of 3 x 64 x 96 and a 64 x 4 router in place of one 3 x 64 x 96 MLP.
  EXPECT_EQ(moe.parameters - dense.parameters, 3u * 64 * 96 * 3 + 64 * 4);
  EXPECT_EQ(buffer_named(moe, "model.layers.0.block_sparse_moe.gate.weight").bytes, 64u * 4 * 4);
  EXPECT_NE(find_buffer(moe, "model.layers.0.block_sparse_moe.experts.3.w2.weight"), nullptr);
  EXPECT_EQ(find_buffer(moe, "model.layers.0.block_sparse_moe.gate.bias"), nullptr);
  EXPECT_NO_THROW(validate(moe, "x"));
}

TEST(ZooMoe, CapacityAndSavedActivations) {
  const Trace t = generate(kMoe);
  const std::string p = "model.layers.0.block_sparse_moe.";
  // 16 tokens x top 2 over 4 experts: 8 tokens each, 64 wide.
  EXPECT_EQ(buffer_named(t, p + "experts.0.dispatch.out").bytes, 8u * 64 * 4);
  EXPECT_EQ(buffer_named(t, p + "experts.0.w1.out").bytes, 8u * 96 * 4);
  // The router keeps fp32 probabilities and int64 picks for its backward.
  EXPECT_EQ(buffer_named(t, p + "router.probs").bytes, 16u * 4 * 4);
  EXPECT_EQ(buffer_named(t, p + "router.indices").bytes, 16u * 2 * 8);
  for (const char* saved : {"router.probs", "router.indices", "router.weights",
                            "experts.2.dispatch.out", "experts.2.w1.out", "experts.2.act_fn.out",
                            "experts.2.w3.out", "experts.2.mul.out", "experts.2.w2.out"})
    EXPECT_TRUE(saved_by_forward(t, p + saved)) << saved;
  // A capacity factor of 1.5 pads each expert to ceil(1.5 x 8) = 12 tokens; 4 is all 16.
  EXPECT_EQ(buffer_named(generate(kMoe + "capacity_factor: 1.5\n"), p + "experts.0.dispatch.out")
                .bytes,
            12u * 64 * 4);
  EXPECT_EQ(buffer_named(generate(kMoe + "capacity_factor: 4\n"), p + "experts.0.dispatch.out")
                .bytes,
            16u * 64 * 4);
  // Each expert's FLOPs are over its own tokens.
  EXPECT_DOUBLE_EQ(op_named(t, p + "experts.1.w1").flops, 2.0 * 8 * 64 * 96);
}

TEST(ZooMoe, ExpertKeysNeedExperts) {
  EXPECT_EQ(error_of(kTiny + "top_k: 2\n"),
            "t.yaml:9:8: top_k: applies only with num_experts above 0");
  EXPECT_EQ(error_of(kTiny + "num_experts: 4\ntop_k: 5\n"),
            "t.yaml:10:8: top_k: expected at most num_experts (4), got '5'");
}

TEST(ZooMoe, SavedActivationsByHand) {
  // Against the dense layer, the MLP's saves change from its input and four s x f
  // intermediates to: the same input, fp32 router probabilities (s x E), int64 picks and
  // the routing weights (s x k each), and per routed token the gathered input and the
  // expert's output (h each) plus its four intermediates (f each). fp32, s 16, h 64, f 96,
  // E 4, k 2.
  const std::uint64_t s = 16, h = 64, f = 96, e = 4, k = 2;
  const std::uint64_t dense = s * h * 4 + 4 * s * f * 4;
  const std::uint64_t moe = s * h * 4 + s * e * 4 + s * k * 8 + s * k * 4 + s * k * (2 * h + 4 * f) * 4;
  EXPECT_EQ(saved_activation_bytes(generate(kMoe)) - saved_activation_bytes(generate(kTiny)),
            moe - dense);
}

TEST(ZooMoe, SharedExpertsAndDenseFirstLayers) {
  const Trace t = generate(
      "model: llama\nlayers: 2\nhidden: 64\nheads: 8\nintermediate: 96\nvocab: 100\nseq_len: "
      "16\nbatch: 1\nnum_experts: 8\ntop_k: 2\nnum_shared_experts: 2\nmoe_intermediate: 24\n"
      "first_dense_layers: 1\n");
  EXPECT_NE(find_buffer(t, "model.layers.0.mlp.gate_proj.weight"), nullptr);
  EXPECT_EQ(find_buffer(t, "model.layers.0.mlp.gate.weight"), nullptr);
  EXPECT_EQ(buffer_named(t, "model.layers.1.mlp.experts.7.down_proj.weight").bytes, 24u * 64 * 4);
  // Two shared experts as one SwiGLU of twice the expert width.
  EXPECT_EQ(buffer_named(t, "model.layers.1.mlp.shared_experts.up_proj.weight").bytes,
            48u * 64 * 4);
  // layer 1: router 64 x 8, 8 experts and the shared pair, 3 x 64 x 24 each.
  const Trace dense = generate(
      "model: llama\nlayers: 2\nhidden: 64\nheads: 8\nintermediate: 96\nvocab: 100\nseq_len: "
      "16\nbatch: 1\n");
  EXPECT_EQ(t.parameters - dense.parameters, 64u * 8 + 10u * 3 * 64 * 24 - 3u * 64 * 96);
  EXPECT_NO_THROW(validate(t, "x"));
}

TEST(ZooModels, TensorParallelRanksSplitKvHeadsAndExperts) {
  const std::string yaml = kMoe + "num_kv_heads: 2\nparallel:\n  tp: 2\n";
  const Trace t = generate_workload(ConfigNode::parse_text(yaml, "w.yaml"));
  // k and v: 2 heads of 8 over 2 ranks; each expert's SwiGLU 96 / 2 wide; the router whole.
  EXPECT_EQ(buffer_named(t, "model.layers.0.self_attn.k_proj.weight").bytes, 64u * 8 * 4);
  EXPECT_EQ(buffer_named(t, "model.layers.0.block_sparse_moe.experts.1.w1.weight").bytes,
            64u * 48 * 4);
  EXPECT_EQ(buffer_named(t, "model.layers.0.block_sparse_moe.gate.weight").bytes, 64u * 4 * 4);
  EXPECT_NO_THROW(validate(t, "x"));
  try {
    generate_workload(ConfigNode::parse_text(kTiny + "num_kv_heads: 2\nparallel:\n  tp: 4\n", "w.yaml"));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "w.yaml:11:7: parallel.tp: expected a divisor of the 2 k/v heads, got '4'");
  }
}

// ---------------------------------------------------------------------------------------
// Recipes: bytes per parameter of the model state

const std::string kMixed = kTiny + "dtype: bf16\nmixed_precision: true\noptimizer: adamw\n";

TEST(ZooRecipes, Fp32MainGradsKeep18BytesPerParameter) {
  const Trace plain = generate(kMixed);
  // bf16 weight 2 + fp32 master 4 + two fp32 moments 8; the bf16 .grad is freed by its step.
  EXPECT_EQ(persistent_bytes(plain), 14 * plain.parameters);
  const Trace t = generate(kMixed + "main_grads: fp32\n");
  EXPECT_EQ(persistent_bytes(t), 18 * t.parameters);
  const Buffer& main = buffer_named(t, "model.layers.0.mlp.up_proj.weight.main_grad");
  EXPECT_EQ(main.category, Category::gradient);
  EXPECT_EQ(main.bytes, 64u * 96 * 4);
  // The bf16 .grad lives from its backward op to the add into main_grad right after it.
  const Liveness l = compute_liveness(t);
  const Buffer& grad = buffer_named(t, "model.layers.0.mlp.up_proj.weight.grad");
  EXPECT_EQ(t.ops[l.last_use[grad.id]].name, "model.layers.0.mlp.up_proj.weight.main_grad.accumulate");
  EXPECT_EQ(l.last_use[grad.id], grad.producer + 1);
  // The step reads main_grad.
  const Op& step = op_named(t, "model.layers.0.mlp.up_proj.weight.step");
  EXPECT_EQ(step.inputs, std::vector<BufferId>{main.id});
  // A tied weight's two gradients (LM head, then embedding) each go into one main_grad.
  const Trace tied = generate(
      "model: gpt\nlayers: 1\nhidden: 64\nheads: 4\nvocab: 100\nmax_positions: 16\n"
      "seq_len: 16\nbatch: 1\ndropout: 0\ndtype: bf16\nmixed_precision: true\n"
      "optimizer: adamw\nmain_grads: fp32\n");
  EXPECT_EQ(persistent_bytes(tied), 18 * tied.parameters);
  EXPECT_NO_THROW(validate(tied, "x"));
  int wte_adds = 0;
  for (const Op& op : tied.ops) wte_adds += op.name == "transformer.wte.weight.main_grad.accumulate";
  EXPECT_EQ(wte_adds, 2);
  EXPECT_EQ(error_of(kTiny + "main_grads: fp32\n"),
            "t.yaml:9:13: main_grads: fp32 main grads need mixed_precision: true");
}

TEST(ZooRecipes, LowPrecisionOptimizerState) {
  const Trace bf16 = generate(kMixed + "optimizer_state_dtype: bf16\n");
  EXPECT_EQ(persistent_bytes(bf16), 10 * bf16.parameters);  // 2 + master 4 + 2 x 2

  // 8-bit Adam: a byte per element and an fp32 absmax per block of 2048, for tensors of at
  // least 4096 elements; the smaller ones keep fp32 state.
  const Trace q = generate(kMixed + "optimizer_state_dtype: int8\n");
  const std::uint64_t e = 64 * 96;  // 6144 elements: 3 blocks
  EXPECT_EQ(buffer_named(q, "model.layers.0.mlp.up_proj.weight.exp_avg").bytes, e + 3 * 4);
  EXPECT_EQ(buffer_named(q, "model.layers.0.mlp.up_proj.weight.exp_avg_sq").bytes, e + 3 * 4);
  EXPECT_EQ(buffer_named(q, "model.layers.0.input_layernorm.weight.exp_avg").bytes, 64u * 4);
  std::uint64_t expected = 0;
  for (const Buffer& b : q.buffers) {
    if (b.category != Category::weight || b.name.find(".master") != std::string::npos) continue;
    const std::uint64_t n = b.bytes / 2;
    const std::uint64_t state = n >= 4096 ? n + (n + 2047) / 2048 * 4 : 4 * n;
    expected += 2 * n + 4 * n + 2 * state;
  }
  EXPECT_EQ(persistent_bytes(q), expected);
}

TEST(ZooRecipes, Fp8LinearsKeepFp8WeightsAndSavedInputs) {
  const Trace base = generate(kMixed);
  const Trace t = generate(kMixed + "fp8: true\n");
  const std::string p = "model.layers.0.";
  // An fp8 copy of each block linear's weight (1 byte per element) and its scaling state:
  // five tensors of an amax history of 1024 fp32 plus scale and inverse scale.
  EXPECT_EQ(buffer_named(t, p + "mlp.up_proj.weight.fp8").bytes, 64u * 96);
  EXPECT_EQ(buffer_named(t, p + "mlp.up_proj.fp8_meta").bytes, 5u * 1026 * 4);
  EXPECT_EQ(find_buffer(t, "lm_head.weight.fp8"), nullptr);
  std::uint64_t linear_weights = 0, linears = 0;
  for (const char* name : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                           "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
    linear_weights += buffer_named(t, p + name + ".weight").bytes / 2;
    ++linears;
  }
  EXPECT_EQ(persistent_bytes(t) - persistent_bytes(base), linear_weights + linears * 5 * 1026 * 4);
  // q, k and v share one fp8 cast of their input, which their backward reads instead of it.
  const Buffer& cast = buffer_named(t, p + "self_attn.q_proj.input_fp8");
  EXPECT_EQ(cast.bytes, 16u * 64);
  const Op& kb = op_named(t, p + "self_attn.k_proj.backward");
  EXPECT_EQ(kb.inputs[1], cast.id);
  EXPECT_EQ(find_buffer(t, p + "self_attn.k_proj.input_fp8"), nullptr);
  EXPECT_FALSE(saved_by_forward(t, p + "input_layernorm.out"));
  EXPECT_TRUE(saved_by_forward(base, p + "input_layernorm.out"));
  EXPECT_EQ(error_of(kTiny + "fp8: true\n"), "t.yaml:9:6: fp8: needs dtype fp16 or bf16, got fp32");
}

}  // namespace
