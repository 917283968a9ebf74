#include "sim/workload/models/models.h"

namespace memsim {

const std::vector<ModelInfo>& builtin_models() {
  static const std::vector<ModelInfo> models{mlp_model(), chain_model(), resnet_model()};
  return models;
}

const ModelInfo* find_model(std::string_view name) {
  for (const auto& m : builtin_models())
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace memsim
