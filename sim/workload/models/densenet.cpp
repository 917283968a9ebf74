// DenseNet-121/161/169/201 as torchvision builds them, without the memory-efficient
// (checkpointed) variant, with torchvision's module names, so parameter counts match:
// densenet121 7,978,856, densenet161 28,681,000, densenet169 14,149,480, densenet201
// 20,013,928. Each dense layer concatenates every earlier feature map of its block with
// torch.cat — a new buffer, which its first batch norm saves — so the saved activations grow
// with the square of the block's length, the cost Pleiss et al. (2017) address.
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

struct Config {
  int depth;
  std::int64_t growth, init_features;
  std::array<int, 4> layers;  // dense layers per block
};
constexpr std::array<Config, 4> kConfigs{{{121, 32, 64, {6, 12, 24, 16}},
                                          {161, 48, 96, {6, 12, 36, 24}},
                                          {169, 32, 64, {6, 12, 32, 32}},
                                          {201, 32, 64, {6, 12, 48, 32}}}};
constexpr std::int64_t kBottleneckWidth = 4;  // bn_size: the 1x1 conv makes 4 x growth maps

// _DenseLayer: cat, BN, ReLU, 1x1 conv to 4k channels, BN, ReLU, 3x3 conv to k channels.
Value dense_layer(ModelBuilder& m, const std::string& p, const std::vector<Value>& features,
                  std::int64_t growth) {
  Value x = m.cat(p + ".cat", features);
  x = m.batch_norm(p + ".norm1", x);
  x = m.relu(p + ".relu1", x, true);
  x = m.conv2d(p + ".conv1", x, kBottleneckWidth * growth, 1, 1, 0);
  x = m.batch_norm(p + ".norm2", x);
  x = m.relu(p + ".relu2", x, true);
  return m.conv2d(p + ".conv2", x, growth, 3, 1, 1);
}

Trace generate(const Params& params) {
  const int depth = std::stoi(params.get("depth").as_choice({"121", "161", "169", "201"}));
  const std::int64_t image = params.get("image_size").as_int_in(32, 8192);
  const std::int64_t classes = params.get("num_classes").as_int_in(1, 1'000'000);
  const TrainingSettings settings = read_training_settings(params);
  Config c = kConfigs[0];
  for (const Config& k : kConfigs)
    if (k.depth == depth) c = k;

  ModelBuilder m(settings);
  const std::int64_t n = settings.batch;
  Value x = m.input("input", {n, 3, image, image}, settings.dtype);
  const Value labels = m.input("labels", {n}, DType::int64);

  x = m.conv2d("features.conv0", x, c.init_features, 7, 2, 3);
  x = m.batch_norm("features.norm0", x);
  x = m.relu("features.relu0", x, true);
  x = m.max_pool2d("features.pool0", x, 3, 2, 1);
  for (int b = 0; b < 4; ++b) {
    const std::string block = fmt::format("features.denseblock{}", b + 1);
    std::vector<Value> features{x};
    for (int i = 0; i < c.layers[b]; ++i)
      features.push_back(
          dense_layer(m, fmt::format("{}.denselayer{}", block, i + 1), features, c.growth));
    x = m.cat(block + ".cat", features);
    if (b == 3) break;
    // _Transition: BN, ReLU, 1x1 conv halving the channels, 2x2 average pooling.
    const std::string t = fmt::format("features.transition{}", b + 1);
    x = m.batch_norm(t + ".norm", x);
    x = m.relu(t + ".relu", x, true);
    x = m.conv2d(t + ".conv", x, m.shape(x)[1] / 2, 1, 1, 0);
    x = m.avg_pool2d(t + ".pool", x, 2, 2);
  }
  x = m.batch_norm("features.norm5", x);
  x = m.relu("relu", x, true);  // F.relu(features, inplace=True)
  x = m.adaptive_avg_pool2d("avgpool", x, 1);
  x = m.flatten(x);
  x = m.linear("classifier", x, classes, true);
  m.cross_entropy(x, labels);

  const std::string name = fmt::format("densenet{}", depth);
  return m.finish(name, fmt::format("{} ({})", name, settings.summary()));
}

}  // namespace

ModelInfo densenet_model() {
  std::vector<ParamSpec> specs =
      image_classifier_specs({{"depth", "121, 161, 169 or 201", "121"}}, 32);
  return {"densenet",
          "DenseNet-121/161/169/201 as in torchvision (torch.cat per dense layer, not the "
          "memory-efficient variant), one training iteration",
          std::move(specs), generate};
}

}  // namespace memsim
