// Model generators: parameter counts against torchvision, hand-worked FLOPs and sizes,
// autograd-faithful liveness, and located errors for bad parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/workload/analysis.h"
#include "sim/workload/models/models.h"
#include "sim/workload/trace.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

bool reads(const Op& op, BufferId b) {
  return std::find(op.inputs.begin(), op.inputs.end(), b) != op.inputs.end();
}

OpId last_forward_op(const Trace& t) {
  OpId last = kNoOp;
  for (const Op& op : t.ops)
    if (op.phase == Phase::forward) last = op.id;
  return last;
}

// The checks every generated trace must pass.
void expect_well_formed(const Trace& t) {
  EXPECT_NO_THROW(validate(t, "x"));
  const Liveness l = compute_liveness(t);
  ASSERT_EQ(l.last_use.size(), t.buffers.size());
  for (const Op& op : t.ops) EXPECT_EQ(op.bytes_moved, bytes_moved(t, op)) << op.name;
  for (const Buffer& b : t.buffers) {
    const bool lasting = b.category == Category::weight ||
                         b.category == Category::optimizer_state ||
                         b.category == Category::other;
    EXPECT_EQ(b.persistent, lasting) << b.name;
    EXPECT_GT(b.bytes, 0u) << b.name;
    if (b.category == Category::input) {
      EXPECT_EQ(b.producer, kNoOp) << b.name;
    }
    // Each gradient is read last by its optimizer step, and dies there.
    if (b.category == Category::gradient) {
      ASSERT_NE(l.last_use[b.id], kNoOp) << b.name;
      EXPECT_EQ(t.ops[l.last_use[b.id]].phase, Phase::optimizer) << b.name;
    }
  }
  // Phases in order: forward, backward, optimizer.
  EXPECT_TRUE(std::is_sorted(t.ops.begin(), t.ops.end(), [](const Op& a, const Op& b) {
    return a.phase < b.phase;
  }));
}

}  // namespace

TEST(Model, BuiltinsAreRegistered) {
  for (const char* name : {"mlp", "chain", "resnet"}) {
    const ModelInfo* m = find_model(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_FALSE(m->description.empty());
    for (const ParamSpec& p : m->params) {
      EXPECT_NE(p.name, "model");
      EXPECT_NE(p.name, "name");
    }
  }
}

TEST(Model, ResnetParameterCountsMatchTorchvision) {
  const std::pair<int, std::uint64_t> expected[] = {{18, 11'689'512},
                                                    {34, 21'797'672},
                                                    {50, 25'557'032},
                                                    {101, 44'549'160},
                                                    {152, 60'192'808}};
  for (auto [depth, count] : expected) {
    Trace t = generate("model: resnet\ndepth: " + std::to_string(depth) + "\nbatch: 2\n");
    EXPECT_EQ(parameter_count(t, DType::fp32), count) << "resnet" << depth;
    EXPECT_EQ(t.name, "resnet" + std::to_string(depth));
    expect_well_formed(t);
  }
}

TEST(Model, ResnetDescriptionAndDtype) {
  Trace t = generate("model: resnet\ndepth: 50\nbatch: 64\ndtype: bf16\noptimizer: adam\n");
  EXPECT_EQ(t.description, "resnet50 (batch 64, bf16, adam)");
  EXPECT_EQ(parameter_count(t, DType::bf16), 25'557'032u);
  // Adam keeps two moments per parameter, in the weights' type.
  EXPECT_EQ(t.total_bytes(Category::optimizer_state), 2u * 25'557'032u * 2u);
  for (const Op& op : t.ops) EXPECT_EQ(op.dtype, DType::bf16);
  EXPECT_EQ(op_named(t, "conv1.weight.step").kind, "adam_step");
}

TEST(Model, ResnetHandWorkedFlopsAndSizes) {
  Trace t = generate("model: resnet\ndepth: 50\nbatch: 2\n");
  // conv1: 7x7, stride 2, pad 3 on 224x224: floor((224 + 6 - 7) / 2) + 1 = 112.
  const Op& conv1 = op_named(t, "conv1");
  EXPECT_EQ(conv1.kind, "conv2d");
  EXPECT_DOUBLE_EQ(conv1.flops, 2.0 * 2 * 64 * 112 * 112 * 3 * 7 * 7);  // 472,055,808
  EXPECT_EQ(buffer_named(t, "conv1.out").bytes, 2u * 64 * 112 * 112 * 4);
  // Reads the images (2x3x224x224 fp32) and the weight (64x3x7x7), writes the output.
  EXPECT_DOUBLE_EQ(conv1.bytes_moved, 2.0 * 3 * 224 * 224 * 4 + 64 * 3 * 49 * 4 +
                                          2.0 * 64 * 112 * 112 * 4);
  // The images need no gradient: conv1's backward is the weight gradient only (1x forward).
  const Op& conv1_bw = op_named(t, "conv1.backward");
  EXPECT_DOUBLE_EQ(conv1_bw.flops, conv1.flops);
  ASSERT_EQ(conv1_bw.outputs.size(), 1u);
  EXPECT_EQ(t.buffers[conv1_bw.outputs[0]].name, "conv1.weight.grad");
  // layer1.0.conv2: 3x3, 64 -> 64 on 56x56; backward computes input and weight grads (2x).
  EXPECT_DOUBLE_EQ(op_named(t, "layer1.0.conv2").flops, 2.0 * 2 * 64 * 56 * 56 * 64 * 9);
  EXPECT_DOUBLE_EQ(op_named(t, "layer1.0.conv2.backward").flops,
                   2 * 2.0 * 2 * 64 * 56 * 56 * 64 * 9);
  // v1.5: layer2.0 strides in its 3x3 conv; conv1 (1x1) still sees 56x56.
  EXPECT_EQ(buffer_named(t, "layer2.0.conv1.out").bytes, 2u * 128 * 56 * 56 * 4);
  EXPECT_EQ(buffer_named(t, "layer2.0.conv2.out").bytes, 2u * 128 * 28 * 28 * 4);
  EXPECT_EQ(buffer_named(t, "layer4.2.conv3.out").bytes, 2u * 2048 * 7 * 7 * 4);
  // maxpool 3x3 s2 p1: 112 -> 56, plus int64 indices of the output's size.
  EXPECT_EQ(buffer_named(t, "maxpool.out").bytes, 2u * 64 * 56 * 56 * 4);
  EXPECT_EQ(buffer_named(t, "maxpool.indices").bytes, 2u * 64 * 56 * 56 * 8);
  // fc: 2 x 2048 by 2048 x 1000, plus the bias.
  EXPECT_DOUBLE_EQ(op_named(t, "fc").flops, 2.0 * 2 * 2048 * 1000 + 2 * 1000);
  EXPECT_EQ(buffer_named(t, "labels").bytes, 2u * 8);
  // Momentum: 4 FLOPs per parameter; reads the gradient, reads and writes weight and buffer.
  const Op& step = op_named(t, "conv1.weight.step");
  EXPECT_EQ(step.kind, "momentum_step");
  EXPECT_DOUBLE_EQ(step.flops, 4.0 * 9408);
  EXPECT_DOUBLE_EQ(step.bytes_moved, 9408.0 * 4 * (1 + 2 * 2));
}

TEST(Model, ResnetSavesWhatAutogradSaves) {
  Trace t = generate("model: resnet\ndepth: 50\nbatch: 2\n");
  const Liveness l = compute_liveness(t);
  auto last_user = [&](const std::string& buffer) {
    return t.ops[l.last_use[buffer_named(t, buffer).id]].name;
  };
  // The images live until conv1's weight gradient.
  EXPECT_EQ(last_user("input"), "conv1.backward");
  // A conv output is the BN's saved input; the BN output, ReLU'd in place, is the next
  // conv's saved input and the ReLU's saved result (whose backward comes after the conv's).
  EXPECT_EQ(last_user("layer1.0.conv1.out"), "layer1.0.bn1.backward");
  EXPECT_EQ(last_user("layer1.0.bn1.out"), "layer1.0.relu1.backward");
  EXPECT_TRUE(reads(op_named(t, "layer1.0.conv2.backward"), buffer_named(t, "layer1.0.bn1.out").id));
  EXPECT_EQ(last_user("layer1.0.bn1.save_invstd"), "layer1.0.bn1.backward");
  const Op& relu = op_named(t, "layer1.0.relu1");
  EXPECT_TRUE(relu.outputs.empty());
  EXPECT_EQ(relu.updates, std::vector<BufferId>{buffer_named(t, "layer1.0.bn1.out").id});
  EXPECT_TRUE(reads(op_named(t, "layer1.0.relu1.backward"), buffer_named(t, "layer1.0.bn1.out").id));
  // out += identity updates bn3's output in place; the block output is that buffer.
  const Op& add = op_named(t, "layer1.1.add");
  EXPECT_EQ(add.updates, std::vector<BufferId>{buffer_named(t, "layer1.1.bn3.out").id});
  EXPECT_EQ(add.inputs, std::vector<BufferId>{buffer_named(t, "layer1.0.bn3.out").id});
  EXPECT_EQ(last_user("maxpool.indices"), "maxpool.backward");
  // The logits die once log_softmax has run; its result is saved for both loss backwards.
  EXPECT_EQ(last_user("fc.out"), "log_softmax");
  EXPECT_EQ(last_user("log_softmax.out"), "log_softmax.backward");
  // Running statistics are persistent buffers, not parameters.
  EXPECT_EQ(buffer_named(t, "bn1.running_mean").category, Category::other);
}

TEST(Model, ResnetAccumulatesEachBlockInputGradientInPlace) {
  // Every block input feeds conv1 and the identity path: one accumulation per block (16 in
  // resnet50, 8 in resnet18), in place into the gradient that arrived first.
  for (auto [depth, blocks] : {std::pair{50, 16}, std::pair{18, 8}}) {
    Trace t = generate("model: resnet\ndepth: " + std::to_string(depth) + "\nbatch: 1\n");
    int accumulations = 0;
    for (const Op& op : t.ops) {
      if (op.kind != "accumulate_grad") continue;
      ++accumulations;
      EXPECT_TRUE(op.outputs.empty()) << op.name;
      ASSERT_EQ(op.updates.size(), 1u) << op.name;
      EXPECT_EQ(t.buffers[op.updates[0]].category, Category::activation_grad);
    }
    EXPECT_EQ(accumulations, blocks) << "resnet" << depth;
  }
  // resnet18 layer1.0 has no downsample: the identity's gradient is the one relu2's
  // backward made (also read by bn2's backward), and conv1's input gradient is added to it.
  Trace t = generate("model: resnet\ndepth: 18\nbatch: 1\n");
  const Op& acc = op_named(t, "layer1.0.conv1.accumulate_grad");
  EXPECT_EQ(t.buffers[acc.updates[0]].name, "layer1.0.relu2.grad_input");
  EXPECT_EQ(t.buffers[acc.inputs[0]].name, "layer1.0.conv1.grad_input");
  EXPECT_LT(op_named(t, "layer1.0.bn2.backward").id, acc.id);
}

TEST(Model, Resnet50SavedActivationsPerSample) {
  Trace t = generate("model: resnet\ndepth: 50\nbatch: 4\n");
  const double per_sample_values = static_cast<double>(saved_activation_bytes(t)) / 4 / 4;
  // Every conv output is saved (as its BN's input). Per sample, with planes of H x W:
  //   conv1    64 x 112^2                                                =    802,816
  //   layer1   3 x (64 + 64 + 256) x 56^2 + downsample 256 x 56^2       =  4,415,488
  //   layer2   128 x 56^2 + (128 + 512 + 512) x 28^2 + 3 x 768 x 28^2   =  3,110,912
  //   layer3   256 x 28^2 + (256 + 1024 + 1024) x 14^2 + 5 x 1536 x 14^2 =  2,157,568
  //   layer4   512 x 14^2 + (512 + 2048 + 2048) x 7^2 + 2 x 3072 x 7^2  =    627,200
  //   total                                                              = 11,113,984
  // Every BN output but the downsample ones (the identity, read by the add and not saved)
  // is saved too, by the in-place ReLU after it or by the next conv: 11,113,984 minus
  // 256 x 56^2 + 512 x 28^2 + 1024 x 14^2 + 2048 x 7^2 = 1,505,280 -> 9,608,704.
  // The rest is small: maxpool output and int64 indices (0.6 M fp32-equivalents), BN batch
  // statistics, the pooled features and the log-probabilities.
  const double convs_and_bns = 11'113'984.0 + 9'608'704.0;
  EXPECT_GT(per_sample_values, convs_and_bns);
  EXPECT_LT(per_sample_values, convs_and_bns + 1e6);
  std::printf("resnet50 fp32 saved activations: %.2f M values/sample (%.1f MB)\n",
              per_sample_values / 1e6, per_sample_values * 4 / 1e6);
}

TEST(Model, MlpParameterCountByHand) {
  // [784, 512, 512, 10] with bias: 784*512 + 512 = 401,920; 512*512 + 512 = 262,656;
  // 512*10 + 10 = 5,130; total 669,706.
  Trace t = generate("model: mlp\n");
  EXPECT_EQ(parameter_count(t, DType::fp32), 669'706u);
  expect_well_formed(t);
  // Forward: 3 linear, 2 relu, log_softmax, nll_loss; backward the same 7; 6 steps.
  EXPECT_EQ(t.ops.size(), 20u);
  // ReLU is not in place: fc1's output dies once relu1 has read it.
  const Liveness l = compute_liveness(t);
  EXPECT_EQ(t.ops[l.last_use[buffer_named(t, "fc1.out").id]].name, "relu1");
  EXPECT_EQ(t.ops[l.last_use[buffer_named(t, "relu1.out").id]].name, "relu1.backward");
  // [100, 50, 10] without bias: 5000 + 500 weights.
  Trace nb = generate("model: mlp\nlayers: [100, 50, 10]\nbias: false\nactivation: none\n");
  EXPECT_EQ(parameter_count(nb, DType::fp32), 5'500u);
  expect_well_formed(nb);
  EXPECT_DOUBLE_EQ(op_named(nb, "fc1").flops, 2.0 * 32 * 100 * 50);
  // The first layer's input needs no gradient: backward is the weight gradient alone.
  EXPECT_DOUBLE_EQ(op_named(nb, "fc1.backward").flops, 2.0 * 32 * 100 * 50);
  EXPECT_DOUBLE_EQ(op_named(nb, "fc2.backward").flops, 2 * 2.0 * 32 * 50 * 10);
}

TEST(Model, ChainOpCountAndShape) {
  // N forward matmuls + mse_loss + its backward + (2N - 1) backward matmuls + N steps.
  Trace t = generate("model: chain\nlayers: 20000\nwidth: 64\nbatch: 8\n");
  EXPECT_EQ(t.ops.size(), 4u * 20000 + 1);
  // Buffers: input, target, loss, its gradient; per layer weight, momentum, output,
  // weight gradient and (but layer 0) input gradient.
  EXPECT_EQ(t.buffers.size(), 5u * 20000 - 1 + 4);
  EXPECT_EQ(parameter_count(t, DType::fp32), 20000u * 64 * 64);
  expect_well_formed(t);
  // One saved activation per layer: each layer's input (the images for layer 0 are inputs).
  EXPECT_EQ(saved_activation_bytes(t), 20000u * 8 * 64 * 4);
  EXPECT_EQ(op_named(t, "layers.0.backward_weight").kind, "matmul_backward");
  EXPECT_EQ(op_named(t, "layers.19999.backward_input").kind, "matmul_backward");
  EXPECT_EQ(t.description, "chain of 20000 x 64 (batch 8, fp32, momentum)");
}

TEST(Model, ChainDefaultsAndOptimizers) {
  Trace t = generate("model: chain\noptimizer: sgd\ndtype: fp16\n");
  EXPECT_EQ(t.ops.size(), 4u * 16 + 1);
  EXPECT_EQ(t.total_bytes(Category::optimizer_state), 0u);
  EXPECT_EQ(parameter_count(t, DType::fp16), 16u * 1024 * 1024);
  EXPECT_DOUBLE_EQ(op_named(t, "layers.3").flops, 2.0 * 32 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(op_named(t, "layers.3.weight.step").flops, 2.0 * 1024 * 1024);
  expect_well_formed(t);
}

TEST(Model, Deterministic) {
  Trace a = generate("model: resnet\ndepth: 18\nbatch: 3\n");
  Trace b = generate("model: resnet\ndepth: 18\nbatch: 3\n");
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].name, b.ops[i].name);
    EXPECT_EQ(a.ops[i].inputs, b.ops[i].inputs);
  }
}

TEST(Model, BadParametersAreLocated) {
  EXPECT_EQ(error_of("model: resnet\ndepth: 51\n"),
            "t.yaml:2:8: depth: expected 18, 34, 50, 101 or 152 (imagenet), or a CIFAR depth "
            "6n+2 (basic blocks) or 9n+2 (pre-activation bottlenecks), got '51'");
  EXPECT_EQ(error_of("model: resnet\nbatch: 0\n"),
            "t.yaml:2:8: batch: expected an integer from 1 to 1000000, got '0'");
  EXPECT_EQ(error_of("model: mlp\ndtype: fp64\n"),
            "t.yaml:2:8: dtype: expected one of fp32, fp16, bf16, got 'fp64'");
  EXPECT_EQ(error_of("model: mlp\nlayers: [784, x, 10]\n"),
            "t.yaml:2:15: layers[1]: expected an integer, got 'x'");
  EXPECT_EQ(error_of("model: mlp\nlayers: [784]\n"),
            "t.yaml:2:9: layers: expected at least two widths (inputs, ..., classes), got 1");
  EXPECT_EQ(error_of("model: chain\nlayers: 1000001\n").substr(0, 20), "t.yaml:2:9: layers: ");
  // Unknown keys are rejected where the key is, naming it.
  const std::string unknown = error_of("model: resnet\ndepht: 50\n");
  EXPECT_EQ(unknown.substr(0, 9), "t.yaml:2:") << unknown;
  EXPECT_NE(unknown.find("depht"), std::string::npos) << unknown;
}
