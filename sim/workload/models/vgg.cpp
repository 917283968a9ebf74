// VGG-11/13/16/19 without batch norm as torchvision builds them (Simonyan and Zisserman's
// configurations A, B, D and E), with torchvision's module names (features.N counts every
// convolution, ReLU and pooling in order; classifier.0 ... classifier.6), so parameter
// counts match: vgg11 132,863,336, vgg13 133,047,848, vgg16 138,357,544, vgg19 143,667,240.
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

constexpr int kPool = 0;  // 'M' in torchvision's cfgs
const std::vector<int>& config(int depth) {
  static const std::vector<int> a{64, kPool, 128, kPool, 256, 256, kPool, 512, 512, kPool,
                                  512, 512, kPool};
  static const std::vector<int> b{64, 64, kPool, 128, 128, kPool, 256, 256, kPool, 512, 512,
                                  kPool, 512, 512, kPool};
  static const std::vector<int> d{64, 64, kPool, 128, 128, kPool, 256, 256, 256, kPool,
                                  512, 512, 512, kPool, 512, 512, 512, kPool};
  static const std::vector<int> e{64, 64, kPool, 128, 128, kPool, 256, 256, 256, 256, kPool,
                                  512, 512, 512, 512, kPool, 512, 512, 512, 512, kPool};
  return depth == 11 ? a : depth == 13 ? b : depth == 16 ? d : e;
}

Trace generate(const Params& params) {
  const int depth = std::stoi(params.get("depth").as_choice({"11", "13", "16", "19"}));
  const std::int64_t image = params.get("image_size").as_int_in(32, 8192);
  const std::int64_t classes = params.get("num_classes").as_int_in(1, 1'000'000);
  const TrainingSettings settings = read_training_settings(params);

  ModelBuilder m(settings);
  const std::int64_t n = settings.batch;
  Value x = m.input("input", {n, 3, image, image}, settings.dtype);
  const Value labels = m.input("labels", {n}, DType::int64);

  int index = 0;  // the module's position in nn.Sequential
  for (int channels : config(depth)) {
    if (channels == kPool) {
      x = m.max_pool2d(fmt::format("features.{}", index++), x, 2, 2, 0);
      continue;
    }
    x = m.conv2d(fmt::format("features.{}", index++), x, channels, 3, 1, 1, true);
    x = m.relu(fmt::format("features.{}", index++), x, true);
  }
  x = m.adaptive_avg_pool2d("avgpool", x, 7);
  x = m.flatten(x);
  x = m.linear("classifier.0", x, 4096, true);
  x = m.relu("classifier.1", x, true);
  x = m.dropout("classifier.2", x);
  x = m.linear("classifier.3", x, 4096, true);
  x = m.relu("classifier.4", x, true);
  x = m.dropout("classifier.5", x);
  x = m.linear("classifier.6", x, classes, true);
  m.cross_entropy(x, labels);

  const std::string name = fmt::format("vgg{}", depth);
  return m.finish(name, fmt::format("{} ({})", name, settings.summary()));
}

}  // namespace

ModelInfo vgg_model() {
  std::vector<ParamSpec> specs = image_classifier_specs(
      {{"depth", "11, 13, 16 or 19 (configurations A, B, D, E; no batch norm)", "16"}}, 32);
  return {"vgg", "VGG-11/13/16/19 (no batch norm) as in torchvision, one training iteration",
          std::move(specs), generate};
}

}  // namespace memsim
