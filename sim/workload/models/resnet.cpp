// ResNet for ImageNet as torchvision builds it (v1.5: a Bottleneck strides in its 3x3
// convolution), with torchvision's module names, so parameter counts match exactly.
#include <array>
#include <string>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

struct Depth {
  int depth;
  bool bottleneck;                 // Bottleneck (expansion 4) or BasicBlock (expansion 1)
  std::array<int, 4> blocks;       // blocks in layer1..layer4
};
constexpr std::array<Depth, 5> kDepths{{{18, false, {2, 2, 2, 2}},
                                        {34, false, {3, 4, 6, 3}},
                                        {50, true, {3, 4, 6, 3}},
                                        {101, true, {3, 4, 23, 3}},
                                        {152, true, {3, 8, 36, 3}}}};

// conv1x1 + BN on the block input, where the block changes the stride or the width.
Value downsample(ModelBuilder& m, const std::string& p, Value x, std::int64_t channels,
                 std::int64_t stride) {
  Value out = m.conv2d(p + "downsample.0", x, channels, 1, stride, 0);
  return m.batch_norm(p + "downsample.1", out);
}

// torchvision applies one ReLU module (inplace=True) several times per block; the ops are
// told apart as relu1, relu2, ... in order of application.
Value basic_block(ModelBuilder& m, const std::string& p, Value x, std::int64_t planes,
                  std::int64_t stride, bool has_downsample) {
  Value out = m.conv2d(p + "conv1", x, planes, 3, stride, 1);
  out = m.batch_norm(p + "bn1", out);
  out = m.relu(p + "relu1", out, true);
  out = m.conv2d(p + "conv2", out, planes, 3, 1, 1);
  out = m.batch_norm(p + "bn2", out);
  const Value identity = has_downsample ? downsample(m, p, x, planes, stride) : x;
  out = m.add_(p + "add", out, identity);  // out += identity
  return m.relu(p + "relu2", out, true);
}

Value bottleneck(ModelBuilder& m, const std::string& p, Value x, std::int64_t planes,
                 std::int64_t stride, bool has_downsample) {
  Value out = m.conv2d(p + "conv1", x, planes, 1, 1, 0);
  out = m.batch_norm(p + "bn1", out);
  out = m.relu(p + "relu1", out, true);
  out = m.conv2d(p + "conv2", out, planes, 3, stride, 1);
  out = m.batch_norm(p + "bn2", out);
  out = m.relu(p + "relu2", out, true);
  out = m.conv2d(p + "conv3", out, planes * 4, 1, 1, 0);
  out = m.batch_norm(p + "bn3", out);
  const Value identity = has_downsample ? downsample(m, p, x, planes * 4, stride) : x;
  out = m.add_(p + "add", out, identity);
  return m.relu(p + "relu3", out, true);
}

Trace generate(const Params& params) {
  const std::string depth_text =
      params.get("depth").as_choice({"18", "34", "50", "101", "152"});
  const int depth = std::stoi(depth_text);
  const std::int64_t image = params.get("image_size").as_int_in(1, 8192);
  const std::int64_t classes = params.get("num_classes").as_int_in(1, 1'000'000);
  const TrainingSettings settings = read_training_settings(params);
  Depth spec = kDepths[0];
  for (const Depth& d : kDepths)
    if (d.depth == depth) spec = d;

  ModelBuilder m(settings);
  const std::int64_t n = settings.batch;
  Value x = m.input("input", {n, 3, image, image}, settings.dtype);
  const Value labels = m.input("labels", {n}, DType::int64);

  x = m.conv2d("conv1", x, 64, 7, 2, 3);
  x = m.batch_norm("bn1", x);
  x = m.relu("relu", x, true);
  x = m.max_pool2d("maxpool", x, 3, 2, 1);

  const std::int64_t expansion = spec.bottleneck ? 4 : 1;
  std::int64_t inplanes = 64;
  for (int layer = 0; layer < 4; ++layer) {
    const std::int64_t planes = 64LL << layer;
    for (int i = 0; i < spec.blocks[layer]; ++i) {
      const std::int64_t stride = (layer > 0 && i == 0) ? 2 : 1;
      const bool has_downsample = stride != 1 || inplanes != planes * expansion;
      const std::string prefix = fmt::format("layer{}.{}.", layer + 1, i);
      x = spec.bottleneck ? bottleneck(m, prefix, x, planes, stride, has_downsample)
                          : basic_block(m, prefix, x, planes, stride, has_downsample);
      inplanes = planes * expansion;
    }
  }

  x = m.adaptive_avg_pool2d("avgpool", x, 1);
  x = m.flatten(x);
  x = m.linear("fc", x, classes, true);
  m.cross_entropy(x, labels);

  const std::string name = fmt::format("resnet{}", depth);
  return m.finish(name, fmt::format("{} ({})", name, settings.summary()));
}

}  // namespace

ModelInfo resnet_model() {
  std::vector<ParamSpec> specs{
      {"depth", "18 or 34 (BasicBlock), 50, 101 or 152 (Bottleneck)", "50"},
      {"image_size", "height and width of the square input images, in pixels", "224"},
      {"num_classes", "outputs of the final fully connected layer", "1000"},
  };
  for (auto& s : training_param_specs()) specs.push_back(std::move(s));
  return {"resnet",
          "ResNet-18/34/50/101/152 for ImageNet as in torchvision, one training iteration",
          std::move(specs), generate};
}

}  // namespace memsim
