// Megatron-LM's fused kernels as options of the transformer generators (fused_layer_norm,
// fused_softmax, fused_bias_gelu, fused_swiglu, fused_dropout_add): with each on and off, the bytes a layer
// saves for the backward against a formula worked out by hand from what the fused kernel or
// autograd keeps, and the ops and bytes moved of the kernels each replaces. Spelling the
// defaults out changes no trace; a key that has nothing to act on is a located error.
#include <gtest/gtest.h>

#include <string>

#include "sim/core/config.h"
#include "sim/workload/analysis.h"
#include "sim/workload/models/builder.h"
#include "sim/workload/trace.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

// Korthikanti et al.'s GPT layer (as SeqTransformer.LayerSavesKorthikantiActivations): two
// layers, s 32, b 3, h 64, a 4, fp16, with dropout.
constexpr std::uint64_t L = 2, s = 32, b = 3, h = 64, a = 4, f = 4 * h;
const std::string kGpt =
    "model: gpt\nlayers: 2\nhidden: 64\nheads: 4\nseq_len: 32\nbatch: 3\ndtype: fp16\nblocks_only: true\n";
// A small Llama: T = 16 tokens, h 64, f 96, bf16, no dropout.
constexpr std::uint64_t T = 16, kLlamaHidden = 64, kLlamaFfn = 96;
const std::string kLlama = "model: llama\nlayers: 2\nhidden: 64\nheads: 4\nintermediate: 96\nvocab: 100\n"
                           "seq_len: 8\nbatch: 2\ndtype: bf16\n";

// `spec` with its dtype line changed to `dtype`.
std::string with_dtype(std::string spec, const std::string& dtype) {
  const auto at = spec.find("dtype: ");
  const auto end = spec.find('\n', at);
  return spec.replace(at, end - at, "dtype: " + dtype);
}

struct Ops {
  std::size_t count = 0;
  double bytes = 0;
};

// The ops of `phase` named `prefix` or under it ("prefix.").
Ops ops_under(const Trace& t, const std::string& prefix, Phase phase) {
  Ops o;
  for (const Op& op : t.ops)
    if (op.phase == phase && (op.name == prefix || op.name.rfind(prefix + ".", 0) == 0)) {
      ++o.count;
      o.bytes += op.bytes_moved;
    }
  return o;
}

// The ops of `phase` whose name is one of `names` (each must exist).
Ops ops_named(const Trace& t, const std::vector<std::string>& names, Phase phase) {
  Ops o;
  for (const std::string& name : names) {
    const Op& op = op_named(t, name);
    EXPECT_EQ(op.phase, phase) << name;
    ++o.count;
    o.bytes += op.bytes_moved;
  }
  return o;
}

std::uint64_t ops_of_kind(const Trace& t, const std::string& kind) {
  std::uint64_t n = 0;
  for (const Op& op : t.ops) n += op.kind == kind;
  return n;
}

void expect_same_trace(const Trace& x, const Trace& y) {
  EXPECT_EQ(x.description, y.description);
  ASSERT_EQ(x.ops.size(), y.ops.size());
  ASSERT_EQ(x.buffers.size(), y.buffers.size());
  for (std::size_t i = 0; i < x.ops.size(); ++i) {
    EXPECT_EQ(x.ops[i].name, y.ops[i].name);
    EXPECT_EQ(x.ops[i].inputs, y.ops[i].inputs) << x.ops[i].name;
    EXPECT_EQ(x.ops[i].outputs, y.ops[i].outputs) << x.ops[i].name;
    EXPECT_EQ(x.ops[i].bytes_moved, y.ops[i].bytes_moved) << x.ops[i].name;
  }
  for (std::size_t i = 0; i < x.buffers.size(); ++i) {
    EXPECT_EQ(x.buffers[i].name, y.buffers[i].name);
    EXPECT_EQ(x.buffers[i].bytes, y.buffers[i].bytes) << x.buffers[i].name;
  }
}

}  // namespace

TEST(FusedKernels, DefaultsSpelledOutChangeNothing) {
  expect_same_trace(generate(kGpt), generate(kGpt + "fused_layer_norm: true\nfused_softmax: true\n"
                                                    "fused_bias_gelu: true\nfused_dropout_add: false\n"));
  expect_same_trace(generate(kLlama), generate(kLlama + "fused_layer_norm: true\nfused_softmax: true\n"
                                                        "fused_swiglu: false\n"));
  EXPECT_EQ(generate(kGpt).description.find("fused"), std::string::npos);
  EXPECT_NE(generate(kGpt + "fused_softmax: false\nfused_layer_norm: false\n").description.find(
                ", unfused norms, unfused softmax"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------
// fused_layer_norm

TEST(FusedKernels, UnfusedLayerNormSavesByHand) {
  // Fused, each LayerNorm keeps its input (2 sbh) and fp32 mean and rstd (8 sb): Korthikanti's
  // 34 sbh + 5 as^2 b plus 16 sb per layer. BertLayerNorm keeps x - mean twice and the
  // normalised x (2 sbh each) and the std (2 sb), not its input: per layer 4 sbh + 16 sb
  // become 12 sbh + 4 sb. The blocks' output is still saved, by the loss (2 sbh). The first
  // norm's input (the blocks' input) needs no gradient: only the weight's factor, the
  // normalised x, is kept there, as autograd keeps nothing for a gradient nobody needs.
  EXPECT_EQ(saved_activation_bytes(generate(kGpt)), L * (34 * s * b * h + 5 * a * s * s * b + 16 * s * b));
  const Trace t = generate(kGpt + "fused_layer_norm: false\n");
  EXPECT_EQ(saved_activation_bytes(t),
            L * (42 * s * b * h + 5 * a * s * s * b + 4 * s * b) + 2 * s * b * h - (4 * s * b * h + 2 * s * b));
  EXPECT_EQ(buffer_named(t, "transformer.h.1.ln_1.sqrt.out").bytes, s * b * 2);
  EXPECT_NO_THROW(validate(t, "x"));

  // One kernel forward reads x, weight and bias and writes y, mean and rstd: 2E + 2h
  // elements and 8 bytes per row. Unfused, ten ops over E = sbh elements and sb rows:
  // mean E + T, sub 2E + T, pow 2E, var E + T, sub 2E + T, add eps 2T, sqrt 2T, divide
  // 2E + T, weight 2E + h, bias 2E + h: 14E + 9T + 2h elements.
  const double e = s * b * h, rows = s * b;
  const Ops fused = ops_under(generate(kGpt), "transformer.h.1.ln_1", Phase::forward);
  EXPECT_EQ(fused.count, 1u);
  EXPECT_DOUBLE_EQ(fused.bytes, (2 * e + 2 * h) * 2 + 8 * rows);
  const Ops unfused = ops_under(t, "transformer.h.1.ln_1", Phase::forward);
  EXPECT_EQ(unfused.count, 10u);
  EXPECT_DOUBLE_EQ(unfused.bytes, (14 * e + 9 * rows + 2 * h) * 2);
  // Backward: one kernel, against a backward per node (bias, weight, divide, sqrt, the two
  // subtractions, the two means and the square), the sum of u's two gradients, and x's
  // three gradients summed into the one the residual already gave it (here one op each).
  EXPECT_EQ(ops_under(generate(kGpt), "transformer.h.1.ln_1", Phase::backward).count, 2u);
  EXPECT_EQ(ops_under(t, "transformer.h.1.ln_1", Phase::backward).count, 13u);
}

TEST(FusedKernels, UnfusedRmsNormKeepsAnFp32Copy) {
  // Fused, each RMSNorm keeps its input (2 Th bytes in bf16) and an fp32 rstd (4 T). Hugging
  // Face's eager LlamaRMSNorm keeps the fp32 copy of the input (4 Th), the fp32 rstd and the
  // normalised input in bf16 (2 Th): 4 Th more per norm, two per layer and the final one.
  const std::uint64_t th = T * kLlamaHidden;
  const Trace fused = generate(kLlama), t = generate(kLlama + "fused_layer_norm: false\n");
  EXPECT_EQ(saved_activation_bytes(t) - saved_activation_bytes(fused), (2 * L + 1) * 4 * th);
  EXPECT_EQ(buffer_named(t, "model.layers.0.input_layernorm.to_fp32.out").bytes, 4 * th);
  EXPECT_EQ(buffer_named(t, "model.layers.0.input_layernorm.rsqrt.out").bytes, 4 * T);
  EXPECT_EQ(buffer_named(t, "model.layers.0.input_layernorm.to_dtype.out").bytes, 2 * th);
  EXPECT_EQ(t.parameters, fused.parameters);
  EXPECT_NO_THROW(validate(t, "x"));
  // Eight ops forward (cast, square, mean, add eps, rsqrt, product, cast, weight) for one.
  EXPECT_EQ(ops_under(fused, "model.layers.0.input_layernorm", Phase::forward).count, 1u);
  EXPECT_EQ(ops_under(t, "model.layers.0.input_layernorm", Phase::forward).count, 8u);
  // In fp32 the casts are no ops and x itself is the fp32 input: 4 Th more per norm still
  // (the normalised input, now fp32), with six ops.
  const std::string fp32 = with_dtype(kLlama, "fp32");
  const Trace f32 = generate(fp32 + "fused_layer_norm: false\n");
  EXPECT_EQ(saved_activation_bytes(f32) - saved_activation_bytes(generate(fp32)), (2 * L + 1) * 4 * th);
  EXPECT_EQ(ops_under(f32, "model.layers.0.input_layernorm", Phase::forward).count, 6u);
  EXPECT_EQ(find_buffer(f32, "model.layers.0.input_layernorm.to_fp32.out"), nullptr);
}

// ---------------------------------------------------------------------------------------
// fused_softmax

TEST(FusedKernels, UnfusedSoftmaxKeepsFp32Probabilities) {
  // The fused kernel keeps its fp16 output (2 as^2 b); Megatron's unfused path in fp32 keeps
  // the fp32 softmax output (4 as^2 b) instead. With dropout the fp16 cast dies in it: 5
  // as^2 b per layer become 7. Without dropout probs v keeps the cast too: 2 become 6.
  const std::string unfused = kGpt + "fused_softmax: false\n";
  const Trace t = generate(unfused);
  EXPECT_EQ(saved_activation_bytes(t), L * (34 * s * b * h + 7 * a * s * s * b + 16 * s * b));
  EXPECT_EQ(saved_activation_bytes(generate(unfused + "dropout: 0\n")),
            L * (32 * s * b * h + 6 * a * s * s * b + 16 * s * b));
  EXPECT_EQ(saved_activation_bytes(generate(kGpt + "dropout: 0\n")),
            L * (32 * s * b * h + 2 * a * s * s * b + 16 * s * b));
  // In fp32 nothing is cast: the same bytes saved as fused.
  EXPECT_EQ(saved_activation_bytes(generate(with_dtype(unfused, "fp32"))),
            saved_activation_bytes(generate(with_dtype(kGpt, "fp32"))));
  // One causal bool mask, seq x seq, an input every layer's mask fill reads.
  const Buffer& mask = buffer_named(t, "attention_mask");
  EXPECT_EQ(mask.bytes, s * s);
  EXPECT_EQ(mask.category, Category::input);
  EXPECT_NO_THROW(validate(t, "x"));

  // Bytes moved, A = as^2 b elements. Fused: read 2A, write 2A forward; read the gradient
  // and the output, write 2A backward. Unfused: cast 2A + 4A, scale 4A + 4A, mask fill in
  // place 2 x 4A + the mask, softmax 4A + 4A, cast back 4A + 2A; backward the same five
  // in reverse, the softmax reading 8A and writing 4A, the mask fill's reading the mask.
  const double A = a * s * s * b;
  const std::string p = "transformer.h.1.attn.";
  const Ops fwd_fused = ops_named(generate(kGpt), {p + "softmax"}, Phase::forward);
  const Ops bwd_fused = ops_named(generate(kGpt), {p + "softmax.backward"}, Phase::backward);
  EXPECT_DOUBLE_EQ(fwd_fused.bytes, 4 * A);
  EXPECT_DOUBLE_EQ(bwd_fused.bytes, 6 * A);
  const Ops fwd = ops_named(t, {p + "to_fp32", p + "scale", p + "mask", p + "softmax", p + "to_dtype"}, Phase::forward);
  const Ops bwd = ops_named(t,
                            {p + "to_dtype.backward", p + "softmax.backward", p + "mask.backward",
                             p + "scale.backward", p + "to_fp32.backward"},
                            Phase::backward);
  EXPECT_DOUBLE_EQ(fwd.bytes, 36 * A + s * s);
  EXPECT_DOUBLE_EQ(bwd.bytes, 40 * A + s * s);
  EXPECT_EQ(ops_of_kind(t, "softmax"), ops_of_kind(generate(kGpt), "softmax"));
}

TEST(FusedKernels, UnfusedSoftmaxWithSelectiveRecompute) {
  // Selective recomputation keeps no seq x seq tensor either way; the forward, its rerun
  // in the backward and the backward each have four ops more (five for the softmax alone).
  const std::string sel = kGpt + "attention_impl: selective\n";
  const Trace fused = generate(sel), t = generate(sel + "fused_softmax: false\n");
  EXPECT_EQ(saved_activation_bytes(t), saved_activation_bytes(fused));
  EXPECT_EQ(t.ops.size() - fused.ops.size(), L * 3 * 4);
  EXPECT_EQ(op_named(t, "transformer.h.0.attn.recompute.mask").phase, Phase::backward);
  EXPECT_NO_THROW(validate(t, "x"));
  // BERT's padding mask: batch x seq x seq.
  const Trace bert = generate("model: bert\nseq_len: 16\nbatch: 2\nfused_softmax: false\n");
  EXPECT_EQ(buffer_named(bert, "attention_mask").bytes, 2u * 16 * 16);
}

// ---------------------------------------------------------------------------------------
// fused_swiglu

TEST(FusedKernels, FusedSwigluKeepsThreeIntermediatesInsteadOfFour) {
  // Hugging Face's SwiGLU keeps gate, silu(gate), up and their product (the down
  // projection's input): 4 f per token. Megatron's fused kernel keeps the fc1 output
  // [gate | up] (2 f) and its result (f): 3 f. bf16: 2 T f bytes fewer per layer.
  const std::uint64_t tf = T * kLlamaFfn;
  const Trace hf = generate(kLlama), t = generate(kLlama + "fused_swiglu: true\n");
  EXPECT_EQ(saved_activation_bytes(hf) - saved_activation_bytes(t), L * 2 * tf);
  const std::string p = "model.layers.0.mlp.";
  EXPECT_EQ(buffer_named(t, p + "gate_up_proj.out").bytes, 2 * 2 * tf);
  EXPECT_EQ(buffer_named(t, p + "act_fn.out").bytes, 2 * tf);
  EXPECT_EQ(buffer_named(t, p + "gate_up_proj.weight").bytes, 2 * 2 * kLlamaFfn * kLlamaHidden);
  EXPECT_EQ(t.parameters, hf.parameters);
  EXPECT_EQ(op_named(t, p + "act_fn").kind, "swiglu");
  EXPECT_NO_THROW(validate(t, "x"));

  // The MLP's ops: gate, silu, up, product, down (and the residual add) forward, against
  // gate_up, swiglu, down.
  // The activation's bytes: silu (read and write T f) and product (read 2 T f, write T f),
  // 5 T f, against 3 T f (read 2 T f, write T f); backward, silu (3 T f) and product (read
  // 3 T f, write 2 T f), 8 T f, against read 3 T f and write 2 T f, 5 T f.
  EXPECT_EQ(ops_under(hf, "model.layers.0.mlp", Phase::forward).count, 6u);
  EXPECT_EQ(ops_under(t, "model.layers.0.mlp", Phase::forward).count, 4u);
  EXPECT_DOUBLE_EQ(ops_named(hf, {p + "act_fn", p + "mul"}, Phase::forward).bytes, 5.0 * tf * 2);
  EXPECT_DOUBLE_EQ(ops_named(t, {p + "act_fn"}, Phase::forward).bytes, 3.0 * tf * 2);
  EXPECT_DOUBLE_EQ(ops_named(hf, {p + "act_fn.backward", p + "mul.backward"}, Phase::backward).bytes, 8.0 * tf * 2);
  EXPECT_DOUBLE_EQ(ops_named(t, {p + "act_fn.backward"}, Phase::backward).bytes, 5.0 * tf * 2);
  // Backward: down, product, up, silu, gate, and the sum of gate's and up's input
  // gradients, against down, the kernel and gate_up; one optimizer step fewer.
  EXPECT_EQ(ops_under(hf, "model.layers.0.mlp", Phase::backward).count, 6u);
  EXPECT_EQ(ops_under(t, "model.layers.0.mlp", Phase::backward).count, 3u);
  EXPECT_EQ(hf.ops.size() - t.ops.size(), L * (2 + 3 + 1));
}

TEST(FusedKernels, FusedSwigluInEveryExpert) {
  const std::string moe = kLlama + "num_experts: 4\ntop_k: 2\nnum_shared_experts: 1\nmoe_intermediate: 32\n";
  const Trace t = generate(moe + "fused_swiglu: true\n");
  EXPECT_EQ(op_named(t, "model.layers.0.mlp.experts.3.act_fn").kind, "swiglu");
  EXPECT_EQ(op_named(t, "model.layers.0.mlp.shared_experts.act_fn").kind, "swiglu");
  EXPECT_EQ(t.parameters, generate(moe).parameters);
  EXPECT_NO_THROW(validate(t, "x"));
  const Trace mixtral = generate(kLlama + "num_experts: 4\nfused_swiglu: true\n");
  EXPECT_NE(find_buffer(mixtral, "model.layers.1.block_sparse_moe.experts.0.w13.weight"), nullptr);
}

// ---------------------------------------------------------------------------------------
// fused_bias_gelu

TEST(FusedKernels, UnfusedBiasGeluAddsTheBiasInAKernelOfItsOwn) {
  // Either way the GeLU keeps its input, f per token: the same bytes saved.
  const Trace fused = generate(kGpt), t = generate(kGpt + "fused_bias_gelu: false\n");
  EXPECT_EQ(saved_activation_bytes(t), saved_activation_bytes(fused));
  EXPECT_EQ(t.parameters, fused.parameters);
  EXPECT_NO_THROW(validate(t, "x"));
  const std::string p = "transformer.h.0.mlp.c_fc";
  EXPECT_EQ(op_named(t, p + ".bias_add").kind, "add");
  EXPECT_EQ(op_named(t, p + ".bias_add.backward").kind, "sum");
  // One op more forward (the bias add) and backward (the bias's sum over the rows) per
  // layer. Bytes, T = sb tokens: the add reads T f + f and writes T f where the GEMM read
  // the bias (f); the sum reads T f and writes the bias gradient the GEMM's backward wrote.
  EXPECT_EQ(t.ops.size() - fused.ops.size(), L * 2);
  const double tf = s * b * f;
  const Ops fwd_fused = ops_under(fused, "transformer.h.0.mlp", Phase::forward);
  const Ops fwd = ops_under(t, "transformer.h.0.mlp", Phase::forward);
  EXPECT_EQ(fwd.count, fwd_fused.count + 1);
  EXPECT_DOUBLE_EQ(fwd.bytes - fwd_fused.bytes, 2 * tf * 2);
  EXPECT_DOUBLE_EQ(ops_under(t, "transformer.h.0.mlp", Phase::backward).bytes -
                       ops_under(fused, "transformer.h.0.mlp", Phase::backward).bytes,
                   tf * 2);
}

TEST(FusedKernels, FusedDropoutAddIsOneKernelKeepingTheMask) {
  // Megatron's bias_dropout_add_fusion: after each sublayer one kernel reads the sublayer's
  // output and the residual and writes the sum and the bool mask, where the dropout wrote a
  // dropped-out copy (T h in, T h + T h/2 out, as bytes of fp16: T = s b tokens) and the add
  // read it with the residual. The mask is what either keeps; the backward is the same.
  const Trace t = generate(kGpt), fused = generate(kGpt + "fused_dropout_add: true\n");
  EXPECT_EQ(saved_activation_bytes(fused), saved_activation_bytes(t));
  EXPECT_NO_THROW(validate(fused, "x"));
  EXPECT_NE(fused.description.find(", fused dropout-add"), std::string::npos) << fused.description;
  EXPECT_EQ(op_named(fused, "transformer.h.0.attn.residual").kind, "dropout_add");
  EXPECT_EQ(op_named(fused, "transformer.h.0.mlp.residual").kind, "dropout_add");
  EXPECT_EQ(op_named(fused, "transformer.h.0.attn.residual.backward").kind, "dropout_backward");
  EXPECT_EQ(ops_of_kind(fused, "dropout_add"), 2 * L);
  EXPECT_EQ(ops_of_kind(t, "add") - ops_of_kind(fused, "add"), 2 * L);
  EXPECT_EQ(t.ops.size() - fused.ops.size(), 2 * L);
  const double th = s * b * h;
  const Ops fwd = ops_under(t, "transformer.h.0", Phase::forward);
  const Ops fwd_fused = ops_under(fused, "transformer.h.0", Phase::forward);
  EXPECT_EQ(fwd.count - fwd_fused.count, 2u);
  // Unfused per sublayer: dropout 2 + 2 + 1, add 2 + 2 + 2 bytes a token's element (11);
  // fused: 2 + 2 in, 2 + 1 out (7).
  EXPECT_DOUBLE_EQ(fwd.bytes - fwd_fused.bytes, 2 * 4 * th);
  const Ops bwd = ops_under(t, "transformer.h.0", Phase::backward);
  const Ops bwd_fused = ops_under(fused, "transformer.h.0", Phase::backward);
  EXPECT_EQ(bwd.count, bwd_fused.count);
  EXPECT_DOUBLE_EQ(bwd.bytes, bwd_fused.bytes);
  // Without dropout the kernel is the add: the ops are the unfused ones.
  const Trace plain = generate(kGpt + "dropout: 0\n"), plain_fused = generate(kGpt + "dropout: 0\nfused_dropout_add: true\n");
  EXPECT_EQ(ops_of_kind(plain_fused, "dropout_add"), 0u);
  ASSERT_EQ(plain.ops.size(), plain_fused.ops.size());
  for (std::size_t i = 0; i < plain.ops.size(); ++i) {
    EXPECT_EQ(plain.ops[i].kind, plain_fused.ops[i].kind) << plain.ops[i].name;
    EXPECT_EQ(plain.ops[i].bytes_moved, plain_fused.ops[i].bytes_moved) << plain.ops[i].name;
  }
}

TEST(FusedKernels, MegatronSoftmaxRunsItsKernelOnlyWhereTheKernelTakesTheShape) {
  // FusedScaleMaskSoftmax.is_kernel_available: fp16 or bf16, 16 < seq <= 4096, seq a
  // multiple of 4, batch x heads a multiple of 4 and, causal, of the kernel's rows per block
  // (4 past 128 keys, 8 up to 128); a padding mask needs seq a multiple of it instead.
  EXPECT_FALSE(megatron_softmax_kernel_takes(DType::fp16, 1, 2, 1024, true));  // 16 heads, tp 8
  EXPECT_TRUE(megatron_softmax_kernel_takes(DType::fp16, 2, 2, 1024, true));
  EXPECT_TRUE(megatron_softmax_kernel_takes(DType::bf16, 1, 4, 1024, true));
  EXPECT_FALSE(megatron_softmax_kernel_takes(DType::fp32, 1, 4, 1024, true));
  EXPECT_FALSE(megatron_softmax_kernel_takes(DType::fp16, 1, 4, 64, true));
  EXPECT_TRUE(megatron_softmax_kernel_takes(DType::fp16, 1, 8, 64, true));
  EXPECT_TRUE(megatron_softmax_kernel_takes(DType::fp16, 1, 4, 64, false));
  EXPECT_FALSE(megatron_softmax_kernel_takes(DType::fp16, 1, 4, 16, true));
  EXPECT_TRUE(megatron_softmax_kernel_takes(DType::fp16, 1, 4, 4096, true));
  EXPECT_FALSE(megatron_softmax_kernel_takes(DType::fp16, 1, 4, 4100, true));
  EXPECT_FALSE(megatron_softmax_kernel_takes(DType::fp16, 1, 4, 1022, true));

  // kGpt: 4 heads, seq 32 (8 rows a block). Batch 3 is 12 rows: the unfused path, ops and
  // saved bytes as fused_softmax: false; batch 2 is 8 rows: the kernel, as true.
  auto same_ops = [](Trace x, const Trace& y) {
    x.description = y.description;
    expect_same_trace(x, y);
  };
  for (const std::string impl : {"materialized", "selective"}) {
    SCOPED_TRACE(impl);
    const std::string b3 = kGpt + "attention_impl: " + impl + "\n";
    std::string b2 = b3;
    b2.replace(b2.find("batch: 3"), 8, "batch: 2");
    same_ops(generate(b3 + "fused_softmax: megatron\n"), generate(b3 + "fused_softmax: false\n"));
    same_ops(generate(b2 + "fused_softmax: megatron\n"), generate(b2));
    EXPECT_NE(generate(b2 + "fused_softmax: megatron\n").description.find("Megatron's softmax kernel"),
              std::string::npos);
  }
  EXPECT_EQ(error_of("model: gpt\nfused_softmax: megatrn\n"),
            "t.yaml:2:16: fused_softmax: expected one of true, false, megatron, got 'megatrn'; did you mean "
            "'megatron'?");
}

// ---------------------------------------------------------------------------------------
// Bad specs

TEST(FusedKernels, KeysWithNothingToActOnAreLocated) {
  EXPECT_EQ(error_of("model: gpt\nattention_impl: fused\nfused_softmax: false\n"),
            "t.yaml:3:16: fused_softmax: applies only with attention_impl materialized or selective "
            "(FlashAttention's kernel holds the softmax)");
  EXPECT_EQ(error_of("model: llama\nfused_swiglu: yes\n"),
            "t.yaml:2:15: fused_swiglu: expected true or false, got 'yes'");
  const std::string swiglu = error_of("model: gpt\nfused_swiglu: true\n");
  EXPECT_EQ(swiglu.rfind("t.yaml:2:1: fused_swiglu: unknown key 'fused_swiglu'", 0), 0u) << swiglu;
  const std::string dropout_add = error_of("model: llama\nfused_dropout_add: true\n");
  EXPECT_EQ(dropout_add.rfind("t.yaml:2:1: fused_dropout_add: unknown key 'fused_dropout_add'", 0), 0u) << dropout_add;
  const std::string gelu = error_of("model: llama\nfused_bias_gelu: false\n");
  EXPECT_EQ(gelu.rfind("t.yaml:2:1: fused_bias_gelu: unknown key 'fused_bias_gelu'", 0), 0u) << gelu;
}

TEST(FusedKernels, HuggingFaceConfigsTakeTheirFamilysOptions) {
  const std::string dir = std::string(MEMSIM_SOURCE_DIR) + "/tests/data/hf/";
  const std::string gpt2 = "model: hf\nconfig: " + dir + "gpt2.json\nseq_len: 64\nbatch: 1\n";
  const std::string qwen2 = "model: hf\nconfig: " + dir + "qwen2-0.5b.json\nseq_len: 64\nbatch: 1\n";
  EXPECT_EQ(op_named(workload(gpt2 + "fused_bias_gelu: false\n"), "transformer.h.0.mlp.c_fc.bias_add").kind, "add");
  EXPECT_NE(find_buffer(workload(qwen2 + "fused_swiglu: true\n"), "model.layers.0.mlp.gate_up_proj.weight"), nullptr);
  EXPECT_EQ(workload_error(gpt2 + "fused_swiglu: true\n"),
            "w.yaml:5:15: fused_swiglu: applies only to the Llama family's SwiGLU, not GPT2LMHeadModel");
  EXPECT_EQ(op_named(workload(gpt2 + "fused_dropout_add: true\n"), "transformer.h.0.mlp.residual").kind,
            "dropout_add");
  EXPECT_EQ(workload_error(qwen2 + "fused_dropout_add: true\n"),
            "w.yaml:5:20: fused_dropout_add: applies only to the dropouts of GPT-2 and BERT, not Qwen2ForCausalLM");
  EXPECT_EQ(workload_error(qwen2 + "fused_bias_gelu: false\n"),
            "w.yaml:5:18: fused_bias_gelu: applies only to the GeLU MLP of GPT-2 and BERT, not Qwen2ForCausalLM");
  // hf's attention is FlashAttention unless told otherwise.
  EXPECT_EQ(workload_error(qwen2 + "fused_softmax: false\n"),
            "w.yaml:5:16: fused_softmax: applies only with attention_impl materialized or selective "
            "(FlashAttention's kernel holds the softmax)");
  EXPECT_EQ(workload_error(qwen2 + "fused_softmax: false\nattention_impl: materialized\n"), "(no error)");
}
