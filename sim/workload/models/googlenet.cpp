// GoogLeNet (Inception v1) as torchvision builds it, without the auxiliary classifiers
// (aux_logits=False) and with torchvision's module names, so the parameter count matches:
// 6,624,904 for 1000 classes. Every convolution is torchvision's BasicConv2d: a bias-free
// convolution, batch norm (eps 0.001; the eps changes no memory) and an in-place ReLU.
// Like torchvision, branch 3 uses a 3x3 convolution where the paper has 5x5. The input
// transform of the ImageNet weights (transform_input) has no parameters and is left out.
#include <string>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

Value basic_conv(ModelBuilder& m, const std::string& p, Value x, std::int64_t channels,
                 std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
  x = m.conv2d(p + ".conv", x, channels, kernel, stride, padding);
  x = m.batch_norm(p + ".bn", x);
  return m.relu(p + ".relu", x, true);
}

struct InceptionSpec {
  const char* name;
  std::int64_t ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj;
};

// Four branches on the same input, concatenated along the channels.
Value inception(ModelBuilder& m, const InceptionSpec& s, Value x) {
  const std::string p = s.name;
  const Value b1 = basic_conv(m, p + ".branch1", x, s.ch1x1, 1, 1, 0);
  Value b2 = basic_conv(m, p + ".branch2.0", x, s.ch3x3red, 1, 1, 0);
  b2 = basic_conv(m, p + ".branch2.1", b2, s.ch3x3, 3, 1, 1);
  Value b3 = basic_conv(m, p + ".branch3.0", x, s.ch5x5red, 1, 1, 0);
  b3 = basic_conv(m, p + ".branch3.1", b3, s.ch5x5, 3, 1, 1);
  Value b4 = m.max_pool2d(p + ".branch4.0", x, 3, 1, 1, true);
  b4 = basic_conv(m, p + ".branch4.1", b4, s.pool_proj, 1, 1, 0);
  return m.cat(p + ".cat", {b1, b2, b3, b4});
}

Trace generate(const Params& params) {
  const std::int64_t image = params.get("image_size").as_int_in(32, 8192);
  const std::int64_t classes = params.get("num_classes").as_int_in(1, 1'000'000);
  const TrainingSettings settings = read_training_settings(params);

  ModelBuilder m(settings);
  const std::int64_t n = settings.batch;
  Value x = m.input("input", {n, 3, image, image}, settings.dtype);
  const Value labels = m.input("labels", {n}, DType::int64);

  x = basic_conv(m, "conv1", x, 64, 7, 2, 3);
  x = m.max_pool2d("maxpool1", x, 3, 2, 0, true);
  x = basic_conv(m, "conv2", x, 64, 1, 1, 0);
  x = basic_conv(m, "conv3", x, 192, 3, 1, 1);
  x = m.max_pool2d("maxpool2", x, 3, 2, 0, true);
  x = inception(m, {"inception3a", 64, 96, 128, 16, 32, 32}, x);
  x = inception(m, {"inception3b", 128, 128, 192, 32, 96, 64}, x);
  x = m.max_pool2d("maxpool3", x, 3, 2, 0, true);
  x = inception(m, {"inception4a", 192, 96, 208, 16, 48, 64}, x);
  x = inception(m, {"inception4b", 160, 112, 224, 24, 64, 64}, x);
  x = inception(m, {"inception4c", 128, 128, 256, 24, 64, 64}, x);
  x = inception(m, {"inception4d", 112, 144, 288, 32, 64, 64}, x);
  x = inception(m, {"inception4e", 256, 160, 320, 32, 128, 128}, x);
  x = m.max_pool2d("maxpool4", x, 2, 2, 0, true);
  x = inception(m, {"inception5a", 256, 160, 320, 32, 128, 128}, x);
  x = inception(m, {"inception5b", 384, 192, 384, 48, 128, 128}, x);
  x = m.adaptive_avg_pool2d("avgpool", x, 1);
  x = m.flatten(x);
  x = m.dropout("dropout", x);
  x = m.linear("fc", x, classes, true);
  m.cross_entropy(x, labels);

  return m.finish("googlenet", fmt::format("googlenet ({})", settings.summary()));
}

}  // namespace

ModelInfo googlenet_model() {
  std::vector<ParamSpec> specs = image_classifier_specs({}, 32);
  return {"googlenet",
          "GoogLeNet (Inception v1) as in torchvision, no auxiliary heads, one training "
          "iteration",
          std::move(specs), generate};
}

}  // namespace memsim
