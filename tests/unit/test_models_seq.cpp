// Sequence-model generators (rnn, lstm, gru, bert, gpt2, gpt, llama): parameter counts
// against PyTorch and Hugging Face, saved activations worked out by hand (the transformer
// layer against Korthikanti et al.'s 34 sbh + 5 as^2 b), attention forms, backward through
// time, and located errors for bad specs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/core/config.h"
#include "sim/exec/replay.h"
#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/workload/analysis.h"
#include "sim/workload/models/models.h"
#include "sim/workload/trace.h"
#include "sim/workload/workload.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string last_user(const Trace& t, const Liveness& l, const std::string& buffer) {
  const OpId op = l.last_use[buffer_named(t, buffer).id];
  return op == kNoOp ? "(none)" : t.ops[op].name;
}

// Parameters whose name starts with `prefix` (fp32 weights).
std::uint64_t parameters_under(const Trace& t, const std::string& prefix) {
  std::uint64_t bytes = 0;
  for (const Buffer& b : t.buffers)
    if (b.category == Category::weight && b.name.rfind(prefix, 0) == 0) bytes += b.bytes;
  return bytes / 4;
}

// The checks every generated trace must pass. Ops reading a slice of a buffer (a time
// step, one of q/k/v) are charged for the slice, so bytes_moved may be below the sum of
// whole buffers.
void expect_well_formed(const Trace& t) {
  EXPECT_NO_THROW(validate(t, "x"));
  const Liveness l = compute_liveness(t);
  ASSERT_EQ(l.last_use.size(), t.buffers.size());
  for (const Op& op : t.ops) {
    EXPECT_LE(op.bytes_moved, bytes_moved(t, op)) << op.name;
    EXPECT_GT(op.bytes_moved, 0) << op.name;
  }
  for (const Buffer& b : t.buffers) {
    const bool lasting = b.category == Category::weight ||
                         b.category == Category::optimizer_state ||
                         b.category == Category::other;
    EXPECT_EQ(b.persistent, lasting) << b.name;
    EXPECT_GT(b.bytes, 0u) << b.name;
    if (b.category == Category::input) EXPECT_EQ(b.producer, kNoOp) << b.name;
    // A parameter's .grad is read last by its optimizer step; a partial gradient (a second
    // use of a weight) by the accumulation into the .grad.
    if (b.category == Category::gradient) {
      ASSERT_NE(l.last_use[b.id], kNoOp) << b.name;
      const Op& last = t.ops[l.last_use[b.id]];
      if (ends_with(b.name, ".grad"))
        EXPECT_EQ(last.phase, Phase::optimizer) << b.name;
      else
        EXPECT_EQ(last.kind, "accumulate_grad") << b.name;
    }
  }
  EXPECT_TRUE(std::is_sorted(t.ops.begin(), t.ops.end(), [](const Op& a, const Op& b) {
    return a.phase < b.phase;
  }));
}

}  // namespace

TEST(SeqModels, Registered) {
  for (const char* name : {"rnn", "lstm", "gru", "bert", "gpt2", "gpt", "llama"}) {
    const ModelInfo* m = find_model(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_FALSE(m->description.empty());
    for (const char* common : {"batch", "dtype", "optimizer", "mixed_precision"})
      EXPECT_TRUE(std::any_of(m->params.begin(), m->params.end(),
                              [&](const ParamSpec& p) { return p.name == common; }))
          << name << " lacks " << common;
  }
}

// ---------------------------------------------------------------------------------------
// Parameter counts

TEST(SeqBert, ParameterCountsMatchHuggingFace) {
  // BertModel (embeddings, encoder, pooler), base: 23,837,184 + 12 x 7,087,872 + 590,592.
  Trace base = generate("model: bert\nseq_len: 16\nbatch: 2\n");
  EXPECT_EQ(base.name, "bert-base");
  EXPECT_EQ(parameters_under(base, "bert."), 109'482'240u);
  EXPECT_EQ(parameters_under(base, "bert.embeddings."), 23'837'184u);
  EXPECT_EQ(parameters_under(base, "bert.encoder.layer.0."), 7'087'872u);
  EXPECT_EQ(parameters_under(base, "bert.pooler."), 590'592u);
  // BertForSequenceClassification adds 768 x 2 + 2.
  EXPECT_EQ(base.parameters, 109'483'778u);
  expect_well_formed(base);

  Trace large = generate("model: bert\nvariant: large\nseq_len: 16\nbatch: 2\n");
  EXPECT_EQ(parameters_under(large, "bert."), 335'141'888u);
  EXPECT_EQ(large.parameters, 335'141'888u + 1024 * 2 + 2);

  // BertForMaskedLM: no pooler; transform dense + LayerNorm + decoder bias; the decoder
  // weight is the word embeddings.
  Trace mlm = generate("model: bert\nhead: mlm\nseq_len: 16\nbatch: 2\n");
  EXPECT_EQ(mlm.parameters, 109'514'298u);
  EXPECT_EQ(find_buffer(mlm, "cls.predictions.decoder.weight"), nullptr);
  expect_well_formed(mlm);
}

TEST(SeqGpt2, ParameterCountsMatchHuggingFace) {
  // (50257 + 1024) h + L (12 h^2 + 13 h) + 2 h, the LM head tied to wte.
  const std::pair<const char*, std::uint64_t> expected[] = {{"small", 124'439'808},
                                                            {"medium", 354'823'168},
                                                            {"large", 774'030'080},
                                                            {"xl", 1'557'611'200}};
  for (auto [variant, count] : expected) {
    Trace t = generate(std::string("model: gpt2\nseq_len: 8\nbatch: 1\nvariant: ") + variant + "\n");
    EXPECT_EQ(t.parameters, count) << variant;
    EXPECT_EQ(parameter_count(t, DType::fp32), count) << variant;
  }
  Trace t = generate("model: gpt2\nseq_len: 8\nbatch: 1\nvariant: xl\n");
  EXPECT_EQ(t.name, "gpt2-xl");
  EXPECT_EQ(find_buffer(t, "lm_head.weight"), nullptr);
  expect_well_formed(t);
}

TEST(SeqGpt, GroupedQueryAttentionInTheFusedProjectionAndAnUntiedHead) {
  // Megatron-core's GPT of its gpt3_7b functional tests (--num-query-groups 8,
  // --untie-embeddings-and-output-weights): per layer 2h + h (h + 2 kv) + (h + 2 kv) + h^2 + h
  // + 2h + 8 h^2 + 5h with kv = 8 x 128; 32 layers, then (2 x 131072 + 8192) h + 2h.
  const std::string spec = "model: gpt\nlayers: 32\nhidden: 4096\nheads: 32\nvocab: 131072\nmax_positions: 8192\n"
                           "seq_len: 16\nbatch: 1\n";
  Trace t = generate(spec + "num_kv_heads: 8\ntie_embeddings: false\n");
  EXPECT_EQ(t.parameters, 6'745'956'352u);
  EXPECT_EQ(parameters_under(t, "transformer.h.0."), 176'207'872u);
  ASSERT_NE(find_buffer(t, "lm_head.weight"), nullptr);
  EXPECT_EQ(find_buffer(t, "transformer.h.0.attn.c_attn.weight")->bytes, 4096u * 6144u * 4u);
  EXPECT_NE(t.description.find("32 heads (8 kv)"), std::string::npos) << t.description;
  EXPECT_NE(t.description.find("untied head"), std::string::npos) << t.description;
  expect_well_formed(t);
  // As many k/v heads as heads and the tied head: the model as before, to the parameter.
  const Trace mha = generate(spec + "num_kv_heads: 32\n");
  const Trace plain = generate(spec);
  EXPECT_EQ(mha.parameters, plain.parameters);
  EXPECT_EQ(mha.ops.size(), plain.ops.size());
  EXPECT_EQ(find_buffer(plain, "lm_head.weight"), nullptr);
  // Under tensor parallelism each rank holds kv / tp of the k/v heads.
  const Trace tp = generate_workload(ConfigNode::parse_text(spec + "num_kv_heads: 8\nparallel: {tp: 4}\n", "w.yaml"));
  EXPECT_EQ(find_buffer(tp, "transformer.h.0.attn.c_attn.weight")->bytes, 4096u * 6144u / 4u * 4u);
  try {
    generate_workload(ConfigNode::parse_text(spec + "num_kv_heads: 8\nparallel: {tp: 16}\n", "w.yaml"));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.tp: expected a divisor of the 8 k/v heads, got '16'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NE(error_of(spec + "num_kv_heads: 5\n").find("a divisor of heads (32)"), std::string::npos);
  EXPECT_NE(error_of(spec + "blocks_only: true\ntie_embeddings: false\n").find("applies only without blocks_only"),
            std::string::npos);
}

TEST(SeqLlama, SevenBParameterCount) {
  // 32 x (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096) + 2 x 32000 x 4096 + 4096.
  Trace t = generate("model: llama\nseq_len: 16\nbatch: 1\n");
  EXPECT_EQ(t.parameters, 6'738'415'616u);
  EXPECT_EQ(parameters_under(t, "model.layers.0."), 202'383'360u);
  EXPECT_NE(find_buffer(t, "lm_head.weight"), nullptr);  // untied
  for (const Buffer& b : t.buffers) EXPECT_FALSE(ends_with(b.name, ".bias")) << b.name;
  expect_well_formed(t);
}

TEST(SeqRecurrent, ParameterCountsByHand) {
  // nn.LSTM(10, 20, num_layers=2): layer 0 4 x (10 x 20 + 20 x 20 + 2 x 20) = 2,560;
  // layer 1 4 x (20 x 20 + 20 x 20 + 40) = 3,360; then fc 20 x 5 + 5 = 105.
  const std::string dims = "layers: 2\nhidden: 20\ninput_size: 10\nnum_classes: 5\nseq_len: 4\nbatch: 3\n";
  Trace lstm = generate("model: lstm\n" + dims);
  EXPECT_EQ(lstm.parameters, 2'560u + 3'360u + 105u);
  EXPECT_EQ(buffer_named(lstm, "lstm.weight_ih_l0").bytes, 80u * 10 * 4);
  EXPECT_EQ(buffer_named(lstm, "lstm.weight_hh_l1").bytes, 80u * 20 * 4);
  EXPECT_EQ(buffer_named(lstm, "lstm.bias_hh_l1").bytes, 80u * 4);
  // GRU: 3 gates (1,920 + 2,520); RNN: 1 (640 + 840).
  EXPECT_EQ(generate("model: gru\n" + dims).parameters, 1'920u + 2'520u + 105u);
  EXPECT_EQ(generate("model: rnn\n" + dims).parameters, 640u + 840u + 105u);
  for (const char* m : {"lstm", "gru", "rnn"}) expect_well_formed(generate(std::string("model: ") + m + "\n" + dims));
}

TEST(SeqRecurrent, LastOutputKeepsOnlyTheLastHiddenState) {
  // output: last — the classifier reads h_T itself; nothing is stacked.
  const std::string dims = "layers: 2\nhidden: 20\ninput_size: 10\nnum_classes: 5\nseq_len: 4\nbatch: 3\n";
  Trace seq = generate("model: lstm\n" + dims);
  Trace last = generate("model: lstm\noutput: last\n" + dims);
  expect_well_formed(last);
  EXPECT_EQ(last.parameters, seq.parameters);
  EXPECT_EQ(find_buffer(last, "lstm.l1.out"), nullptr);  // the last layer stacks nothing
  EXPECT_NE(find_buffer(last, "lstm.l0.out"), nullptr);  // the first still feeds the second
  EXPECT_EQ(op_named(last, "fc").inputs[0], buffer_named(last, "lstm.l1.t3.h").id);
  // Over 50 steps the peak is at the end of the forward, where the stacked sequence
  // (50 x 8 x 32 x 4 B = 51,200 B) was live besides the states the backward keeps.
  const std::string longer = "hidden: 32\ninput_size: 8\nseq_len: 50\nbatch: 8\n";
  EXPECT_EQ(exec::baseline_peak_bytes(generate("model: lstm\n" + longer)) -
                exec::baseline_peak_bytes(generate("model: lstm\noutput: last\n" + longer)),
            51'200u);
  EXPECT_NE(error_of("model: lstm\noutput: all\n").find("output"), std::string::npos);
}

// ---------------------------------------------------------------------------------------
// What the transformer saves

TEST(SeqTransformer, LayerSavesKorthikantiActivations) {
  // Per GPT layer in fp16 with dropout, Korthikanti et al. 2022 count 34 sbh + 5 as^2 b
  // bytes: LN inputs 4, QKV input 2, Q K 4, V 2, softmax output 2as^2b, its dropout mask
  // as^2b and output 2as^2b, projection input 2, MLP 19 (input 2, GELU input 8, GELU output
  // 8, dropout mask 1), attention output dropout mask 1. Here also the two LayerNorms' fp32
  // mean and rstd: 16 sb. The first layer's input is an input, not an activation, and the
  // last layer's output is saved by the loss instead: L layers save L times the layer.
  const std::int64_t L = 2, s = 32, b = 3, h = 64, a = 4;
  const std::string spec = "model: gpt\nlayers: 2\nhidden: 64\nheads: 4\nseq_len: 32\nbatch: 3\n"
                           "dtype: fp16\nblocks_only: true\n";
  Trace t = generate(spec);
  expect_well_formed(t);
  EXPECT_EQ(saved_activation_bytes(t),
            static_cast<std::uint64_t>(L * (34 * s * b * h + 5 * a * s * s * b + 16 * s * b)));

  // Fused: no as^2 b terms; the attention output (already counted, as the projection's
  // input) and an fp32 logsumexp of a x s x b.
  Trace f = generate(spec + "attention_impl: fused\n");
  expect_well_formed(f);
  EXPECT_EQ(saved_activation_bytes(f),
            static_cast<std::uint64_t>(L * (34 * s * b * h + 4 * a * s * b + 16 * s * b)));

  // Without dropout: no masks (sbh + sbh + as^2 b) and no dropped-out probabilities.
  Trace nd = generate(spec + "dropout: 0\n");
  EXPECT_EQ(saved_activation_bytes(nd),
            static_cast<std::uint64_t>(L * (32 * s * b * h + 2 * a * s * s * b + 16 * s * b)));
  for (const Op& op : nd.ops) EXPECT_NE(op.kind, "dropout") << op.name;
}

TEST(SeqTransformer, MaterializedScoresAndFusedLogsumexp) {
  const std::string spec = "model: gpt\nlayers: 2\nhidden: 64\nheads: 4\nseq_len: 32\nbatch: 3\n";
  Trace m = generate(spec);
  // batch x heads x seq x seq fp32, made by q k^T and dead once the softmax has run.
  EXPECT_EQ(buffer_named(m, "transformer.h.0.attn.scores").bytes, 3u * 4 * 32 * 32 * 4);
  const Liveness lm = compute_liveness(m);
  EXPECT_EQ(last_user(m, lm, "transformer.h.0.attn.scores"), "transformer.h.0.attn.softmax");
  EXPECT_EQ(last_user(m, lm, "transformer.h.0.attn.softmax.out"),
            "transformer.h.0.attn.softmax.backward");
  EXPECT_DOUBLE_EQ(op_named(m, "transformer.h.0.attn.qk").flops, 2.0 * 3 * 4 * 32 * 32 * 16);
  EXPECT_EQ(op_named(m, "transformer.h.0.attn.qk").kind, "bmm");

  Trace f = generate(spec + "attention_impl: fused\n");
  for (const Buffer& buf : f.buffers) EXPECT_FALSE(ends_with(buf.name, ".scores")) << buf.name;
  EXPECT_EQ(buffer_named(f, "transformer.h.0.attn.logsumexp").bytes, 3u * 4 * 32 * 4);
  const Op& fa = op_named(f, "transformer.h.0.attn");
  EXPECT_EQ(fa.kind, "flash_attention");
  // Causal: half of 2 x (2 b s^2 h).
  EXPECT_DOUBLE_EQ(fa.flops, 0.5 * 4.0 * 3 * 32 * 32 * 64);
  const Op& fb = op_named(f, "transformer.h.0.attn.backward");
  EXPECT_DOUBLE_EQ(fb.flops, 2.5 * fa.flops);
  EXPECT_EQ(fb.workspace_bytes, 3u * 32 * 64 * 4 + 3u * 4 * 32 * 4);
  const Liveness lf = compute_liveness(f);
  EXPECT_EQ(last_user(f, lf, "transformer.h.0.attn.logsumexp"), "transformer.h.0.attn.backward");
  // The fused QKV projection is one buffer; q, k, v are views of it, read once.
  EXPECT_EQ(fa.inputs, std::vector<BufferId>{buffer_named(f, "transformer.h.0.attn.c_attn.out").id});

  EXPECT_LT(exec::baseline_peak_bytes(f), exec::baseline_peak_bytes(m));
  // With a long sequence the seq x seq tensors dominate: at seq 1024 the materialised peak
  // is larger by more than one layer's softmax output, dropout mask and dropped-out
  // probabilities (fp32: 9 a s^2 b bytes).
  const std::string longer = "model: gpt\nlayers: 2\nhidden: 64\nheads: 4\nseq_len: 1024\nbatch: 1\n";
  EXPECT_GT(exec::baseline_peak_bytes(generate(longer)) -
                exec::baseline_peak_bytes(generate(longer + "attention_impl: fused\n")),
            9u * 4 * 1024 * 1024);
}

TEST(SeqTransformer, TiedHeadAccumulatesIntoOneGradient) {
  Trace t = generate("model: gpt2\nseq_len: 8\nbatch: 2\n");
  // lm_head's backward makes wte's .grad; the embedding's backward makes a part that is
  // summed into it in place.
  const Op& acc = op_named(t, "transformer.wte.weight.accumulate_grad");
  EXPECT_EQ(acc.updates, std::vector<BufferId>{buffer_named(t, "transformer.wte.weight.grad").id});
  EXPECT_EQ(acc.inputs, std::vector<BufferId>{buffer_named(t, "transformer.wte.weight.grad_part").id});
  EXPECT_LT(op_named(t, "lm_head.backward").id, op_named(t, "transformer.wte.backward").id);
  // One optimizer step for the shared weight.
  int steps = 0;
  for (const Op& op : t.ops) steps += op.name == "transformer.wte.weight.step";
  EXPECT_EQ(steps, 1);
  // Position embeddings (seq x h) are added to every sample; their gradient is summed back.
  EXPECT_EQ(buffer_named(t, "transformer.wpe.out").bytes, 8u * 768 * 4);
  EXPECT_EQ(op_named(t, "transformer.add_positions.sum").kind, "sum");
  // The embedding gather reads its rows only: indices, 16 rows of the table, 16 rows out.
  EXPECT_DOUBLE_EQ(op_named(t, "transformer.wte").bytes_moved, 16.0 * 8 + 2 * 16.0 * 768 * 4);
}

TEST(SeqLlama, RotarySwigluAndRmsNormSaves) {
  Trace t = generate("model: llama\nlayers: 1\nhidden: 64\nheads: 4\nintermediate: 96\nvocab: 100\n"
                     "seq_len: 8\nbatch: 2\ndtype: bf16\n");
  expect_well_formed(t);
  const Liveness l = compute_liveness(t);
  const std::string p = "model.layers.0.";
  // Rotary keeps only its tables: the unrotated q dies once rotated.
  EXPECT_EQ(last_user(t, l, p + "self_attn.q_proj.out"), p + "self_attn.rotary_q");
  EXPECT_EQ(last_user(t, l, p + "self_attn.rotary_q.out"), p + "self_attn.qk.backward");
  // SwiGLU keeps gate (silu input), silu output and up (mul operands), and their product.
  EXPECT_EQ(last_user(t, l, p + "mlp.gate_proj.out"), p + "mlp.act_fn.backward");
  EXPECT_EQ(last_user(t, l, p + "mlp.act_fn.out"), p + "mlp.mul.backward");
  EXPECT_EQ(last_user(t, l, p + "mlp.up_proj.out"), p + "mlp.mul.backward");
  EXPECT_EQ(last_user(t, l, p + "mlp.mul.out"), p + "mlp.down_proj.backward");
  // RMSNorm saves its input and an fp32 rstd per token, no mean.
  EXPECT_EQ(buffer_named(t, p + "input_layernorm.rstd").bytes, 16u * 4);
  EXPECT_EQ(find_buffer(t, p + "input_layernorm.mean"), nullptr);
  EXPECT_EQ(buffer_named(t, p + "mlp.up_proj.out").bytes, 16u * 96 * 2);
  // No dropout by default.
  for (const Op& op : t.ops) EXPECT_NE(op.kind, "dropout") << op.name;
}

TEST(SeqBert, PostNormBlockAndPooler) {
  Trace t = generate("model: bert\nseq_len: 16\nbatch: 2\n");
  const Liveness l = compute_liveness(t);
  const std::string p = "bert.encoder.layer.0.";
  // Post-norm: the residual sum is the LayerNorm's saved input.
  EXPECT_EQ(last_user(t, l, p + "attention.output.residual.out"),
            p + "attention.output.LayerNorm.backward");
  // The pooler reads the first token through a view: the whole last hidden state is kept
  // until the pooler's backward, whose gradient select_backward scatters into zeros.
  EXPECT_EQ(last_user(t, l, "bert.encoder.layer.11.output.LayerNorm.out"), "bert.pooler.dense.backward");
  const Op& sel = op_named(t, "bert.pooler.first_token.backward");
  EXPECT_EQ(sel.kind, "select_backward");
  EXPECT_EQ(t.buffers[sel.outputs[0]].bytes, 32u * 768 * 4);
  EXPECT_EQ(buffer_named(t, p + "attention.self.scores").bytes, 2u * 12 * 16 * 16 * 4);
  EXPECT_EQ(buffer_named(t, p + "attention.self.dropout.mask").bytes, 2u * 12 * 16 * 16);
}

// ---------------------------------------------------------------------------------------
// Recurrent: what each step keeps, and backward through time

TEST(SeqRecurrent, SavedActivationsGrowLinearlyWithSteps) {
  // Per layer and step (n x h each): h_{t-1} (saved by the hh product), c_t (by the cell),
  // the 4-gate workspace, and the step's row of the stacked output (kept by the next
  // layer's, or the classifier's, views): 7 n h. Plus c_0 once. The classifier adds its
  // log-probabilities (n x classes) and nll_loss's total_weight.
  const std::int64_t L = 2, n = 4, h = 16, C = 10;
  auto spec = [](int steps) {
    return "model: lstm\nlayers: 2\nhidden: 16\ninput_size: 8\nbatch: 4\nseq_len: " +
           std::to_string(steps) + "\n";
  };
  for (int steps : {10, 20}) {
    Trace t = generate(spec(steps));
    EXPECT_EQ(saved_activation_bytes(t),
              static_cast<std::uint64_t>(L * (7 * steps + 1) * n * h * 4 + n * C * 4 + 4))
        << steps;
  }
  EXPECT_EQ(saved_activation_bytes(generate(spec(20))) - saved_activation_bytes(generate(spec(10))),
            static_cast<std::uint64_t>(L * 70 * n * h * 4));  // 35,840

  // GRU: h_{t-1}, the 5 x hidden workspace, the stacked row: 7 n h, no cell state.
  // RNN: h_t (tanh saves its output) and the stacked row, plus h_0: (2T + 1) n h.
  auto other = [](const char* m) {
    return std::string("model: ") + m + "\nlayers: 2\nhidden: 16\ninput_size: 8\nbatch: 4\nseq_len: 10\n";
  };
  EXPECT_EQ(saved_activation_bytes(generate(other("gru"))),
            static_cast<std::uint64_t>(L * 70 * n * h * 4 + n * C * 4 + 4));
  EXPECT_EQ(saved_activation_bytes(generate(other("rnn"))),
            static_cast<std::uint64_t>(L * 21 * n * h * 4 + n * C * 4 + 4));
}

TEST(SeqRecurrent, LstmBackwardThroughTime) {
  Trace t = generate("model: lstm\nlayers: 2\nhidden: 16\ninput_size: 8\nbatch: 4\nseq_len: 5\n");
  const Liveness l = compute_liveness(t);
  // The top layer runs its whole backward first, last step first.
  EXPECT_LT(op_named(t, "lstm.l1.t4.cell.backward").id, op_named(t, "lstm.l1.t0.cell.backward").id);
  EXPECT_LT(op_named(t, "lstm.l1.t0.cell.backward").id, op_named(t, "lstm.l0.t4.cell.backward").id);
  // Each step's state lives until its backward needs it.
  EXPECT_EQ(last_user(t, l, "lstm.l0.t2.workspace"), "lstm.l0.t2.cell.backward");
  EXPECT_EQ(last_user(t, l, "lstm.l0.t2.c"), "lstm.l0.t2.cell.backward");  // after t3's
  EXPECT_EQ(last_user(t, l, "lstm.l0.t2.h"), "lstm.l0.t3.hh.backward_weight");
  // The gate pre-activations die within their step; the last h only feeds the stack.
  EXPECT_EQ(last_user(t, l, "lstm.l0.t2.ih.out"), "lstm.l0.t2.cell");
  EXPECT_EQ(last_user(t, l, "lstm.l0.t4.h"), "lstm.l0.stack");
  // Layer 0's stacked output is read per step by layer 1's ih products; the top layer's by
  // the classifier (a view of its last step).
  EXPECT_EQ(last_user(t, l, "lstm.l0.out"), "lstm.l1.t0.ih.backward_weight");
  EXPECT_EQ(last_user(t, l, "lstm.l1.out"), "fc.backward");
  // Per step, a weight gradient part summed into the one .grad; the last step's is the
  // .grad itself.
  const Op& w4 = op_named(t, "lstm.l0.t4.hh.backward_weight");
  EXPECT_EQ(t.buffers[w4.outputs[0]].name, "lstm.weight_hh_l0.grad");
  const Op& acc = op_named(t, "lstm.l0.t1.weight_hh.accumulate_grad");
  EXPECT_EQ(acc.updates, std::vector<BufferId>{buffer_named(t, "lstm.weight_hh_l0.grad").id});
  // A per-step product reads one step of the input: charged n x in, not seq x n x in.
  const Op& ih = op_named(t, "lstm.l0.t3.ih");
  EXPECT_DOUBLE_EQ(ih.bytes_moved, (4.0 * 8 + 64 * 8 + 4 * 64) * 4);
  EXPECT_DOUBLE_EQ(ih.flops, 2.0 * 4 * 8 * 64);
  // Layer 1's input gradient is stacked from the per-step ones; layer 0's input (the data)
  // needs none.
  EXPECT_EQ(op_named(t, "lstm.l1.unbind.backward").inputs.size(), 5u);
  for (const Op& op : t.ops) EXPECT_NE(op.name, "lstm.l0.unbind.backward");
}

TEST(SeqRecurrent, LongSequence) {
  Trace t = generate("model: lstm\nhidden: 64\ninput_size: 32\nbatch: 8\nseq_len: 1000\n");
  expect_well_formed(t);
  EXPECT_EQ(op_named(t, "lstm.l0.stack").inputs.size(), 1000u);
}

// ---------------------------------------------------------------------------------------
// Mixed precision and bad specs

TEST(SeqGpt2, XlMixedPrecisionAdamKeeps16BytesPerParameter) {
  Trace t = generate("model: gpt2\nvariant: xl\nseq_len: 8\nbatch: 1\ndtype: fp16\n"
                     "mixed_precision: true\noptimizer: adam\n");
  const std::uint64_t params = 1'557'611'200;
  EXPECT_EQ(t.parameters, params);
  // fp16 weights (2) and fp32 masters (4); fp16 .grad (2); fp32 exp_avg and exp_avg_sq (8).
  std::uint64_t grads = 0;
  for (const Buffer& b : t.buffers)
    if (b.category == Category::gradient && ends_with(b.name, ".grad")) grads += b.bytes;
  const std::uint64_t model_state =
      t.total_bytes(Category::weight) + grads + t.total_bytes(Category::optimizer_state);
  EXPECT_EQ(model_state, 16 * params);
  expect_well_formed(t);
}

TEST(SeqModels, BadSpecsAreLocated) {
  EXPECT_EQ(error_of("model: bert\nvariant: huge\n"),
            "t.yaml:2:10: variant: expected one of base, large, got 'huge'");
  EXPECT_EQ(error_of("model: gpt2\nvariant: xxl\n"),
            "t.yaml:2:10: variant: expected one of small, medium, large, xl, got 'xxl'; did you mean 'xl'?");
  EXPECT_EQ(error_of("model: gpt\nhidden: 768\nheads: 7\n"),
            "t.yaml:3:8: heads: expected a divisor of hidden (768), got '7'");
  EXPECT_EQ(error_of("model: llama\nhidden: 4096\nheads: 4096\n"),
            "t.yaml:3:8: heads: expected a divisor of hidden (4096) that leaves an even head "
            "size (rotary), got '4096'");
  EXPECT_EQ(error_of("model: gpt2\nseq_len: 2048\n"),
            "t.yaml:2:10: seq_len: expected an integer from 1 to 1024, got '2048'");
  EXPECT_EQ(error_of("model: bert\nseq_len: 513\n"),
            "t.yaml:2:10: seq_len: expected an integer from 1 to 512, got '513'");
  EXPECT_EQ(error_of("model: gpt\nseq_len: 4096\n"),
            "t.yaml:2:10: seq_len: expected at most max_positions (2048), got '4096'");
  EXPECT_EQ(error_of("model: llama\nattention_impl: flash\n"),
            "t.yaml:2:17: attention_impl: expected one of materialized, fused, selective, got 'flash'");
  EXPECT_EQ(error_of("model: bert\ndropout: 1.5\n"),
            "t.yaml:2:10: dropout: expected a number from 0 to 1, got '1.5'");
  EXPECT_EQ(error_of("model: lstm\nlayers: 0\n"),
            "t.yaml:2:9: layers: expected an integer from 1 to 1000, got '0'");
  EXPECT_EQ(error_of("model: gru\nbatch: -1\n"),
            "t.yaml:2:8: batch: expected an integer from 1 to 1000000, got '-1'");
  const std::string unknown = error_of("model: lstm\nhiden: 5\n");
  EXPECT_EQ(unknown.substr(0, 9), "t.yaml:2:") << unknown;
  EXPECT_NE(unknown.find("hiden"), std::string::npos) << unknown;
}
