#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/workload/models/models.h"
#include "sim/workload/op_kinds.h"
#include "sim/workload/recomputed_ops.h"

using namespace memsim;

// Every kind a built-in generator emits is known, so a device can set its efficiency.
TEST(OpKinds, GeneratorsEmitOnlyKnownKinds) {
  for (const auto& [spec, name] : std::vector<std::pair<std::string, std::string>>{
           {"model: resnet\ndepth: 18\nbatch: 1\noptimizer: adam\n", "resnet"},
           {"model: resnet\ndepth: 50\nbatch: 1\noptimizer: sgd\n", "resnet"},
           {"model: mlp\nbatch: 2\n", "mlp"},
           {"model: chain\nlayers: 3\nbatch: 2\n", "chain"},
           {"model: rnn\nlayers: 2\nhidden: 8\ninput_size: 4\nseq_len: 3\nbatch: 2\n", "rnn"},
           {"model: lstm\nlayers: 2\nhidden: 8\ninput_size: 4\nseq_len: 3\nbatch: 2\n", "lstm"},
           {"model: gru\nlayers: 2\nhidden: 8\ninput_size: 4\nseq_len: 3\nbatch: 2\n", "gru"},
           {"model: bert\nseq_len: 8\nbatch: 2\n", "bert"},
           {"model: bert\nhead: mlm\nseq_len: 8\nbatch: 2\nattention_impl: fused\n", "bert"},
           {"model: gpt2\nseq_len: 8\nbatch: 2\n", "gpt2"},
           {"model: gpt\nlayers: 2\nhidden: 64\nheads: 4\nseq_len: 8\nbatch: 2\nblocks_only: true\n", "gpt"},
           {"model: llama\nlayers: 2\nhidden: 64\nheads: 4\nintermediate: 96\nvocab: 100\nseq_len: 8\nbatch: 2\n", "llama"},
           {"model: llama\nlayers: 2\nhidden: 64\nheads: 4\nintermediate: 96\nvocab: 100\nseq_len: 8\nbatch: 2\nattention_impl: fused\n", "llama"},
           // Megatron's fused kernels switched from their defaults (issue 27)
           {"model: llama\nlayers: 2\nhidden: 64\nheads: 4\nintermediate: 96\nvocab: 100\nseq_len: 8\nbatch: 2\ndtype: bf16\n"
            "fused_layer_norm: false\nfused_softmax: false\nfused_swiglu: true\n", "llama"},
           {"model: gpt\nlayers: 2\nhidden: 64\nheads: 4\nseq_len: 8\nbatch: 2\ndtype: fp16\nattention_impl: selective\n"
            "fused_layer_norm: false\nfused_softmax: false\nfused_bias_gelu: false\n", "gpt"}}) {
    auto node = ConfigNode::parse_text(spec, "t.yaml");
    const ModelInfo* info = find_model(name);
    Trace t = info->generate(Params(node, info->params, "model " + name, {"model", "name"}));
    for (const Op& op : t.ops) EXPECT_TRUE(is_known_op_kind(op.kind)) << name << ": " << op.kind;
  }
}

TEST(RecomputedOps, TheMarksAreFoundWhereverTheyStand) {
  // "@recompute" at the end or before a micro-batch's "@mbK"; ".recompute" with the op's own
  // name after it. Names with many '.' and '@' before the mark, and near misses after them.
  EXPECT_TRUE(is_recomputed_op("stage0:model.layers.3.mlp.up_proj@recompute"));
  EXPECT_TRUE(is_recomputed_op("stage0:model.layers.3.mlp.up_proj@recompute@mb12"));
  EXPECT_TRUE(is_recomputed_op("stage0:model.layers.3.self_attn.recompute.qk@mb1"));
  EXPECT_TRUE(is_recomputed_op("a@recomputed@b.recomputed.c@recompute"));  // the last mark counts
  EXPECT_FALSE(is_recomputed_op("stage0:model.layers.3.mlp.up_proj@recomputed"));
  EXPECT_FALSE(is_recomputed_op("stage0:model.layers.3.mlp.up_proj@recompute.x"));
  EXPECT_FALSE(is_recomputed_op("model.layers.3.self_attn.recompute"));  // the tag needs a name after it
  EXPECT_FALSE(is_recomputed_op("model.layers.3.self_attn.recomputed.qk"));
  EXPECT_FALSE(is_recomputed_op("recompute"));
  EXPECT_FALSE(is_recomputed_op(""));
  EXPECT_FALSE(is_recomputed_op("@recomput"));
}
