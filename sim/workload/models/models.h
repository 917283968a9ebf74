#pragma once
// Model generators: each turns a workload spec (its declared parameters) into the Trace of
// one full training iteration — forward, loss, backward (activation and weight gradients)
// and the optimizer update — with buffer sizes, FLOPs and bytes moved per op.
// Registration is explicit, in builtin.cpp.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/params.h"
#include "sim/workload/trace.h"

namespace memsim {

struct ModelInfo {
  std::string name;         // the value of `model:` in a workload spec
  std::string description;  // one line, for `memsim list`
  std::vector<ParamSpec> params;
  std::function<Trace(const Params&)> generate;
};

/// Every built-in generator, in the order `memsim list` shows them.
const std::vector<ModelInfo>& builtin_models();
const ModelInfo* find_model(std::string_view name);

// One per file under models/.
ModelInfo mlp_model();
ModelInfo chain_model();
ModelInfo resnet_model();
ModelInfo alexnet_model();
ModelInfo vgg_model();
ModelInfo googlenet_model();
ModelInfo mobilenet_v2_model();
ModelInfo densenet_model();
ModelInfo rnn_model();
ModelInfo lstm_model();
ModelInfo gru_model();
ModelInfo bert_model();
ModelInfo gpt2_model();
ModelInfo gpt_model();
ModelInfo llama_model();
ModelInfo hf_model();  // hf_config.cpp

}  // namespace memsim
