// AlexNet as torchvision builds it (the one-GPU variant of Krizhevsky's "one weird trick"
// paper: 64-192-384-256-256 channels), with torchvision's module names
// (features.0 ... features.12, classifier.0 ... classifier.6), so the parameter count
// matches: 61,100,840 for 1000 classes.
#include <string>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

Trace generate(const Params& params) {
  const std::int64_t image = params.get("image_size").as_int_in(63, 8192);
  const std::int64_t classes = params.get("num_classes").as_int_in(1, 1'000'000);
  const TrainingSettings settings = read_training_settings(params);

  ModelBuilder m(settings);
  const std::int64_t n = settings.batch;
  Value x = m.input("input", {n, 3, image, image}, settings.dtype);
  const Value labels = m.input("labels", {n}, DType::int64);

  x = m.conv2d("features.0", x, 64, 11, 4, 2, true);
  x = m.relu("features.1", x, true);
  x = m.max_pool2d("features.2", x, 3, 2, 0);
  x = m.conv2d("features.3", x, 192, 5, 1, 2, true);
  x = m.relu("features.4", x, true);
  x = m.max_pool2d("features.5", x, 3, 2, 0);
  x = m.conv2d("features.6", x, 384, 3, 1, 1, true);
  x = m.relu("features.7", x, true);
  x = m.conv2d("features.8", x, 256, 3, 1, 1, true);
  x = m.relu("features.9", x, true);
  x = m.conv2d("features.10", x, 256, 3, 1, 1, true);
  x = m.relu("features.11", x, true);
  x = m.max_pool2d("features.12", x, 3, 2, 0);
  x = m.adaptive_avg_pool2d("avgpool", x, 6);
  x = m.flatten(x);
  x = m.dropout("classifier.0", x);
  x = m.linear("classifier.1", x, 4096, true);
  x = m.relu("classifier.2", x, true);
  x = m.dropout("classifier.3", x);
  x = m.linear("classifier.4", x, 4096, true);
  x = m.relu("classifier.5", x, true);
  x = m.linear("classifier.6", x, classes, true);
  m.cross_entropy(x, labels);

  return m.finish("alexnet", fmt::format("alexnet ({})", settings.summary()));
}

}  // namespace

ModelInfo alexnet_model() {
  std::vector<ParamSpec> specs = image_classifier_specs({}, 63);
  return {"alexnet",
          "AlexNet as in torchvision (five convolutions, dropout in the classifier), one "
          "training iteration",
          std::move(specs), generate};
}

}  // namespace memsim
