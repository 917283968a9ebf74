// Fine-tuning (the transformers' `finetune` key): frozen weights and LoRA adapters, their
// model state counted to the byte by hand, and what runs backward.
#include <gtest/gtest.h>

#include <string>

#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

// A small Llama: 2 layers of hidden 64 (4 heads of 16, no grouping), SwiGLU 128, vocabulary
// 256; 16 tokens x batch 2; bf16 over fp32 masters, AdamW.
const std::string kSmallLlama =
    "model: llama\nlayers: 2\nhidden: 64\nheads: 4\nintermediate: 128\nvocab: 256\nseq_len: 16\nbatch: 2\n"
    "dtype: bf16\nmixed_precision: true\noptimizer: adamw\n";

// Its parameters:
//   embed_tokens 256 x 64                                        16,384
//   per layer: q, k, v, o 4 x 64 x 64 = 16,384; gate, up, down
//              3 x 64 x 128 = 24,576; two RMSNorms 2 x 64 = 128   41,088 (x 2 = 82,176)
//   final norm 64, lm_head 256 x 64 = 16,384                     16,448
//   total                                                       115,008
constexpr std::uint64_t kBase = 115'008, kHead = 256 * 64;

struct ModelState {
  std::uint64_t weight = 0, state = 0, grad = 0;  // bytes
  int steps = 0;                                   // optimizer ops
};

ModelState model_state(const Trace& t) {
  ModelState s;
  for (const Buffer& b : t.buffers) {
    if (b.category == Category::weight) s.weight += b.bytes;  // half weights and fp32 masters
    if (b.category == Category::optimizer_state) s.state += b.bytes;
    if (b.category == Category::gradient) s.grad += b.bytes;  // each parameter's .grad
  }
  for (const Op& op : t.ops) s.steps += op.phase == Phase::optimizer ? 1 : 0;
  return s;
}

bool starts_with(const std::string& s, const std::string& head) { return s.compare(0, head.size(), head) == 0; }

}  // namespace

TEST(FineTune, LoraOnQAndVByHand) {
  const Trace t = workload(kSmallLlama + "finetune:\n  lora: {rank: 8, targets: [q, v]}\n");
  // Adapters on q and v of each layer (64 x 64): A 64 x 8 and B 8 x 64, 1,024 parameters a
  // projection, 2 projections x 2 layers = 4,096.
  constexpr std::uint64_t adapters = 4 * (64 * 8 + 8 * 64);
  EXPECT_EQ(t.parameters, kBase + adapters);
  const ModelState s = model_state(t);
  // The frozen base in bf16 alone: 230,016 B; each adapter parameter a bf16 weight and an
  // fp32 master, 6 B: 24,576 B. 254,592 B in all.
  EXPECT_EQ(s.weight, 2 * kBase + (2 + 4) * adapters);
  EXPECT_EQ(s.state, 8 * adapters);  // exp_avg and exp_avg_sq in fp32: 32,768 B
  EXPECT_EQ(s.grad, 2 * adapters);   // bf16 .grad of the adapters only: 8,192 B
  EXPECT_EQ(s.steps, 8);             // one AdamW step per A and B
  EXPECT_EQ(find_buffer(t, "model.layers.0.self_attn.q_proj.weight.grad"), nullptr);
  EXPECT_EQ(find_buffer(t, "model.layers.0.self_attn.q_proj.weight.exp_avg"), nullptr);
  EXPECT_EQ(find_buffer(t, "model.layers.0.self_attn.q_proj.weight.master"), nullptr);
  EXPECT_NE(t.description.find("lora r8 on q, v, base frozen"), std::string::npos) << t.description;

  // The adapter: x A, then B, scaled and added to the frozen projection's output.
  EXPECT_EQ(op_named(t, "model.layers.1.self_attn.q_proj.lora_A").kind, "linear");
  EXPECT_EQ(op_named(t, "model.layers.1.self_attn.q_proj.lora_scale").kind, "mul");
  EXPECT_EQ(op_named(t, "model.layers.1.self_attn.q_proj.lora_add").kind, "add");
  // A frozen projection with an adapter below it: the input gradient alone (one GEMM of
  // 2 x 32 tokens x 64 x 64 FLOPs), reading neither its saved input nor making a weight
  // gradient.
  const Op& k1 = op_named(t, "model.layers.1.self_attn.k_proj.backward");
  EXPECT_EQ(k1.outputs.size(), 1u);
  EXPECT_EQ(t.buffers[k1.outputs[0]].category, Category::activation_grad);
  EXPECT_EQ(k1.inputs.size(), 2u);  // the output's gradient and the weight
  EXPECT_DOUBLE_EQ(k1.flops, 2.0 * 32 * 64 * 64);
  // Below the lowest trainable weight (layer 0's adapters read the first norm's output)
  // nothing runs backward: no embedding backward, no first norm backward, no k_proj
  // backward in layer 0, and attention makes no gradient for k there.
  for (const Op& op : t.ops) {
    if (op.phase != Phase::backward) continue;
    EXPECT_NE(op.name, "model.embed_tokens.backward");
    EXPECT_NE(op.name, "model.layers.0.input_layernorm.backward");
    EXPECT_NE(op.name, "model.layers.0.self_attn.k_proj.backward");
  }
  EXPECT_EQ(find_buffer(t, "model.layers.0.self_attn.qk.grad_k"), nullptr);
  EXPECT_NE(find_buffer(t, "model.layers.1.self_attn.qk.grad_k"), nullptr);  // layer 0's adapters need it
}

TEST(FineTune, AllButTheHeadByHand) {
  const Trace t = workload(kSmallLlama + "finetune:\n  freeze: all_but_head\n");
  EXPECT_EQ(t.parameters, kBase);
  const ModelState s = model_state(t);
  // The lm_head alone trains: 16,384 parameters with a master (4 B), two moments (8 B) and
  // a bf16 .grad (2 B); everything else is its bf16 weight. Weights 230,016 + 65,536 B.
  EXPECT_EQ(s.weight, 2 * kBase + 4 * kHead);
  EXPECT_EQ(s.state, 8 * kHead);
  EXPECT_EQ(s.grad, 2 * kHead);
  EXPECT_EQ(s.steps, 1);
  // The backward is the loss and the head's weight gradient: nothing below the head needs
  // a gradient, so its GEMM reads the final norm's output and not the weight.
  std::vector<std::string> backward;
  for (const Op& op : t.ops)
    if (op.phase == Phase::backward) backward.push_back(op.name);
  EXPECT_EQ(backward, (std::vector<std::string>{"nll_loss.backward", "log_softmax.backward", "lm_head.backward"}));
  const Op& head = op_named(t, "lm_head.backward");
  EXPECT_EQ(t.buffers[head.inputs[1]].name, "model.norm.out");
  EXPECT_EQ(head.inputs.size(), 2u);
  EXPECT_EQ(head.outputs.size(), 1u);
  EXPECT_EQ(t.buffers[head.outputs[0]].name, "lm_head.weight.grad");
}

TEST(FineTune, FrozenFirstLayersKeepNoActivationForTheBackward) {
  const Trace frozen = workload(kSmallLlama + "finetune:\n  freeze: {first_layers: 1}\n");
  const Trace full = workload(kSmallLlama);
  // Layer 0 and the embeddings (16,384 + 41,088 parameters) lose their master, moments and
  // gradient: 14 B each.
  EXPECT_EQ(model_state(full).weight - model_state(frozen).weight, 4 * (16'384 + 41'088));
  EXPECT_EQ(model_state(full).state - model_state(frozen).state, 8 * (16'384 + 41'088));
  // No backward or optimizer op reads anything of layer 0 but its output (layer 1's first
  // norm saves its input for its weight's gradient): its activations die in the forward
  // (the full model's backward reads them).
  auto reads_layer0 = [](const Trace& t) {
    int n = 0;
    for (const Op& op : t.ops)
      if (op.phase != Phase::forward)
        for (BufferId b : op.inputs) {
          const std::string& name = t.buffers[b].name;
          n += starts_with(name, "model.layers.0.") && name != "model.layers.0.mlp.residual.out" ? 1 : 0;
        }
    return n;
  };
  EXPECT_EQ(reads_layer0(frozen), 0);
  EXPECT_GT(reads_layer0(full), 0);
  // Layer 1 trains all of it; its first norm makes its weight's gradient but none for its
  // input (layer 0's output needs none).
  const Op& norm = op_named(frozen, "model.layers.1.input_layernorm.backward");
  ASSERT_EQ(norm.outputs.size(), 1u);
  EXPECT_EQ(frozen.buffers[norm.outputs[0]].name, "model.layers.1.input_layernorm.weight.grad");
}

TEST(FineTune, FullRecomputeRunsNoFrozenLayerAgain) {
  const Trace t = workload(kSmallLlama + "recompute: full\nfinetune:\n  freeze: {first_layers: 1}\n");
  int layer0 = 0, layer1 = 0;
  for (const Op& op : t.ops) {
    if (op.name.find("@recompute") == std::string::npos) continue;
    layer0 += starts_with(op.name, "model.layers.0.") ? 1 : 0;
    layer1 += starts_with(op.name, "model.layers.1.") ? 1 : 0;
  }
  EXPECT_EQ(layer0, 0);
  EXPECT_GT(layer1, 0);
}

TEST(FineTune, DefaultTargetsAndDropoutFollowPeft) {
  // q and v by default; with freeze left out the base is frozen (get_peft_model).
  const Trace llama = workload(kSmallLlama + "finetune:\n  lora: {rank: 4, alpha: 16, dropout: 0.1}\n");
  EXPECT_NE(find_buffer(llama, "model.layers.0.self_attn.v_proj.lora_B.weight"), nullptr);
  EXPECT_EQ(find_buffer(llama, "model.layers.0.self_attn.k_proj.lora_A.weight"), nullptr);
  EXPECT_EQ(op_named(llama, "model.layers.0.self_attn.q_proj.lora_dropout").kind, "dropout");
  EXPECT_NE(llama.description.find("lora r4 on q, v (alpha 16) (dropout 0.1), base frozen"), std::string::npos)
      << llama.description;
  // GPT-2's fused c_attn, through a Hugging Face config: the qkv target.
  const Trace gpt2 = workload("model: hf\nconfig: " + std::string(MEMSIM_SOURCE_DIR) +
                              "/tests/data/hf/gpt2.json\nseq_len: 64\nbatch: 1\nfinetune:\n  lora: {rank: 8}\n");
  EXPECT_NE(find_buffer(gpt2, "transformer.h.0.attn.c_attn.lora_A.weight"), nullptr);
  // fused_swiglu's one gate_up projection.
  const Trace fused = workload(kSmallLlama + "fused_swiglu: true\nfinetune:\n  lora: {rank: 8, targets: [gate_up, down]}\n");
  EXPECT_NE(find_buffer(fused, "model.layers.1.mlp.gate_up_proj.lora_B.weight"), nullptr);
}

TEST(FineTune, SettingsNotModelledAreRefusedAtTheKey) {
  const std::string lora = "finetune:\n  lora: {rank: 8}\n";
  EXPECT_EQ(workload_error(kSmallLlama + lora + "parallel: {tp: 2}\n"),
            "w.yaml:13:9: finetune.lora: LoRA adapters with tensor parallelism (parallel.tp 2) are not modelled; use "
            "dp or pp");
  EXPECT_EQ(workload_error(kSmallLlama + "finetune:\n  freeze: embeddings\nparallel: {dp: 2, zero: 3}\n"),
            "w.yaml:13:11: finetune.freeze: frozen weights with parallel.zero 3 are not modelled (ZeRO-3 would shard "
            "them too); use zero 0 to 2");
  EXPECT_EQ(workload_error("model: gpt2\nseq_len: 64\nbatch: 1\nfinetune:\n  freeze: all_but_head\n"),
            "w.yaml:5:3: finetune: freezes every weight of gpt2 and adds no LoRA adapter: nothing is left to train (a "
            "head tied to the token embeddings is frozen with them)");
  EXPECT_EQ(workload_error(kSmallLlama + "fused_swiglu: true\nfinetune:\n  lora: {rank: 8, targets: [gate]}\n"),
            "w.yaml:14:29: finetune.lora.targets[0]: expected a projection of llama (q, k, v, o, gate_up, down), got "
            "'gate': fused_swiglu makes gate and up one projection (gate_up)");
}
