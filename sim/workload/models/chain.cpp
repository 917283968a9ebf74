// A chain of N equal linear layers (width -> width, no bias, no nonlinearity) ending in a
// mean-squared-error loss: the homogeneous network of the checkpointing literature, where
// every layer saves one batch x width activation. Without a nonlinearity the chain stays a
// product of matrices, which is what makes each layer cost the same both ways; a ReLU would
// add ops without changing what is saved (its output would replace the layer input).
//
// Ops: N forward matmuls, the loss and its backward, 2N - 1 backward matmuls (layer 0 needs
// no input gradient) and N optimizer steps: 4N + 1 in all.
#include <string>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

Trace generate(const Params& params) {
  const std::int64_t layers = params.get("layers").as_int_in(1, 1'000'000);
  const std::int64_t width = params.get("width").as_int_in(1, 1 << 20);
  const TrainingSettings settings = read_training_settings(params);
  const auto n = static_cast<std::size_t>(layers);
  const auto states = static_cast<std::size_t>(optimizer_state_count(settings.optimizer));

  ModelBuilder m(settings);
  // Per layer: weight, its state, output, input gradient, weight gradient.
  m.reserve(4 * n + 1, (4 + states) * n + 4);
  Value x = m.input("input", {settings.batch, width}, settings.dtype);
  const Value target = m.input("target", {settings.batch, width}, settings.dtype);
  std::string name = "layers.";
  for (std::size_t i = 0; i < n; ++i) {
    name.resize(7);  // "layers."
    name += std::to_string(i);
    x = m.matmul(name, x, width);
  }
  m.mse_loss(x, target);

  return m.finish("chain", fmt::format("chain of {} x {} ({})", layers, width, settings.summary()));
}

}  // namespace

ModelInfo chain_model() {
  std::vector<ParamSpec> specs{
      {"layers", "number of equal linear layers (up to 1,000,000)", "16"},
      {"width", "features in and out of every layer", "1024"},
  };
  specs = with_training_params(std::move(specs));
  return {"chain", "N equal bias-free linear layers and an MSE loss, for checkpointing studies",
          std::move(specs), generate};
}

}  // namespace memsim
