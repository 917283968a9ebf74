// The PyTorch Execution Trace importer on small hand-written files of both schemas
// (tests/data/et/, and one captured step, scoped-1.0.json), checked buffer by buffer and op
// by op against what the files say.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/report/peak.h"
#include "sim/workload/importers/importers.h"
#include "sim/workload/importers/pytorch_et.h"
#include "sim/workload/importers/scopes.h"
#include "sim/workload/op_kinds.h"

using namespace memsim;

namespace {

std::string data(const std::string& name) { return std::string(MEMSIM_SOURCE_DIR) + "/tests/data/et/" + name; }

Trace load(const std::string& name) {
  const std::string path = data(name);
  EXPECT_EQ(sniff_foreign_trace(path), find_importer("pytorch-et"));
  return import_foreign_trace(path, find_importer("pytorch-et"));
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
Ids ids(std::span<const BufferId> s) { return Ids(s.begin(), s.end()); }

// What importing `text` as t.json says: its error, or "no error".
std::string message(const std::string& text) {
  try {
    import_pytorch_et(text, "t.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

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
  EXPECT_EQ(ids(l.dies_after[2]), Ids{3});
  EXPECT_EQ(ids(l.dies_after[4]), (Ids{4, 5, 6}));
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
  EXPECT_EQ(ids(l.dies_after[1]), Ids{2});
  EXPECT_EQ(ids(l.dies_after[2]), Ids{4});
}

TEST(PytorchEt, RecognisedByContentOnly) {
  EXPECT_TRUE(looks_like_pytorch_et("{\n  \"schema\": \"1.0.1\", \"pid\": 7, \"nodes\": ["));
  EXPECT_FALSE(looks_like_pytorch_et("{\"format\": \"memsim-trace\", \"version\": 1}"));
  EXPECT_FALSE(looks_like_pytorch_et("model: resnet\nschema: 1\n"));
  EXPECT_EQ(sniff_foreign_trace(std::string(MEMSIM_SOURCE_DIR) + "/tests/scenarios/data/three_ops.json"), nullptr);
}

TEST(PytorchEt, ErrorsNameTheNode) {
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
  // Durations: a number of microseconds an op can take (durations.h), as in every trace.
  auto timed = [](const std::string& dur) {
    return "{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": 5, \"name\": \"aten::relu\", \"parent\": 0, "
           "\"inclusive_dur\": " + dur + ", \"inputs\": [], \"input_types\": [], \"outputs\": [], \"output_types\": []}]}";
  };
  const std::string expected = "t.json: node 5 (aten::relu): inclusive_dur: expected a time in microseconds from 0 to "
                               "3.6e+09 (an hour), got ";
  EXPECT_EQ(message(timed("-3")), expected + "-3");
  EXPECT_EQ(message(timed("\"12\"")), expected + "\"12\"");
  EXPECT_EQ(message(timed("9223372036854775808")), expected + "9223372036854775808");
  EXPECT_EQ(message(timed("3600000000.5")), expected + "3600000000.5");
}

// The nodes are read one at a time, yet the document is judged whole: malformed JSON anywhere,
// in a value the reader never reads or after a bad node, is the error, located; then a missing
// or unknown schema; then the first bad node. Keys count in any order, the last of a repeated one.
TEST(PytorchEt, ReadANodeAtATimeTheDocumentIsJudgedWhole) {
  EXPECT_EQ(message("{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": \"x\", \"name\": \"a\"}, {\"id\": 2"),
            "t.json:1:65: truncated JSON: syntax error while parsing object - unexpected end of input; expected '}'");
  EXPECT_EQ(message("{\"schema\": \"1.1.0\", \"nodes\": [{\"id\": 1, \"name\": \"aten::relu\", "
                    "\"inputs\": {\"values\": [[1, 2, 0"),
            "t.json:1:93: truncated JSON: syntax error while parsing array - unexpected end of input; expected ']'");
  EXPECT_EQ(message("{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": 1, \"name\": \"a\", \"parent\": 0, "
                    "\"fw_parent\": 1.2.3}]}"),
            "t.json:1:83: malformed JSON: syntax error while parsing object - invalid literal; last read: '1.2.'; "
            "expected '}'");
  EXPECT_EQ(message("{\"schema\": \"1.0.1\", \"pid\": tru, \"nodes\": []}"),
            "t.json:1:31: malformed JSON: syntax error while parsing value - invalid literal; "
            "last read: '\"pid\": tru,'");
  // A string before a ':' where a ',' belongs (simdjson's skipping would take it for a key).
  EXPECT_EQ(message("{\"schema\": \"1.0.1\", \"nodes\": [\"a\": {\"id\": 1}]}"),
            "t.json:1:34: malformed JSON: syntax error while parsing array - unexpected ':'; expected ']'");
  EXPECT_EQ(message("{\"schema\": \"1.0.1\", \"pid\": \"b\": 2, \"nodes\": []}"),
            "t.json:1:31: malformed JSON: syntax error while parsing object - unexpected ':'; expected '}'");
  EXPECT_EQ(message("{\"schema\": \"1.0.1\", \"nodes\": []} x"),
            "t.json:1:34: truncated JSON: syntax error while parsing value - invalid literal; last read: "
            "'\"nodes\": []} x'; expected end of input");
  EXPECT_EQ(message("{\"nodes\": [{\"id\": \"x\"}], \"schema\": \"0.9\"}"),
            "t.json: schema: expected an Execution Trace schema 1.0.x or 1.1.x, got '0.9'");
  EXPECT_EQ(message("{\"nodes\": [{\"id\": \"x\"}], \"pid\": 1}"),
            "t.json: schema: missing; expected an Execution Trace schema 1.0.x or 1.1.x");
  EXPECT_EQ(message("{\"nodes\": [{\"id\": 1, \"name\": \"aten::relu\", \"parent\": 0}], \"schema\": \"1.0.1\"}"),
            "no error");
  EXPECT_EQ(message("{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": \"x\", \"name\": \"a\"}], \"nodes\": []}"),
            "no error");
  EXPECT_EQ(message("{\"schema\": \"1.0.1\", \"nodes\": [], \"nodes\": 5}"),
            "t.json: nodes: expected a list of nodes, got 5");
  // The whole document's depth limit (1024), wherever the nesting is.
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  auto in_node = [&](int depth) {
    return "{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": 1, \"name\": \"a\", \"parent\": 0, \"q\": " + nested(depth) +
           "}]}";
  };
  auto beside = [&](int depth) { return "{\"schema\": \"1.0.1\", \"nodes\": [], \"q\": " + nested(depth) + "}"; };
  const std::string too_deep =
      "t.json: malformed JSON: The JSON document was too deep (too many nested objects and arrays)";
  EXPECT_EQ(message(in_node(1021)), "no error");
  EXPECT_EQ(message(in_node(1022)), too_deep);
  EXPECT_EQ(message(beside(1023)), "no error");
  EXPECT_EQ(message(beside(1024)), too_deep);
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

// torch 2.x's layout under a 1.0.3 schema (chosen by the nodes, not the version), DDP on two
// threads and two ProfilerSteps: the backward thread's nodes are listed after the main
// thread's, yet run between its forward and its optimizer step.
TEST(PytorchEt, StepsInStartOrderAcrossThreadsWithTheirPhases) {
  Trace t = load("ddp_two_steps-2.x.json");
  // The optimizer's ops run in its record_function: that is their scope.
  const std::vector<std::string> names{"aten::mm#61",
                                       "aten::sum#65",
                                       "aten::mm#72",
                                       "c10d::allreduce_#76",
                                       "Optimizer.step#SGD.step/aten::_foreach_mul_#94",
                                       "Optimizer.step#SGD.step/aten::_foreach_add_#96",
                                       "Optimizer.step#SGD.step/aten::_foreach_add_#97"};
  const std::vector<Phase> phases{Phase::forward, Phase::forward, Phase::backward, Phase::backward,
                                  Phase::optimizer, Phase::optimizer, Phase::optimizer};
  ASSERT_EQ(t.ops.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    EXPECT_EQ(t.ops[i].name, names[i]);
    EXPECT_EQ(t.ops[i].phase, phases[i]);
  }
  expect_buffers(t, {
                        {"storage100", 32, Category::input, kNoOp, true},
                        {"storage101", 48, Category::weight, kNoOp, true},            // _foreach_add_'s self
                        {"storage62@61", 24, Category::activation, 0, false},
                        {"storage63@65", 4, Category::activation, 1, false},
                        {"storage64@72", 48, Category::gradient, 2, true},            // AccumulateGrad keeps it
                        {"storage150", 48, Category::optimizer_state, kNoOp, true},  // momentum: only the step
                    });
  EXPECT_EQ(t.parameters, 12u);  // the weight's 4 x 3 elements
  // The collective: DDP's all-reduce of the gradient, in place, over its process group.
  const Op& ar = t.ops[3];
  EXPECT_EQ(ar.kind, "all_reduce");
  EXPECT_EQ(ar.updates, Ids{4});
  EXPECT_TRUE(ar.inputs.empty());
  EXPECT_EQ(ar.message_bytes, 48u);
  EXPECT_EQ(ar.group, "0 (default_pg), 2 ranks");
  EXPECT_TRUE(is_known_op_kind(ar.kind));
  // The foreach kernels are ops with every tensor of their lists.
  EXPECT_EQ(t.ops[5].updates, Ids{1});
  EXPECT_EQ(t.ops[5].inputs, Ids{5});
  EXPECT_EQ(t.ops[6].inputs, Ids{4});
  EXPECT_EQ(t.ops[6].updates, Ids{5});
  EXPECT_EQ(t.import_notes,
            (std::vector<std::string>{
                "imported ProfilerStep#2 of 2 (#1, #2: the last complete one; --step N picks another); 10 ops of the "
                "other steps and outside them left out",
                "1 collective calls that move no data (waits, barriers) are no ops (wait x1)"}));
}

// --step picks another step; the first creates the momentum (zeros_like in the step), which
// is state all the same.
TEST(PytorchEt, StepPicksAProfilerStepAndStateMadeInTheStepIsState) {
  ImportOptions o;
  o.step = 1;
  Trace t = import_foreign_trace(data("ddp_two_steps-2.x.json"), find_importer("pytorch-et"), o);
  ASSERT_EQ(t.ops.size(), 9u);
  EXPECT_EQ(t.ops[0].name, "aten::mm#11");
  EXPECT_EQ(t.ops[4].name, "Optimizer.step#SGD.step/aten::empty_like#42");
  EXPECT_EQ(t.ops[4].phase, Phase::optimizer);
  const Buffer& m = t.buffers.back();
  EXPECT_EQ(m.name, "Optimizer.step#SGD.step/aten::empty_like#42:out");
  EXPECT_EQ(m.category, Category::optimizer_state);
  EXPECT_TRUE(m.persistent);
  EXPECT_EQ(t.import_notes.front(), "imported ProfilerStep#1 of 2 (#1, #2: --step 1); 8 ops of the other steps and "
                                    "outside them left out");
  o.step = 3;
  try {
    import_foreign_trace(data("ddp_two_steps-2.x.json"), find_importer("pytorch-et"), o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), data("ddp_two_steps-2.x.json") + ": --step 3: the trace has ProfilerStep #1, #2");
  }
}

namespace {

// A one-node trace in torch 2.x's layout: `inputs` and `outputs` are {values, shapes, types}.
std::string one_node(const std::string& schema, const std::string& node) {
  return "{\"schema\": \"" + schema + "\", \"pid\": 1, \"nodes\": [" + node + "]}";
}

}  // namespace

// all_gather's outputs are a list of lists of tensors: flattened, each a buffer.
TEST(PytorchEt, NestedTensorListsAndTritonKernels) {
  const std::string gather =
      "{\"id\": 30, \"name\": \"record_param_comms\", \"ctrl_deps\": 0, \"attrs\": [], "
      "\"inputs\": {\"values\": [[[14, 15, 0, 1, 4, \"cuda:0\"]], 12, 82149104, 0, \"all_gather\", [], [], 2], "
      "\"shapes\": [[[1]], [], [], [], [], [], [], []], \"types\": [\"GenericList[Tensor(float)]\", \"Int\", \"Int\", "
      "\"Int\", \"String\", \"GenericList[]\", \"GenericList[]\", \"Int\"]}, "
      "\"outputs\": {\"values\": [[[[19, 20, 0, 1, 4, \"cuda:0\"], [5, 23, 0, 1, 4, \"cuda:0\"]]]], "
      "\"shapes\": [[[[1], [1]]]], \"types\": [\"GenericList[GenericList[Tensor(float),Tensor(float)]]\"]}}";
  Trace t = import_pytorch_et(one_node("1.0.2-chakra.0.0.4", gather), "g.json");
  ASSERT_EQ(t.ops.size(), 1u);
  EXPECT_EQ(t.ops[0].kind, "all_gather");
  EXPECT_EQ(t.ops[0].group, "82149104, 2 ranks");
  EXPECT_EQ(t.ops[0].inputs.size(), 1u);
  EXPECT_EQ(t.ops[0].outputs.size(), 2u);  // both gathered tensors, new storages
  EXPECT_EQ(t.ops[0].message_bytes, 8u);
  // An Inductor kernel names its outputs among its arguments: the storages new there.
  const std::string triton =
      "{\"id\": 16, \"name\": \"triton_poi_fused_add_cos_0\", \"ctrl_deps\": 0, "
      "\"attrs\": [{\"name\": \"kernel_backend\", \"type\": \"string\", \"value\": \"triton\"}], "
      "\"inputs\": {\"values\": [[15, 4, 0, 16, 4, \"cuda:0\"], [17, 5, 0, 16, 4, \"cuda:0\"], 16], "
      "\"shapes\": [[4, 4], [4, 4], []], \"types\": [\"Tensor(float)\", \"Tensor(float)\", \"Int\"]}, "
      "\"outputs\": {\"values\": [], \"shapes\": [], \"types\": []}}";
  const std::string mm =
      "{\"id\": 13, \"name\": \"aten::mm\", \"ctrl_deps\": 0, \"attrs\": [{\"name\": \"op_schema\", \"type\": "
      "\"string\", \"value\": \"aten::mm(Tensor self, Tensor mat2) -> Tensor\"}], "
      "\"inputs\": {\"values\": [[11, 2, 0, 16, 4, \"cuda:0\"], [14, 1, 0, 16, 4, \"cuda:0\"]], \"shapes\": [[4, 4], "
      "[4, 4]], \"types\": [\"Tensor(float)\", \"Tensor(float)\"]}, "
      "\"outputs\": {\"values\": [[15, 4, 0, 16, 4, \"cuda:0\"]], \"shapes\": [[4, 4]], \"types\": [\"Tensor(float)\"]}}";
  t = import_pytorch_et(one_node("1.1.1-chakra.0.0.4", mm + ", " + triton), "pt2.json");
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[1].name, "triton_poi_fused_add_cos_0#16");
  EXPECT_EQ(t.ops[1].kind, "elementwise");
  EXPECT_EQ(t.ops[1].inputs, Ids{2});   // mm's output, read
  EXPECT_EQ(t.ops[1].outputs, Ids{3});  // storage 5, written
  EXPECT_DOUBLE_EQ(t.ops[1].flops, 16);
}

// The layout is the nodes', whatever the schema string says; a contradiction is noted.
TEST(PytorchEt, LayoutByTheNodesNotTheVersion) {
  const std::string node =
      "{\"id\": 3, \"name\": \"aten::relu\", \"ctrl_deps\": 0, \"attrs\": [], "
      "\"inputs\": {\"values\": [[1, 10, 0, 8, 4, \"cpu\"]], \"shapes\": [[8]], \"types\": [\"Tensor(float)\"]}, "
      "\"outputs\": {\"values\": [[2, 11, 0, 8, 4, \"cpu\"]], \"shapes\": [[8]], \"types\": [\"Tensor(float)\"]}}";
  for (const char* schema : {"1.0.2-chakra.0.0.4", "1.0.3-chakra.0.0.4", "1.0.4-chakra.0.0.4", "1.1.0-chakra.0.0.4"}) {
    SCOPED_TRACE(schema);
    Trace t = import_pytorch_et(one_node(schema, node), "r.json");
    ASSERT_EQ(t.ops.size(), 1u);
    EXPECT_EQ(t.ops[0].kind, "relu");
    EXPECT_TRUE(t.import_notes.empty());
  }
  Trace t = import_pytorch_et(one_node("1.0.1", node), "r.json");
  ASSERT_EQ(t.ops.size(), 1u);
  EXPECT_EQ(t.import_notes, std::vector<std::string>{"schema '1.0.1' names the old (torch 1.13) node layout, but the "
                                                     "nodes are in the new (torch 2.x) one; read as the nodes are"});
}

// A step captured with module scopes (workloads/capture wraps each submodule's forward in a
// record_function named by its path; scoped_net.py is the model): each op is named in the
// nearest scope around it, a backward op in its forward op's (by autograd's sequence
// number), and what it allocates after it; the loss, outside every module, keeps the node's name.
TEST(PytorchEt, OpsAndWhatTheyMakeAreNamedInTheirScope) {
  Trace t = load("scoped-1.0.json");
  std::map<std::string, std::vector<std::string>> layers;  // "phase kind" -> each op's layer
  for (const Op& op : t.ops) layers[fmt::format("{} {}", to_string(op.phase), op.kind)].push_back(layer_of(op.name));
  using L = std::vector<std::string>;
  EXPECT_EQ(layers["forward matmul"], (L{"blocks.0.fc", "blocks.1.fc", "head"}));
  EXPECT_EQ(layers["backward matmul"],
            (L{"head", "head", "blocks.1.fc", "blocks.1.fc", "blocks.0.fc", "blocks.0.fc"}));
  EXPECT_EQ(layers["forward layer_norm"], (L{"blocks.0.norm", "blocks.1.norm"}));
  // The first block's norm shares its sequence number with zero_grad's ops before it: the
  // op that undoes it is the last forward op of that number, not the first.
  EXPECT_EQ(layers["backward layer_norm_backward"], (L{"blocks.1.norm", "blocks.0.norm"}));
  EXPECT_EQ(layers["forward tanh"], (L{"pool"}));  // the model's own record_function
  for (const Op& op : t.ops) {
    SCOPED_TRACE(op.name);
    if (op.name.find('/') == std::string::npos) continue;
    for (std::size_t k = 0; k < op.outputs.size(); ++k)
      EXPECT_EQ(t.buffers[op.outputs[k]].name,
                op.outputs.size() == 1 ? op.name + ":out" : fmt::format("{}:out{}", op.name, k));
  }
  // Outside every scope: the loss keeps the node's name, its outputs the storage's.
  const auto loss = std::find_if(t.ops.begin(), t.ops.end(), [](const Op& op) { return op.kind == "log_softmax"; });
  ASSERT_NE(loss, t.ops.end());
  EXPECT_EQ(loss->name.rfind("aten::_log_softmax#", 0), 0u) << loss->name;
  ASSERT_FALSE(loss->outputs.empty());
  EXPECT_EQ(t.buffers[loss->outputs[0]].name.rfind("storage", 0), 0u);
}

// Every op in a scope carries its name: a label too long to be one names no op, and the notes
// say so; the scopes around and beside it still name theirs.
TEST(PytorchEt, AScopeTooLongToBeANameNamesNothing) {
  std::ifstream in(data("scoped-1.0.json"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string label = "\"name\": \"blocks.1.fc\"";
  const auto at = text.find(label);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, label.size(), "\"name\": \"" + std::string(kMaxScopeName + 1, 'x') + "\"");
  const Trace t = import_pytorch_et(text, "long.json");
  std::vector<std::string> forward;
  for (const Op& op : t.ops)
    if (op.kind == "matmul" && op.phase == Phase::forward) forward.push_back(op.name.substr(0, op.name.find('#')));
  EXPECT_EQ(forward, (std::vector<std::string>{"blocks.0.fc/aten::addmm", "aten::addmm", "head/aten::addmm"}));
  EXPECT_NE(std::find(t.import_notes.begin(), t.import_notes.end(),
                      "1 record_function labels over 512 characters name no ops (the ops under them keep their "
                      "nodes' names)"),
            t.import_notes.end());
}
