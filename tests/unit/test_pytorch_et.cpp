// The PyTorch Execution Trace importer on small hand-written files of both schemas
// (tests/data/et/), checked buffer by buffer and op by op against what the files say.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sim/core/error.h"
#include "sim/workload/importers/importers.h"
#include "sim/workload/importers/pytorch_et.h"
#include "sim/workload/op_kinds.h"

using namespace memsim;

namespace {

std::string data(const std::string& name) { return std::string(MEMSIM_SOURCE_DIR) + "/tests/data/et/" + name; }

Trace load(const std::string& name) {
  const std::string path = data(name);
  EXPECT_EQ(sniff_foreign_trace(path), ForeignTrace::pytorch_et);
  return import_foreign_trace(path, ForeignTrace::pytorch_et);
}

struct B {
  std::string name;
  std::uint64_t bytes;
  Category category;
  OpId producer;
  bool persistent;
};

void expect_buffers(const Trace& t, const std::vector<B>& want) {
  ASSERT_EQ(t.buffers.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(t.buffers[i].name, want[i].name);
    EXPECT_EQ(t.buffers[i].bytes, want[i].bytes);
    EXPECT_EQ(t.buffers[i].category, want[i].category);
    EXPECT_EQ(t.buffers[i].producer, want[i].producer);
    EXPECT_EQ(t.buffers[i].persistent, want[i].persistent);
  }
}

using Ids = std::vector<BufferId>;

}  // namespace

// Schema 1.0.x: linear = t (a view, no op) + addmm (a kernel: its expand and copy_ are how it
// works, not ops of their own); relu_ in place; a storage id recycled by mul; a tensor list.
TEST(PytorchEt, Schema10NestingViewsInPlaceRecycledStorageTensorList) {
  Trace t = load("nested-1.0.json");
  EXPECT_EQ(t.name, "nested-1.0");
  const OpId none = kNoOp;
  expect_buffers(t, {
                        {"storage201", 48, Category::input, none, true},  // weight, read through t()
                        {"storage202", 12, Category::input, none, true},  // bias: 3 floats, not the 6 of its expand
                        {"storage200", 32, Category::input, none, true},
                        {"storage203@13", 24, Category::activation, 0, false},
                        {"storage204@30", 8, Category::activation, 2, false},
                        {"storage203@40", 8, Category::activation, 3, false},  // id 203 again: a new allocation
                        {"storage205@50", 16, Category::activation, 4, false},
                    });
  ASSERT_EQ(t.ops.size(), 5u);
  const std::vector<std::string> kinds{"matmul", "relu", "sum", "mul", "cat"};
  const std::vector<Ids> inputs{{1, 2, 0}, {}, {3}, {4}, {5, 4}};
  const std::vector<Ids> outputs{{3}, {}, {4}, {5}, {6}};
  const std::vector<Ids> updates{{}, {3}, {}, {}, {}};
  for (OpId o = 0; o < 5; ++o) {
    SCOPED_TRACE(t.ops[o].name);
    EXPECT_EQ(t.ops[o].kind, kinds[o]);
    EXPECT_EQ(t.ops[o].inputs, inputs[o]);
    EXPECT_EQ(t.ops[o].outputs, outputs[o]);
    EXPECT_EQ(t.ops[o].updates, updates[o]);
    EXPECT_EQ(t.ops[o].phase, Phase::forward);
    EXPECT_TRUE(is_known_op_kind(t.ops[o].kind));
  }
  EXPECT_EQ(t.ops[0].name, "aten::addmm#13");
  EXPECT_DOUBLE_EQ(t.ops[0].flops, 2 * 6 * 4 + 6);  // [2,4] x [4,3] plus the bias
  EXPECT_DOUBLE_EQ(t.ops[1].flops, 6);
  Liveness l = compute_liveness(t);
  EXPECT_EQ(l.last_use[3], 2u);  // relu_'s result dies after sum
  EXPECT_EQ(l.last_use[4], 4u);
  EXPECT_EQ(l.last_use[5], 4u);
  EXPECT_EQ(l.last_use[6], kNoOp);
  EXPECT_EQ(l.dies_after[2], Ids{3});
  EXPECT_EQ(l.dies_after[4], (Ids{4, 5, 6}));
}

// Schema 1.1.x: a training step. Broadcast strides size the bias by its storage; the weight
// gradient is stolen by AccumulateGrad; SGD's in-place updates make the weight a weight and
// the momentum optimizer state.
TEST(PytorchEt, Schema11TrainingStepCategoriesAndPhases) {
  Trace t = load("step-1.1.json");
  const OpId none = kNoOp;
  expect_buffers(t, {
                        {"storage100", 32, Category::input, none, true},
                        {"storage101", 48, Category::weight, none, true},
                        {"storage102@3", 24, Category::activation, 0, false},
                        {"storage103", 12, Category::input, none, true},
                        {"storage104@4", 24, Category::activation, 1, false},
                        {"storage106@7", 48, Category::gradient, 2, true},
                        {"storage107", 48, Category::optimizer_state, none, true},
                    });
  ASSERT_EQ(t.ops.size(), 6u);
  const std::vector<Phase> phases{Phase::forward, Phase::forward, Phase::backward,
                                  Phase::optimizer, Phase::optimizer, Phase::optimizer};
  const std::vector<Ids> inputs{{0, 1}, {2, 3}, {0, 4}, {}, {5}, {6}};
  const std::vector<Ids> outputs{{2}, {4}, {5}, {}, {}, {}};
  const std::vector<Ids> updates{{}, {}, {}, {6}, {6}, {1}};
  for (OpId o = 0; o < 6; ++o) {
    SCOPED_TRACE(t.ops[o].name);
    EXPECT_EQ(t.ops[o].phase, phases[o]);
    EXPECT_EQ(t.ops[o].inputs, inputs[o]);
    EXPECT_EQ(t.ops[o].outputs, outputs[o]);
    EXPECT_EQ(t.ops[o].updates, updates[o]);
  }
  EXPECT_DOUBLE_EQ(t.ops[0].flops, 2 * 6 * 4);
  EXPECT_DOUBLE_EQ(t.ops[2].flops, 2 * 12 * 2);
  EXPECT_DOUBLE_EQ(t.ops[0].bytes_moved, 32 + 48 + 24);
  ASSERT_TRUE(t.ops[0].measured_s.has_value());  // the node's inclusive_dur, in microseconds
  EXPECT_DOUBLE_EQ(*t.ops[0].measured_s, 12.5e-6);
  EXPECT_FALSE(t.ops[1].measured_s.has_value());
  Liveness l = compute_liveness(t);
  EXPECT_EQ(l.last_use[2], 1u);
  EXPECT_EQ(l.last_use[4], 2u);
  EXPECT_EQ(l.dies_after[1], Ids{2});
  EXPECT_EQ(l.dies_after[2], Ids{4});
}

TEST(PytorchEt, RecognisedByContentOnly) {
  EXPECT_TRUE(looks_like_pytorch_et("{\n  \"schema\": \"1.0.1\", \"pid\": 7, \"nodes\": ["));
  EXPECT_FALSE(looks_like_pytorch_et("{\"format\": \"memsim-trace\", \"version\": 1}"));
  EXPECT_FALSE(looks_like_pytorch_et("model: resnet\nschema: 1\n"));
  EXPECT_EQ(sniff_foreign_trace(std::string(MEMSIM_SOURCE_DIR) + "/tests/scenarios/data/three_ops.json"),
            ForeignTrace::none);
}

TEST(PytorchEt, ErrorsNameTheNode) {
  auto message = [](const std::string& text) {
    try {
      import_pytorch_et(text, "t.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("{\"schema\": \"1.0.1\", \"nodes\": ["),
            "t.json:1:31: truncated JSON: syntax error while parsing value - unexpected end of input; "
            "expected '[', '{', or a literal");
  EXPECT_EQ(message("{\"schema\": \"3.0.0\", \"nodes\": []}"),
            "t.json: schema: expected an Execution Trace schema 1.0.x or 1.1.x, got '3.0.0'");
  const std::string orphan =
      "{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": 5, \"name\": \"aten::relu\", \"parent\": 4, "
      "\"inputs\": [], \"input_types\": [], \"outputs\": [], \"output_types\": []}]}";
  EXPECT_EQ(message(orphan), "t.json: node 5 (aten::relu): parent 4 is not a node in the file");
  const std::string short_tensor =
      "{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": 5, \"name\": \"aten::relu\", \"parent\": 0, "
      "\"inputs\": [[1, 2, 3]], \"input_types\": [\"Tensor(float)\"], \"outputs\": [], \"output_types\": []}]}";
  EXPECT_EQ(message(short_tensor),
            "t.json: node 5 (aten::relu): inputs[0]: expected a tensor [id, storage, offset, numel, "
            "itemsize, device], got [1,2,3]");
}

// A GPU trace: host tensors (the batch before .to("cuda"), wrapped scalars) are not in the
// device's memory, so only the cuda ones become buffers.
TEST(PytorchEt, GpuTraceCountsOnlyDeviceTensors) {
  const std::string text =
      "{\"schema\": \"1.1.0\", \"pid\": 1, \"nodes\": ["
      "{\"id\": 3, \"name\": \"aten::_to_copy\", \"ctrl_deps\": 0, \"attrs\": [], "
      "\"inputs\": {\"values\": [[1, 10, 0, 8, 4, \"cpu\"]], \"shapes\": [[2, 4]], \"types\": [\"Tensor(float)\"], \"strides\": [[4, 1]]}, "
      "\"outputs\": {\"values\": [[2, 11, 0, 8, 4, \"cuda:0\"]], \"shapes\": [[2, 4]], \"types\": [\"Tensor(float)\"], \"strides\": [[4, 1]]}}, "
      "{\"id\": 4, \"name\": \"aten::mul\", \"ctrl_deps\": 0, \"attrs\": [], "
      "\"inputs\": {\"values\": [[2, 11, 0, 8, 4, \"cuda:0\"], [5, 12, 0, 1, 8, \"cpu\"]], \"shapes\": [[2, 4], []], "
      "\"types\": [\"Tensor(float)\", \"Tensor(double)\"], \"strides\": [[4, 1], []]}, "
      "\"outputs\": {\"values\": [[6, 13, 0, 8, 4, \"cuda:0\"]], \"shapes\": [[2, 4]], \"types\": [\"Tensor(float)\"], \"strides\": [[4, 1]]}}]}";
  Trace t = import_pytorch_et(text, "gpu.json");
  ASSERT_EQ(t.buffers.size(), 2u);
  EXPECT_EQ(t.buffers[0].name, "storage11@3");
  EXPECT_EQ(t.buffers[1].name, "storage13@4");
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_TRUE(t.ops[0].inputs.empty());
  EXPECT_EQ(t.ops[1].inputs, std::vector<BufferId>{0});
  EXPECT_DOUBLE_EQ(t.ops[1].flops, 8);
}
