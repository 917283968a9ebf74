#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/workload/models/models.h"
#include "sim/workload/op_kinds.h"

using namespace memsim;

// Every kind a built-in generator emits is known, so a device can set its efficiency.
TEST(OpKinds, GeneratorsEmitOnlyKnownKinds) {
  for (const auto& [spec, name] : std::vector<std::pair<std::string, std::string>>{
           {"model: resnet\ndepth: 18\nbatch: 1\noptimizer: adam\n", "resnet"},
           {"model: resnet\ndepth: 50\nbatch: 1\noptimizer: sgd\n", "resnet"},
           {"model: mlp\nbatch: 2\n", "mlp"},
           {"model: chain\nlayers: 3\nbatch: 2\n", "chain"}}) {
    auto node = ConfigNode::parse_text(spec, "t.yaml");
    const ModelInfo* info = find_model(name);
    Trace t = info->generate(Params(node, info->params, "model " + name, {"model", "name"}));
    for (const Op& op : t.ops) EXPECT_TRUE(is_known_op_kind(op.kind)) << name << ": " << op.kind;
  }
}
