// The CNN generators (alexnet, vgg, resnet in both families, googlenet, mobilenet_v2,
// densenet) and the options every model takes: parameter counts against torchvision,
// ResNet-50 FLOPs against the published figure, mixed precision's model state, and the
// baseline peak with in-place activations off and with im2col, worked out by hand.
#include <gtest/gtest.h>

#include <string>

#include "sim/core/config.h"
#include "sim/exec/replay.h"
#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/workload/analysis.h"
#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"
#include "sim/workload/op_kinds.h"
#include "sim/workload/trace.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

// What every generated trace must satisfy.
void expect_well_formed(const Trace& t) {
  EXPECT_NO_THROW(validate(t, "x"));
  const Liveness l = compute_liveness(t);
  ASSERT_EQ(l.last_use.size(), t.buffers.size());
  for (const Op& op : t.ops) {
    EXPECT_TRUE(is_known_op_kind(op.kind)) << op.kind;
    EXPECT_EQ(op.bytes_moved, bytes_moved(t, op)) << op.name;
  }
  for (const Buffer& b : t.buffers) {
    EXPECT_GT(b.bytes, 0u) << b.name;
    if (b.category == Category::gradient) {
      ASSERT_NE(l.last_use[b.id], kNoOp) << b.name;
      EXPECT_EQ(t.ops[l.last_use[b.id]].phase, Phase::optimizer) << b.name;
    }
  }
}

double forward_flops(const Trace& t, bool convs_and_linears_only) {
  double sum = 0;
  for (const Op& op : t.ops)
    if (op.phase == Phase::forward &&
        (!convs_and_linears_only || op.kind == "conv2d" || op.kind == "linear"))
      sum += op.flops;
  return sum;
}

double phase_flops(const Trace& t, Phase p) {
  double sum = 0;
  for (const Op& op : t.ops)
    if (op.phase == p) sum += op.flops;
  return sum;
}

}  // namespace

TEST(CnnModels, Registered) {
  for (const char* name : {"alexnet", "vgg", "googlenet", "mobilenet_v2", "densenet"}) {
    const ModelInfo* m = find_model(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_FALSE(m->description.empty());
  }
}

TEST(CnnModels, ParameterCountsMatchTorchvision) {
  const std::pair<const char*, std::uint64_t> expected[] = {
      {"model: alexnet", 61'100'840},
      {"model: vgg\ndepth: 11", 132'863'336},
      {"model: vgg\ndepth: 13", 133'047'848},
      {"model: vgg\ndepth: 16", 138'357'544},
      {"model: vgg\ndepth: 19", 143'667'240},
      {"model: googlenet", 6'624'904},  // aux_logits=False
      {"model: mobilenet_v2", 3'504'872},
      {"model: densenet\ndepth: 121", 7'978'856},
      {"model: densenet\ndepth: 161", 28'681'000},
      {"model: densenet\ndepth: 169", 14'149'480},
      {"model: densenet\ndepth: 201", 20'013'928},
  };
  for (auto [spec, count] : expected) {
    Trace t = generate(std::string(spec) + "\nbatch: 2\n");
    EXPECT_EQ(t.parameters, count) << spec;
    EXPECT_EQ(parameter_count(t, DType::fp32), count) << spec;
    expect_well_formed(t);
  }
}

TEST(CnnModels, CifarResnetParameterCounts) {
  // resnet20 (basic blocks, option-A shortcuts without parameters), per layer by hand:
  //   conv1 3x16x9 = 432, bn1 32
  //   stage 1: 6 convs 16x16x9 = 6 x 2,304 = 13,824; 6 BN x 32 = 192
  //   stage 2: 16x32x9 = 4,608 + 5 x 32x32x9 = 46,080; 6 BN x 64 = 384
  //   stage 3: 32x64x9 = 18,432 + 5 x 64x64x9 = 184,320; 6 BN x 128 = 768
  //   fc 64x10 + 10 = 650                                           total 269,722
  Trace r20 = generate("model: resnet\ndepth: 20\nbatch: 2\n");
  EXPECT_EQ(r20.parameters, 269'722u);
  EXPECT_EQ(r20.name, "resnet20");
  EXPECT_EQ(buffer_named(r20, "input").bytes, 2u * 3 * 32 * 32 * 4);
  EXPECT_EQ(buffer_named(r20, "layer3.2.conv2.out").bytes, 2u * 64 * 8 * 8 * 4);
  // The option-A shortcut: a strided, zero-padded copy, 16 -> 32 channels, 32 -> 16 pixels.
  EXPECT_EQ(op_named(r20, "layer2.0.shortcut").kind, "pad");
  EXPECT_EQ(buffer_named(r20, "layer2.0.shortcut.out").bytes, 2u * 32 * 16 * 16 * 4);
  EXPECT_EQ(buffer_named(r20, "layer2.0.shortcut.grad_input").bytes, 2u * 16 * 32 * 32 * 4);
  expect_well_formed(r20);

  // ResNet-1001: pre-activation bottlenecks, n = (1001 - 2) / 9 = 111 per stage; per block
  // with input width i and planes p: BN 2i, conv1 ip, BN 2p, conv2 9p^2, BN 2p, conv3 4p^2,
  // and a projection 4ip in the first block of a stage.
  //   stage 1 (p 16): first 4,704 (i 16) + 110 x 4,544 (i 64)   =   504,544
  //   stage 2 (p 32): first 23,808 (i 64) + 110 x 17,792        = 1,980,928
  //   stage 3 (p 64): first 94,720 (i 128) + 110 x 70,400       = 7,838,720
  //   conv1 432, final BN 512, fc 256x10 + 10 = 2,570           total 10,327,706
  Trace r1001 = generate("model: resnet\ndepth: 1001\nbatch: 2\n");
  EXPECT_EQ(r1001.parameters, 10'327'706u);
  EXPECT_EQ(r1001.description,
            "resnet1001 (CIFAR, pre-activation bottleneck; batch 2, fp32, momentum)");
  EXPECT_EQ(buffer_named(r1001, "layer3.110.conv3.out").bytes, 2u * 256 * 8 * 8 * 4);
  expect_well_formed(r1001);

  // The other CIFAR depths of He et al.: 6n+2 basic; 164 with bottlenecks when asked.
  EXPECT_EQ(generate("model: resnet\ndepth: 110\n").parameters, 1'727'962u);
  EXPECT_EQ(generate("model: resnet\ndepth: 164\nblock: preact_bottleneck\n").parameters,
            1'703'258u);
  // An ImageNet depth can be asked for in its CIFAR form: 50 = 6 x 8 + 2.
  EXPECT_EQ(generate("model: resnet\ndepth: 50\nvariant: cifar\n").name, "resnet50");
  EXPECT_EQ(generate("model: resnet\ndepth: 50\n").parameters, 25'557'032u);
}

TEST(CnnModels, Resnet50ForwardFlopsMatchPublished) {
  // torchvision lists 4.09 GFLOPS for ResNet-50: multiply-adds of the convolutions and the
  // fc at batch 1. We count 2 FLOPs per multiply-add, so halve; batch 2 halves again.
  Trace t = generate("model: resnet\ndepth: 50\nbatch: 2\n");
  const double macs_per_sample = forward_flops(t, true) / 2 / 2;
  EXPECT_NEAR(macs_per_sample / 4.09e9, 1.0, 0.02) << macs_per_sample;
  // With batch norm, ReLU, pooling, the add and the loss, still within 2%.
  const double all_per_sample = forward_flops(t, false) / 2 / 2;
  EXPECT_NEAR(all_per_sample / 4.09e9, 1.0, 0.02) << all_per_sample;
  EXPECT_GT(all_per_sample, macs_per_sample);
  // Backward: input and weight gradients each cost a forward (conv1's input gradient is
  // not computed); between 1.9x and 2.1x the forward.
  const double ratio = phase_flops(t, Phase::backward) / phase_flops(t, Phase::forward);
  EXPECT_GT(ratio, 1.9);
  EXPECT_LT(ratio, 2.1);
  std::printf("resnet50 forward: %.4g MACs/sample (convs + fc), %.4g all ops; "
              "backward/forward %.3f\n", macs_per_sample, all_per_sample, ratio);
}

TEST(CnnModels, LayerShapes) {
  Trace a = generate("model: alexnet\nbatch: 2\n");
  // conv 11x11 stride 4 pad 2 on 224: (224 + 4 - 11) / 4 + 1 = 55; pools to 27, 13, 6.
  EXPECT_EQ(buffer_named(a, "features.0.out").bytes, 2u * 64 * 55 * 55 * 4);
  EXPECT_EQ(buffer_named(a, "features.2.out").bytes, 2u * 64 * 27 * 27 * 4);
  EXPECT_EQ(buffer_named(a, "features.12.out").bytes, 2u * 256 * 6 * 6 * 4);
  // Dropout keeps a bool mask of its input's size for the backward, and nothing else.
  const Buffer& mask = buffer_named(a, "classifier.0.mask");
  EXPECT_EQ(mask.bytes, 2u * 9216);
  const Op& drop_bw = op_named(a, "classifier.0.backward");
  EXPECT_EQ(drop_bw.kind, "dropout_backward");
  EXPECT_EQ(drop_bw.inputs.size(), 2u);
  EXPECT_EQ(drop_bw.inputs[1], mask.id);

  // GoogLeNet's ceil-mode pools: 112 -> 56 -> 28 -> 14 -> 7; inception outputs by cat.
  Trace g = generate("model: googlenet\nbatch: 1\n");
  EXPECT_EQ(buffer_named(g, "maxpool1.out").bytes, 64u * 56 * 56 * 4);
  EXPECT_EQ(buffer_named(g, "inception3a.cat.out").bytes, 256u * 28 * 28 * 4);
  EXPECT_EQ(buffer_named(g, "inception4e.cat.out").bytes, 832u * 14 * 14 * 4);
  EXPECT_EQ(buffer_named(g, "maxpool4.out").bytes, 832u * 7 * 7 * 4);
  EXPECT_EQ(buffer_named(g, "inception5b.cat.out").bytes, 1024u * 7 * 7 * 4);
  EXPECT_EQ(op_named(g, "inception3a.cat").inputs.size(), 4u);

  // DenseNet: each layer's cat holds every earlier map of its block: the 6th layer of block
  // 1 sees 64 + 5 x 32 = 224 channels at 56 x 56; the block ends at 256.
  Trace d = generate("model: densenet\nbatch: 1\n");
  EXPECT_EQ(buffer_named(d, "features.denseblock1.denselayer6.cat.out").bytes, 224u * 56 * 56 * 4);
  EXPECT_EQ(buffer_named(d, "features.denseblock1.cat.out").bytes, 256u * 56 * 56 * 4);
  EXPECT_EQ(buffer_named(d, "features.transition1.pool.out").bytes, 128u * 28 * 28 * 4);
  EXPECT_EQ(buffer_named(d, "features.denseblock4.cat.out").bytes, 1024u * 7 * 7 * 4);
  // The cat is saved by the batch norm after it, until that norm's backward.
  const Liveness l = compute_liveness(d);
  EXPECT_EQ(d.ops[l.last_use[buffer_named(d, "features.denseblock1.denselayer6.cat.out").id]].name,
            "features.denseblock1.denselayer6.norm1.backward");

  // MobileNetV2: depthwise 3x3 (groups = 96) has 96 x 9 weights; the residual add is out of
  // place, into a new buffer.
  Trace mb = generate("model: mobilenet_v2\nbatch: 1\n");
  EXPECT_EQ(buffer_named(mb, "features.2.conv.1.0.weight").bytes, 96u * 9 * 4);
  EXPECT_EQ(op_named(mb, "features.3.add").outputs.size(), 1u);
  EXPECT_EQ(op_named(mb, "features.2.conv.0.2").kind, "relu6");
  EXPECT_EQ(buffer_named(mb, "features.18.0.out").bytes, 1280u * 7 * 7 * 4);
}

TEST(CnnModels, DenseNetSumsSlicedGradientsOutOfPlace) {
  // A layer's new maps feed every later cat of the block: the first gradient is a view into
  // the block cat's gradient; the second is summed into a new buffer of the maps' own size
  // (here layer 1's 32 maps, input 1 of layer 6's cat); later sums go in place into it.
  Trace d = generate("model: densenet\nbatch: 1\n");
  const Op& acc = op_named(d, "features.denseblock1.denselayer6.cat.1.accumulate_grad");
  ASSERT_EQ(acc.outputs.size(), 1u);
  EXPECT_EQ(d.buffers[acc.outputs[0]].bytes, 32u * 56 * 56 * 4);
  EXPECT_EQ(d.buffers[acc.inputs[0]].name, "features.transition1.norm.grad_input");
  const Op& next = op_named(d, "features.denseblock1.denselayer5.cat.1.accumulate_grad");
  EXPECT_TRUE(next.outputs.empty());
  EXPECT_EQ(next.updates, acc.outputs);
  expect_well_formed(d);
}

TEST(TrainingOptions, MixedPrecisionAdamKeeps16BytesPerParameter) {
  Trace t = generate("model: mobilenet_v2\nbatch: 2\ndtype: fp16\nmixed_precision: true\n"
                     "optimizer: adam\n");
  const std::uint64_t p = 3'504'872;
  EXPECT_EQ(t.parameters, p);
  // fp16 weight 2 + fp32 master 4; fp16 gradient 2; two fp32 moments 8.
  EXPECT_EQ(t.total_bytes(Category::weight), p * (2 + 4));
  EXPECT_EQ(t.total_bytes(Category::gradient), p * 2);
  EXPECT_EQ(t.total_bytes(Category::optimizer_state), p * 8);
  const std::uint64_t state = t.total_bytes(Category::weight) +
                              t.total_bytes(Category::gradient) +
                              t.total_bytes(Category::optimizer_state);
  EXPECT_EQ(state, 16 * p);
  EXPECT_EQ(t.description, "mobilenet_v2 (batch 2, fp16 mixed, adam)");
  // Activations are half; the step reads the half gradient and updates the half weight,
  // the fp32 master and the two fp32 moments.
  EXPECT_EQ(buffer_named(t, "features.0.0.out").bytes, 2u * 32 * 112 * 112 * 2);
  const Buffer& master = buffer_named(t, "features.0.0.weight.master");
  EXPECT_TRUE(master.persistent);
  EXPECT_EQ(master.bytes, 32u * 27 * 4);
  const Op& step = op_named(t, "features.0.0.weight.step");
  EXPECT_EQ(step.kind, "adam_step");
  EXPECT_EQ(step.dtype, DType::fp32);
  EXPECT_EQ(step.inputs, std::vector<BufferId>{buffer_named(t, "features.0.0.weight.grad").id});
  EXPECT_EQ(step.updates.size(), 4u);
  EXPECT_EQ(step.updates[1], master.id);
  expect_well_formed(t);

  // Pure half (no master copies): 2 + 2 + 4 bytes.
  Trace half = generate("model: mobilenet_v2\nbatch: 2\ndtype: bf16\noptimizer: adam\n");
  EXPECT_EQ(half.total_bytes(Category::weight) + half.total_bytes(Category::gradient) +
                half.total_bytes(Category::optimizer_state),
            8 * p);
}

TEST(TrainingOptions, AdamW) {
  Trace t = generate("model: alexnet\nbatch: 1\noptimizer: adamw\n");
  const Op& step = op_named(t, "features.0.weight.step");
  EXPECT_EQ(step.kind, "adamw_step");
  EXPECT_DOUBLE_EQ(step.flops, 14.0 * 64 * 3 * 11 * 11);
  EXPECT_EQ(t.total_bytes(Category::optimizer_state), 2u * 61'100'840 * 4);
  EXPECT_EQ(buffer_named(t, "features.0.weight.exp_avg_sq").category, Category::optimizer_state);
}

TEST(TrainingOptions, Im2colWorkspaceRule) {
  Trace t = generate("model: resnet\ndepth: 50\nbatch: 2\nconv_algo: im2col\n");
  // conv1: 3 x 7 x 7 rows by 112 x 112 columns per sample.
  EXPECT_EQ(op_named(t, "conv1").workspace_bytes, 2u * 3 * 49 * 112 * 112 * 4);
  EXPECT_EQ(op_named(t, "conv1.backward").workspace_bytes, 2u * 3 * 49 * 112 * 112 * 4);
  // 3x3 stride 2 in layer2.0: 128 x 9 rows, 28 x 28 columns.
  EXPECT_EQ(op_named(t, "layer2.0.conv2").workspace_bytes, 2u * 128 * 9 * 28 * 28 * 4);
  // A 1x1 stride-1 convolution is a GEMM on its input as it lies: no workspace; a strided
  // 1x1 (the downsample) gathers every other pixel: 256 rows by 28 x 28.
  EXPECT_EQ(op_named(t, "layer1.0.conv1").workspace_bytes, 0u);
  EXPECT_EQ(op_named(t, "layer2.0.downsample.0").workspace_bytes, 2u * 256 * 28 * 28 * 4);
  // Lowering writes the matrix and the GEMM reads it back.
  const Op& c = op_named(t, "layer2.0.conv2");
  EXPECT_DOUBLE_EQ(c.bytes_moved - 2.0 * c.workspace_bytes,
                   bytes_moved(t, c) - 2.0 * c.workspace_bytes);
  expect_well_formed(t);
  EXPECT_EQ(t.description, "resnet50 (batch 2, fp32, momentum, im2col)");
  // Depthwise: one group's C/groups = 1 channel lowered at a time.
  Trace mb = generate("model: mobilenet_v2\nbatch: 1\nconv_algo: im2col\n");
  EXPECT_EQ(op_named(mb, "features.2.conv.1.0").workspace_bytes, 1u * 9 * 56 * 56 * 4);
  // Direct is the default: no workspace anywhere.
  for (const Op& op : generate("model: resnet\ndepth: 18\nbatch: 1\n").ops)
    EXPECT_EQ(op.workspace_bytes, 0u) << op.name;
}

namespace {

// A small CNN, batch 1, fp32, plain SGD (no optimizer state):
//   input 1x1x8x8 -> conv1 3x3 pad 1 to 4 channels -> act -> conv2 3x3 pad 1 to 4 channels
//   -> act -> adaptive avgpool 1x1 -> linear 4 -> 2 (no bias) -> cross-entropy
// where act is ReLU or ReLU6, each asked for in place.
Trace small_cnn(bool relu6, bool inplace, ConvAlgo algo) {
  TrainingSettings s;
  s.batch = 1;
  s.optimizer = Optimizer::sgd;
  s.inplace = inplace;
  s.conv_algo = algo;
  ModelBuilder m(s);
  Value x = m.input("input", {1, 1, 8, 8}, DType::fp32);
  const Value labels = m.input("labels", {1}, DType::int64);
  auto act = [&](const std::string& name, Value v) {
    return relu6 ? m.relu6(name, v, true) : m.relu(name, v, true);
  };
  x = m.conv2d("conv1", x, 4, 3, 1, 1);
  x = act("act1", x);
  x = m.conv2d("conv2", x, 4, 3, 1, 1);
  x = act("act2", x);
  x = m.adaptive_avg_pool2d("avgpool", x, 1);
  x = m.flatten(x);
  x = m.linear("fc", x, 2, false);
  m.cross_entropy(x, labels);
  return m.finish("small", "small cnn");
}

}  // namespace

// Resident at the start: input 256, labels 8, conv1.weight 4x9x4 = 144, conv2.weight
// 4x36x4 = 576, fc.weight 8x4 = 32: 1,016 B. Each conv output, activation output and
// activation gradient is 4x8x8 fp32 = 1,024 B ("A" below). Live bytes after each op's
// outputs are allocated, then after its dead buffers are freed — in place:
//   conv1 +A 2,040 | act1 2,040 | conv2 +A 3,064 | act2 3,064 | avgpool +16 3,080
//   fc +8 3,088 | log_softmax +8 3,096 -> 3,088 (fc.out) | nll_loss +4 +4 3,096 -> 3,092 (loss)
//   nll_loss.backward +8 3,100 -> 3,088 (labels, total_weight)
//   log_softmax.backward +8 3,096 -> 3,080 | fc.backward +16 +32 3,128 -> 3,104
//   avgpool.backward +A 4,128 -> 4,112 | act2.backward +A 5,136 (the peak) -> 3,088
//   conv2.backward +A +576 4,688 -> 3,664 | act1.backward +A 4,688 -> 2,640 | ...
TEST(BaselinePeak, SmallCnnInPlaceByHand) {
  EXPECT_EQ(exec::baseline_peak_bytes(small_cnn(false, true, ConvAlgo::direct)), 5'136u);
  EXPECT_EQ(exec::baseline_peak_bytes(small_cnn(true, true, ConvAlgo::direct)), 5'136u);
}

// ReLU out of place saves its result, as in place: the conv output dies once the ReLU has
// read it, and only the forward holds one more A for a moment (act2: 4,088). The backward
// holds result, gradient and input gradient of act2 (3 A) on top of the same saved
// tensors, so the peak stays 5,136: out-of-place ReLU costs nothing at the peak here.
//
// ReLU6 out of place saves its input (hardtanh_backward's self) and its result is the next
// layer's saved input, so each activation keeps one more A until its backward:
//   conv1 +A 2,040 | act1 +A 3,064 | conv2 +A 4,088 | act2 +A 5,112 | avgpool 5,128
//   fc 5,136 | log_softmax 5,144 -> 5,136 | nll_loss 5,144 -> 5,140
//   nll_loss.backward 5,148 -> 5,136 | log_softmax.backward 5,144 -> 5,128
//   fc.backward 5,176 -> 5,152 | avgpool.backward +A 6,176 (the peak: the inputs and
//   outputs of act1 and act2, avgpool's input gradient, fc's 16 B input gradient and 32 B
//   weight gradient, 1,008 B resident) -> 5,136 | act2.backward +A 6,160 -> 4,112 | ...
// 6,176 - 5,136 = 1,040: one more A saved, plus the 16 B gradient of the pooled output,
// alive at avgpool.backward but no longer at act2.backward where the in-place peak is.
TEST(BaselinePeak, InPlaceOffByHand) {
  const Trace relu_off = small_cnn(false, false, ConvAlgo::direct);
  EXPECT_EQ(op_named(relu_off, "act1").outputs.size(), 1u);
  EXPECT_EQ(exec::baseline_peak_bytes(relu_off), 5'136u);
  const Trace relu6_off = small_cnn(true, false, ConvAlgo::direct);
  EXPECT_EQ(exec::baseline_peak_bytes(relu6_off), 6'176u);
  const Liveness l = compute_liveness(relu6_off);
  EXPECT_EQ(relu6_off.ops[l.last_use[buffer_named(relu6_off, "conv2.out").id]].name,
            "act2.backward");
}

// im2col: conv1's lowered input is 1 x (1 x 3 x 3) x (8 x 8) fp32 = 2,304 B, conv2's
// 1 x (4 x 3 x 3) x (8 x 8) = 9,216 B, for the forward and the backward. On the in-place
// walk above: conv1 2,040 + 2,304; conv2 3,064 + 9,216; conv2.backward 4,688 + 9,216 =
// 13,904, the new peak (conv1.backward: 2,784 + 2,304). 13,904 - 5,136 = 8,768.
TEST(BaselinePeak, Im2colByHand) {
  const Trace t = small_cnn(false, true, ConvAlgo::im2col);
  EXPECT_EQ(op_named(t, "conv2.backward").workspace_bytes, 9'216u);
  EXPECT_EQ(exec::baseline_peak_bytes(t), 13'904u);
}

TEST(BaselinePeak, HandWrittenTrace) {
  // Resident w (100, persistent) and x (10, input); op0 makes y (50) with 7 B workspace and
  // is x's last use; op1 makes z (5, never read) from y. Peak at op0: 110 + 50 + 7 = 167;
  // at op1 100 + 50 + 5 = 155.
  Trace t;
  const BufferId w = t.add_buffer("w", 100, Category::weight, true);
  const BufferId x = t.add_buffer("x", 10, Category::input);
  const BufferId y = t.add_buffer("y", 50, Category::activation);
  const BufferId z = t.add_buffer("z", 5, Category::activation);
  Op a;
  a.name = "a";
  a.inputs = {w, x};
  a.outputs = {y};
  a.workspace_bytes = 7;
  t.add_op(a);
  Op b;
  b.name = "b";
  b.inputs = {y};
  b.outputs = {z};
  t.add_op(b);
  EXPECT_EQ(exec::baseline_peak_bytes(t), 167u);
}

TEST(TrainingOptions, GeneratorsAreFast) {
  // ResNet-1001 has 9,685 ops; generating it is a matter of milliseconds (not timed here).
  Trace t = generate("model: resnet\ndepth: 1001\nbatch: 64\n");
  EXPECT_EQ(t.ops.size(), 9'685u);
}

TEST(TrainingOptions, BadSpecsAreLocated) {
  EXPECT_EQ(error_of("model: vgg\noptimizer: lamb\n"),
            "t.yaml:2:12: optimizer: expected one of sgd, momentum, adam, adamw, got 'lamb'");
  EXPECT_EQ(error_of("model: alexnet\nbatch: -4\n"),
            "t.yaml:2:8: batch: expected an integer from 1 to 1000000, got '-4'");
  EXPECT_EQ(error_of("model: vgg\ndepth: 17\n"),
            "t.yaml:2:8: depth: expected one of 11, 13, 16, 19, got '17'");
  EXPECT_EQ(error_of("model: densenet\ndepth: 100\n"),
            "t.yaml:2:8: depth: expected one of 121, 161, 169, 201, got '100'");
  EXPECT_EQ(error_of("model: resnet\ndepth: 51\n"),
            "t.yaml:2:8: depth: expected 18, 34, 50, 101 or 152 (imagenet), or a CIFAR depth "
            "6n+2 (basic blocks) or 9n+2 (pre-activation bottlenecks), got '51'");
  EXPECT_EQ(error_of("model: resnet\ndepth: 20\nvariant: imagenet\n"),
            "t.yaml:2:8: depth: expected one of 18, 34, 50, 101, 152 for variant imagenet, "
            "got '20'");
  EXPECT_EQ(error_of("model: resnet\ndepth: 1001\nblock: basic\n"),
            "t.yaml:2:8: depth: expected 6n+2 (8, 14, 20, 32, 44, 56, 110, ...) for basic "
            "blocks, got '1001'");
  EXPECT_EQ(error_of("model: resnet\ndepth: 50\nblock: basic\n"),
            "t.yaml:3:8: block: applies to variant cifar only (ImageNet depths fix the block)");
  EXPECT_EQ(error_of("model: resnet\nmixed_precision: true\n"),
            "t.yaml:2:18: mixed_precision: needs dtype fp16 or bf16, got fp32");
  EXPECT_EQ(error_of("model: resnet\nconv_algo: winograd\n"),
            "t.yaml:2:12: conv_algo: expected one of direct, im2col, got 'winograd'");
  EXPECT_EQ(error_of("model: googlenet\ninplace: maybe\n").substr(0, 21), "t.yaml:2:10: inplace:");
}
