// A multilayer perceptron: linear layers (with bias by default) and out-of-place ReLUs
// between them, trained with cross-entropy over the last layer's outputs.
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

Trace generate(const Params& params) {
  const ConfigNode layers_node = params.get("layers");
  std::vector<std::int64_t> widths;
  for (const ConfigNode& item : layers_node.items())
    widths.push_back(item.as_int_in(1, 1 << 24));
  if (widths.size() < 2)
    layers_node.fail(fmt::format(
        "expected at least two widths (inputs, ..., classes), got {}", widths.size()));
  const bool relu = params.get("activation").as_choice({"relu", "none"}) == "relu";
  const bool bias = params.get("bias").as_bool();
  const TrainingSettings settings = read_training_settings(params);

  ModelBuilder m(settings);
  Value x = m.input("input", {settings.batch, widths.front()}, settings.dtype);
  const Value labels = m.input("labels", {settings.batch}, DType::int64);
  const std::size_t n_layers = widths.size() - 1;
  for (std::size_t i = 1; i <= n_layers; ++i) {
    x = m.linear(fmt::format("fc{}", i), x, widths[i], bias);
    // nn.ReLU() without inplace: a new output, and the linear output dies at once.
    if (relu && i < n_layers) x = m.relu(fmt::format("relu{}", i), x, false);
  }
  m.cross_entropy(x, labels);

  return m.finish("mlp", fmt::format("mlp {} ({})", fmt::join(widths, "-"), settings.summary()));
}

}  // namespace

ModelInfo mlp_model() {
  std::vector<ParamSpec> specs{
      {"layers", "widths from the inputs to the classes, e.g. [784, 1024, 1024, 10]",
       "[784, 512, 512, 10]"},
      {"activation", "between the linear layers: relu (not in place) or none", "relu"},
      {"bias", "whether the linear layers have a bias", "true"},
  };
  specs = with_training_params(std::move(specs));
  return {"mlp", "multilayer perceptron: linear layers with ReLUs, cross-entropy loss",
          std::move(specs), generate};
}

}  // namespace memsim
