// ResNets in two families:
// - imagenet: torchvision's ResNet-18/34/50/101/152 (v1.5: a Bottleneck strides in its 3x3
//   convolution), with torchvision's module names, so parameter counts match exactly;
// - cifar: the 32x32 ResNets of He et al. — depth 6n+2 with basic blocks (2015, three
//   stages of 16/32/64 channels, option-A shortcuts: a strided, zero-padded identity with
//   no parameters), or depth 9n+2 with pre-activation bottlenecks (2016, "Identity Mappings
//   in Deep Residual Networks": stages of 16/32/64 x 4 channels, a 1x1 convolution as the
//   projection shortcut; ResNet-1001 is n = 111), as in the usual PyTorch ports.
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

const Depth* imagenet_depth(std::int64_t depth) {
  for (const Depth& d : kDepths)
    if (d.depth == depth) return &d;
  return nullptr;
}

enum class CifarBlock { basic, preact_bottleneck };

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

Value imagenet_body(ModelBuilder& m, Value x, const Depth& spec) {
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
      const std::string block = fmt::format("layer{}.{}", layer + 1, i);
      m.begin_unit(block, /*layer=*/true);
      x = spec.bottleneck ? bottleneck(m, block + ".", x, planes, stride, has_downsample)
                          : basic_block(m, block + ".", x, planes, stride, has_downsample);
      m.end_unit();
      inplanes = planes * expansion;
    }
  }
  return x;
}

// He et al. 2015, section 4.2: conv-BN-ReLU twice, the identity added before the last
// ReLU; where the shape changes, option A: x[:, :, ::2, ::2] zero-padded in channels.
Value cifar_basic_block(ModelBuilder& m, const std::string& p, Value x, std::int64_t planes,
                        std::int64_t stride) {
  Value out = m.conv2d(p + "conv1", x, planes, 3, stride, 1);
  out = m.batch_norm(p + "bn1", out);
  out = m.relu(p + "relu1", out, true);
  out = m.conv2d(p + "conv2", out, planes, 3, 1, 1);
  out = m.batch_norm(p + "bn2", out);
  const bool reshape = stride != 1 || m.shape(x)[1] != planes;
  const Value identity = reshape ? m.subsample_pad(p + "shortcut", x, stride, planes) : x;
  out = m.add_(p + "add", out, identity);
  return m.relu(p + "relu2", out, true);
}

// He et al. 2016: BN-ReLU-conv three times (1x1, 3x3 with the stride, 1x1 to 4x planes),
// the shortcut (x, or a 1x1 convolution of x where the shape changes) added at the end.
Value preact_bottleneck(ModelBuilder& m, const std::string& p, Value x, std::int64_t planes,
                        std::int64_t stride) {
  Value out = m.batch_norm(p + "bn1", x);
  out = m.relu(p + "relu1", out, true);
  out = m.conv2d(p + "conv1", out, planes, 1, 1, 0);
  out = m.batch_norm(p + "bn2", out);
  out = m.relu(p + "relu2", out, true);
  out = m.conv2d(p + "conv2", out, planes, 3, stride, 1);
  out = m.batch_norm(p + "bn3", out);
  out = m.relu(p + "relu3", out, true);
  out = m.conv2d(p + "conv3", out, planes * 4, 1, 1, 0);
  const bool reshape = stride != 1 || m.shape(x)[1] != planes * 4;
  const Value residual = reshape ? m.conv2d(p + "downsample", x, planes * 4, 1, stride, 0) : x;
  return m.add_(p + "add", out, residual);  // out += residual
}

Value cifar_body(ModelBuilder& m, Value x, int depth, CifarBlock block) {
  const bool basic = block == CifarBlock::basic;
  const int n = basic ? (depth - 2) / 6 : (depth - 2) / 9;
  x = m.conv2d("conv1", x, 16, 3, 1, 1);
  if (basic) {
    x = m.batch_norm("bn1", x);
    x = m.relu("relu", x, true);
  }
  for (int layer = 0; layer < 3; ++layer) {
    const std::int64_t planes = 16LL << layer;
    for (int i = 0; i < n; ++i) {
      const std::int64_t stride = (layer > 0 && i == 0) ? 2 : 1;
      const std::string block = fmt::format("layer{}.{}", layer + 1, i);
      m.begin_unit(block, /*layer=*/true);
      x = basic ? cifar_basic_block(m, block + ".", x, planes, stride)
                : preact_bottleneck(m, block + ".", x, planes, stride);
      m.end_unit();
    }
  }
  if (!basic) {  // the last block's sum is normalised before pooling
    x = m.batch_norm("bn", x);
    x = m.relu("relu", x, true);
  }
  return x;
}

// A parameter whose default depends on the variant: `auto` (or absent) gives `fallback`.
std::int64_t int_or_auto(const Params& params, const std::string& name, std::int64_t fallback,
                         std::int64_t lo, std::int64_t hi) {
  const ConfigNode node = params.get(name);
  if (node.is_scalar() && node.as_string() == "auto") return fallback;
  return node.as_int_in(lo, hi);
}

Trace generate(const Params& params) {
  const ConfigNode depth_node = params.get("depth");
  const std::int64_t depth = depth_node.as_int_in(1, 100'000);
  const Depth* imagenet = imagenet_depth(depth);
  const std::string variant_text =
      params.get("variant").as_choice({"auto", "imagenet", "cifar"});
  const bool cifar = variant_text == "cifar" || (variant_text == "auto" && imagenet == nullptr);
  const bool basic_fits = (depth - 2) % 6 == 0 && depth >= 8;
  const bool preact_fits = (depth - 2) % 9 == 0 && depth >= 11;

  const ConfigNode block_node = params.get("block");
  const std::string block_text = block_node.as_choice({"auto", "basic", "preact_bottleneck"});
  CifarBlock block = CifarBlock::basic;
  if (!cifar) {
    if (imagenet == nullptr)
      depth_node.fail_expected("one of 18, 34, 50, 101, 152 for variant imagenet");
    if (block_text != "auto")
      block_node.fail("applies to variant cifar only (ImageNet depths fix the block)");
  } else if (block_text == "basic") {
    if (!basic_fits)
      depth_node.fail_expected("6n+2 (8, 14, 20, 32, 44, 56, 110, ...) for basic blocks");
  } else if (block_text == "preact_bottleneck") {
    if (!preact_fits)
      depth_node.fail_expected(
          "9n+2 (11, 20, 29, ..., 164, 1001) for pre-activation bottlenecks");
    block = CifarBlock::preact_bottleneck;
  } else if (basic_fits) {
    block = CifarBlock::basic;
  } else if (preact_fits) {
    block = CifarBlock::preact_bottleneck;
  } else {
    depth_node.fail_expected(
        variant_text == "cifar"
            ? "6n+2 (basic blocks) or 9n+2 (pre-activation bottlenecks) for variant cifar"
            : "18, 34, 50, 101 or 152 (imagenet), or a CIFAR depth 6n+2 (basic blocks) or "
              "9n+2 (pre-activation bottlenecks)");
  }
  const std::int64_t image = int_or_auto(params, "image_size", cifar ? 32 : 224, 1, 8192);
  const std::int64_t classes =
      int_or_auto(params, "num_classes", cifar ? 10 : 1000, 1, 1'000'000);
  const TrainingSettings settings = read_training_settings(params);

  ModelBuilder m(settings);
  if (cifar) {
    // Per block about 12 forward and 12 backward ops and 9 buffers per parameter tensor.
    const auto blocks = static_cast<std::size_t>(depth / 6 + 1) * 3;
    m.reserve(blocks * 40, blocks * 60);
  }
  const std::int64_t n = settings.batch;
  Value x = m.input("input", {n, 3, image, image}, settings.dtype);
  const Value labels = m.input("labels", {n}, DType::int64);

  x = cifar ? cifar_body(m, x, static_cast<int>(depth), block) : imagenet_body(m, x, *imagenet);
  x = m.adaptive_avg_pool2d("avgpool", x, 1);
  x = m.flatten(x);
  x = m.linear("fc", x, classes, true);
  m.cross_entropy(x, labels);

  const std::string name = fmt::format("resnet{}", depth);
  const std::string family = !cifar                       ? ""
                             : block == CifarBlock::basic ? "CIFAR, basic; "
                                                          : "CIFAR, pre-activation bottleneck; ";
  return m.finish(name, fmt::format("{} ({}{})", name, family, settings.summary()));
}

}  // namespace

ModelInfo resnet_model() {
  std::vector<ParamSpec> specs{
      {"depth", "imagenet: 18 or 34 (BasicBlock), 50, 101 or 152 (Bottleneck); cifar: 6n+2 "
                "(basic blocks: 20, 32, 44, 56, 110) or 9n+2 (pre-activation bottlenecks: "
                "164, 1001)", "50"},
      {"variant", "imagenet (torchvision's ResNets), cifar (He et al.'s 32x32 ResNets), or "
                  "auto: imagenet for depths 18, 34, 50, 101, 152, else cifar", "auto"},
      {"block", "cifar only: basic (6n+2), preact_bottleneck (9n+2), or auto: basic where "
                "the depth is 6n+2, else preact_bottleneck", "auto"},
      {"image_size", "height and width of the square input images, in pixels (auto: 224 for "
                     "imagenet, 32 for cifar)", "auto"},
      {"num_classes", "outputs of the final fully connected layer (auto: 1000 for imagenet, "
                      "10 for cifar)", "auto"},
  };
  specs = with_training_params(std::move(specs));
  return {"resnet",
          "ResNet-18/34/50/101/152 for ImageNet as in torchvision, and CIFAR ResNets of depth "
          "6n+2 and 9n+2 (up to ResNet-1001), one training iteration",
          std::move(specs), generate};
}

}  // namespace memsim
