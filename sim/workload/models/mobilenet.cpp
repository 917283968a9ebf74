// MobileNetV2 (width 1.0) as torchvision builds it, with torchvision's module names, so the
// parameter count matches: 3,504,872 for 1000 classes. Inverted residual blocks: a 1x1
// expansion (but where the expansion factor is 1), a 3x3 depthwise convolution
// (groups = channels) and a linear 1x1 projection, each convolution bias-free and followed
// by batch norm, the first two by an in-place ReLU6; where the block keeps its shape the
// input is added to the result out of place (`x + self.conv(x)`).
#include <array>
#include <string>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

// torchvision's Conv2dNormActivation(..., activation_layer=nn.ReLU6): conv, BN, ReLU6.
Value conv_bn_relu6(ModelBuilder& m, const std::string& p, Value x, std::int64_t channels,
                    std::int64_t kernel, std::int64_t stride, std::int64_t groups) {
  x = m.conv2d(p + ".0", x, channels, kernel, stride, (kernel - 1) / 2, false, groups);
  x = m.batch_norm(p + ".1", x);
  return m.relu6(p + ".2", x, true);
}

Value inverted_residual(ModelBuilder& m, const std::string& p, Value x, std::int64_t out,
                        std::int64_t stride, std::int64_t expand) {
  const std::int64_t in = m.shape(x)[1];
  const std::int64_t hidden = in * expand;
  Value y = x;
  int index = 0;  // position in the block's nn.Sequential `conv`
  if (expand != 1) y = conv_bn_relu6(m, fmt::format("{}.conv.{}", p, index++), y, hidden, 1, 1, 1);
  y = conv_bn_relu6(m, fmt::format("{}.conv.{}", p, index++), y, hidden, 3, stride, hidden);
  y = m.conv2d(fmt::format("{}.conv.{}", p, index++), y, out, 1, 1, 0);
  y = m.batch_norm(fmt::format("{}.conv.{}", p, index++), y);
  if (stride == 1 && in == out) return m.add(p + ".add", x, y);
  return y;
}

struct Stage {
  std::int64_t expand, channels, blocks, stride;  // t, c, n, s of the paper's table 2
};
constexpr std::array<Stage, 7> kStages{{{1, 16, 1, 1},
                                        {6, 24, 2, 2},
                                        {6, 32, 3, 2},
                                        {6, 64, 4, 2},
                                        {6, 96, 3, 1},
                                        {6, 160, 3, 2},
                                        {6, 320, 1, 1}}};

Trace generate(const Params& params) {
  const std::int64_t image = params.get("image_size").as_int_in(32, 8192);
  const std::int64_t classes = params.get("num_classes").as_int_in(1, 1'000'000);
  const TrainingSettings settings = read_training_settings(params);

  ModelBuilder m(settings);
  const std::int64_t n = settings.batch;
  Value x = m.input("input", {n, 3, image, image}, settings.dtype);
  const Value labels = m.input("labels", {n}, DType::int64);

  x = conv_bn_relu6(m, "features.0", x, 32, 3, 2, 1);
  int index = 1;
  for (const Stage& s : kStages)
    for (std::int64_t i = 0; i < s.blocks; ++i)
      x = inverted_residual(m, fmt::format("features.{}", index++), x, s.channels,
                            i == 0 ? s.stride : 1, s.expand);
  x = conv_bn_relu6(m, fmt::format("features.{}", index), x, 1280, 1, 1, 1);
  x = m.adaptive_avg_pool2d("avgpool", x, 1);
  x = m.flatten(x);
  x = m.dropout("classifier.0", x);
  x = m.linear("classifier.1", x, classes, true);
  m.cross_entropy(x, labels);

  return m.finish("mobilenet_v2", fmt::format("mobilenet_v2 ({})", settings.summary()));
}

}  // namespace

ModelInfo mobilenet_v2_model() {
  std::vector<ParamSpec> specs = image_classifier_specs({}, 32);
  return {"mobilenet_v2",
          "MobileNetV2 (width 1.0) as in torchvision: inverted residuals, depthwise "
          "convolutions, ReLU6; one training iteration",
          std::move(specs), generate};
}

}  // namespace memsim
