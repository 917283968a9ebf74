// Recurrent classifiers: a stack of nn.RNN (tanh), nn.LSTM or nn.GRU layers over a
// sequence, then a linear classifier on the last time step's output and cross-entropy.
// Parameters per layer as PyTorch's (two bias vectors): gates x (input x hidden + hidden x
// hidden + 2 hidden), with 4 gates for LSTM, 3 for GRU and 1 for the tanh RNN; layers after
// the first take `hidden` inputs. How each step is unrolled and what it keeps for backward
// is in recurrent_layer.cpp.
#include <string>

#include <fmt/format.h>

#include "sim/core/limits.h"
#include "sim/workload/models/builder.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

using Cell = ModelBuilder::RecurrentCell;

Trace generate(const char* model, Cell cell, const Params& params) {
  const std::int64_t layers = params.get("layers").as_int_in(1, 1000);
  const std::int64_t hidden = params.get("hidden").as_int_in(1, 1 << 20);
  const std::int64_t input_size = params.get("input_size").as_int_in(1, 1 << 20);
  const ConfigNode seq_node = params.get("seq_len");
  const std::int64_t seq_len = seq_node.as_int_in(1, 1'000'000);
  // Each layer's step is 11 to 14 ops (forward, backward and its gradients' accumulation).
  if (const double ops = 14.0 * static_cast<double>(layers) * static_cast<double>(seq_len); over_op_limit(ops))
    seq_node.fail(fmt::format("{} steps in each of {} layers make {}", seq_len, layers, ops_over_limit(ops)));
  const std::int64_t classes = params.get("num_classes").as_int_in(1, 1'000'000);
  const std::string output = params.get("output").as_choice({"sequence", "last"});
  const TrainingSettings settings = read_training_settings(params);

  ModelBuilder m(settings);
  const std::int64_t n = settings.batch;
  // Time-major, as nn.LSTM without batch_first.
  Value x = m.input("input", {seq_len, n, input_size}, settings.dtype);
  const Value labels = m.input("labels", {n}, DType::int64);
  const bool last_only = output == "last";
  for (std::int64_t l = 0; l < layers; ++l)
    x = m.recurrent(model, static_cast<int>(l), x, cell, hidden, last_only && l + 1 == layers);
  // output[-1]: a view of the last step, which keeps the whole stacked output alive.
  const Value last = last_only ? x : m.select("last_step", x, {n, hidden});
  const Value logits = m.linear("fc", last, classes, true);
  m.cross_entropy(logits, labels);

  return m.finish(model, fmt::format("{} {} x {} over {} steps ({})", model, layers, hidden,
                                     seq_len, settings.summary()),
                  seq_len);
}

ModelInfo make(const char* model, Cell cell, const char* what) {
  std::vector<ParamSpec> specs{
      {"layers", "stacked recurrent layers", "1"},
      {"hidden", "hidden (and cell) state size", "512"},
      {"input_size", "features per time step of the input", "512"},
      {"seq_len", "time steps, unrolled one op group per step (up to 1,000,000)", "100"},
      {"num_classes", "outputs of the classifier on the last step", "10"},
      {"output",
       "sequence: the last layer stacks every step's output and the classifier reads the last "
       "(nn.LSTM); last: only h_T is kept for the classifier (a per-step loop, as in "
       "memory-efficient BPTT)",
       "sequence"},
  };
  specs = with_training_params(std::move(specs));
  return {model,
          fmt::format("{} over a sequence, per-step as PyTorch's native path, classifier on "
                      "the last step",
                      what),
          std::move(specs),
          [model, cell](const Params& params) { return generate(model, cell, params); }};
}

}  // namespace

ModelInfo rnn_model() { return make("rnn", Cell::rnn_tanh, "stacked nn.RNN (tanh)"); }
ModelInfo lstm_model() { return make("lstm", Cell::lstm, "stacked nn.LSTM"); }
ModelInfo gru_model() { return make("gru", Cell::gru, "stacked nn.GRU"); }

}  // namespace memsim
