#include "sim/core/registry.h"
#include "sim/workload/models/models.h"

namespace memsim {

const std::vector<ModelInfo>& builtin_models() {
  // One per line, so that adding a generator adds a line.
  static const std::vector<ModelInfo> models{
      mlp_model(),
      chain_model(),
      resnet_model(),
      alexnet_model(),
      vgg_model(),
      googlenet_model(),
      mobilenet_v2_model(),
      densenet_model(),
      rnn_model(),
      lstm_model(),
      gru_model(),
      bert_model(),
      gpt2_model(),
      gpt_model(),
      llama_model(),
      hf_model(),
  };
  return models;
}

const ModelInfo* find_model(std::string_view name) { return find_by_name(builtin_models(), name); }

}  // namespace memsim
