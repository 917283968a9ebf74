// How a pipeline splits a step, without the engine: the schedules' orders, which tensors
// cross between stages and where the weights go.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/workload/parallel.h"
#include "sim/workload/pipeline.h"
#include "sim/workload/workload.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

std::string order_of(const std::vector<MicroBatchBlock>& order) {
  std::string out;
  for (const MicroBatchBlock& b : order)
    out += (out.empty() ? "" : " ") + std::string(b.forward ? "F" : "B") + std::to_string(b.mb) +
           (b.chunk > 0 ? "." + std::to_string(b.chunk) : "");
  return out;
}

}  // namespace

TEST(PipelineSplit, SchedulesRunTheirOrders) {
  // PipeDream-Flush on 4 stages: stage s warms up with 3 - s forwards.
  EXPECT_EQ(order_of(pipeline_order(PipelineSchedule::one_f_one_b, 4, 0, 6, 1)),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(order_of(pipeline_order(PipelineSchedule::one_f_one_b, 4, 3, 6, 1)),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than stages: all forwards, then all backwards.
  EXPECT_EQ(order_of(pipeline_order(PipelineSchedule::one_f_one_b, 4, 0, 2, 1)), "F0 F1 B0 B1");
  EXPECT_EQ(order_of(pipeline_order(PipelineSchedule::gpipe, 4, 2, 3, 1)), "F0 F1 F2 B0 B1 B2");
  // Megatron's interleaving, 2 stages x 2 chunks, 4 micro-batches, stage 1: warm-up
  // 2 (p - s - 1) + (v - 1) p = 2; forwards go chunk 0 for micro-batches 0 and 1, then
  // chunk 1; backwards start with the last chunk.
  EXPECT_EQ(order_of(pipeline_order(PipelineSchedule::interleaved, 2, 1, 4, 2)),
            "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
  EXPECT_THROW(pipeline_order(PipelineSchedule::interleaved, 4, 0, 6, 2), InputError);
}

TEST(PipelineSplit, OnlyNeighboursSendAndTheResidualGradientGoesStageByStage) {
  // Llama's residual stream forward and its gradient backward (one buffer accumulated in
  // place through the layers) cross between neighbouring stages only.
  const Trace t = workload(
      "model: llama\nlayers: 8\nhidden: 256\nheads: 4\nintermediate: 512\nvocab: 1000\nseq_len: 64\nbatch: 1\n"
      "parallel:\n  pp: 4\n  micro_batches: 2\n");
  const std::regex group(R"(pp\.(\d+)>(\d+):.*)");
  std::set<std::pair<int, int>> pairs;
  for (const Op& op : t.ops) {
    if (op.kind != "send" && op.kind != "recv") continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(op.group.str(), m, group)) << op.group;
    pairs.insert({std::stoi(m[1]), std::stoi(m[2])});
  }
  EXPECT_EQ(pairs, (std::set<std::pair<int, int>>{{0, 1}, {1, 2}, {2, 3}, {1, 0}, {2, 1}, {3, 2}}));
  // The stages hold their layers' weights: the embedding on the first, the head on the last.
  EXPECT_NE(find_buffer(t, "stage0:model.embed_tokens.weight"), nullptr);
  EXPECT_EQ(find_buffer(t, "stage3:model.embed_tokens.weight"), nullptr);
  EXPECT_NE(find_buffer(t, "stage3:lm_head.weight"), nullptr);
  EXPECT_NE(find_buffer(t, "stage1:model.layers.3.mlp.up_proj.weight"), nullptr);
  EXPECT_EQ(find_buffer(t, "stage1:model.layers.4.mlp.up_proj.weight"), nullptr);
  EXPECT_EQ(t.parallel.simulated, (std::vector<std::uint32_t>{0, 1, 2, 3}));
}

TEST(PipelineSplit, ATiedEmbeddingLivesOnTheFirstAndLastStage) {
  // GPT-2's LM head reads the token embedding: the last stage holds a copy with its own
  // optimizer step, as Megatron does. Each of the two stages accumulates its own part of the
  // gradient over the micro-batches (the first makes it in the embedding's backward, as an
  // untied embedding does) and the two all-reduce it once, before their steps.
  const Trace t = workload(
      "model: gpt\nlayers: 4\nhidden: 128\nheads: 4\nvocab: 1000\nseq_len: 64\nmax_positions: 64\nbatch: 1\n"
      "parallel:\n  pp: 2\n  micro_batches: 3\n");
  for (const char* stage : {"stage0:", "stage1:"}) {
    SCOPED_TRACE(stage);
    EXPECT_NE(find_buffer(t, std::string(stage) + "transformer.wte.weight"), nullptr);
    const Op& step = op_named(t, std::string(stage) + "transformer.wte.weight.step");
    const Op& reduce = op_named(t, std::string(stage) + "transformer.wte.weight.grad.all_reduce");
    EXPECT_EQ(reduce.phase, Phase::optimizer);
    EXPECT_EQ(reduce.message_bytes, 1000u * 128 * 4);
    EXPECT_LT(reduce.id, step.id);
    const ProcessGroup* group = t.find_group(reduce.group.str());
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(group->ranks, (std::vector<std::uint32_t>{0, 1}));
  }
  for (const Op& op : t.ops) EXPECT_FALSE(op.kind == "send" && op.name.find("wte.weight.grad") != std::string::npos) << op.name;
  // On the first stage the embedding's backward makes the gradient (no part added into it).
  EXPECT_EQ(op_named(t, "stage0:transformer.wte.backward").outputs.size(), 1u);
  EXPECT_EQ(t.buffers[op_named(t, "stage0:transformer.wte.backward").outputs[0]].name,
            "stage0:transformer.wte.weight.grad");
  EXPECT_THROW(op_named(t, "stage0:transformer.wte.weight.accumulate_grad"), std::logic_error);
}

TEST(PipelineSplit, TheTiedGradientsAllReduceWaitsForTheDataParallelReduction) {
  // With data parallelism the stages' all-reduce of the tied embedding's gradient comes after
  // the data-parallel reduction of it (Megatron's finalize_model_grads), whatever streams
  // they run on: it waits for the reduce-scatter that reads the gradient. (Without the wait a
  // slow reduce-scatter across nodes could still be reading a gradient the all-reduce had
  // finished with: an internal error found by the property test at dp x cp 8.)
  for (const int zero : {0, 3}) {
    SCOPED_TRACE(zero);
    const Trace t = workload(
        "model: gpt\nlayers: 4\nhidden: 128\nheads: 4\nvocab: 1000\nseq_len: 64\nmax_positions: 64\nbatch: 1\n"
        "parallel:\n  pp: 2\n  dp: 2\n  micro_batches: 2\n  zero: " + std::to_string(zero) + "\n");
    for (const char* stage : {"stage0:", "stage1:"}) {
      SCOPED_TRACE(stage);
      const Op& reduce = op_named(t, std::string(stage) + "transformer.wte.weight.grad.all_reduce");
      const BufferId grad = buffer_named(t, std::string(stage) + "transformer.wte.weight.grad").id;
      OpId reads = kNoOp;  // the data-parallel reduction of the gradient
      for (const Op& op : t.ops)
        if (op.id < reduce.id && std::string(op.group).rfind("dp", 0) == 0 &&
            (std::find(op.inputs.begin(), op.inputs.end(), grad) != op.inputs.end() ||
             std::find(op.updates.begin(), op.updates.end(), grad) != op.updates.end()))
          reads = op.id;  // zero 3's reduce-scatter reads it, DDP's bucket all-reduce updates it
      ASSERT_NE(reads, kNoOp);
      EXPECT_NE(std::find(reduce.waits_for.begin(), reduce.waits_for.end(), reads), reduce.waits_for.end());
    }
  }
}

TEST(PipelineSplit, AGlobalBatchThatDoesNotDivideSaysWhatItRuns) {
  // 64 samples over 8 ranks of batch 5: 2 micro-batches, 80 samples; the step says so.
  const std::string spec = "model: gpt\nlayers: 2\nhidden: 64\nheads: 4\nseq_len: 32\nmax_positions: 32\n"
                           "batch: 5\nparallel:\n  dp: 8\n  global_batch: 64\n";
  const Trace t = workload(spec);
  ASSERT_EQ(t.import_notes.size(), 1u);
  EXPECT_EQ(t.import_notes[0],
            "parallel.global_batch 64 is not a multiple of batch 5 x dp 8: 2 micro-batches, 80 samples per step");
  EXPECT_TRUE(workload("model: gpt\nlayers: 2\nhidden: 64\nheads: 4\nseq_len: 32\nmax_positions: 32\n"
                       "batch: 4\nparallel:\n  dp: 8\n  global_batch: 64\n")
                  .import_notes.empty());
}

TEST(PipelineSplit, ScatterGatherSendsOneTpShareAndGathersTheRestOverTp) {
  // Megatron's scatter_gather_tensors_in_pipeline: each of the tp ranks sends 1/tp of a
  // tensor that crosses stages, and the receiving stage all-gathers it from its tp group.
  const std::string spec =
      "model: gpt\nlayers: 4\nhidden: 64\nheads: 4\nvocab: 100\nmax_positions: 32\nseq_len: 32\nbatch: 2\n"
      "dtype: fp16\nparallel: {tp: 2, pp: 2, micro_batches: 2";
  struct Crossings {
    std::size_t sends = 0, recvs = 0, gathers = 0;
    std::uint64_t sent = 0, received = 0;
  };
  auto crossings = [](const Trace& t) {
    Crossings c;
    for (std::size_t i = 0; i < t.ops.size(); ++i) {
      const Op& op = t.ops[i];
      if (op.kind == "send") ++c.sends, c.sent += op.message_bytes;
      if (op.kind == "recv") ++c.recvs, c.received += op.message_bytes;
      if (op.kind != "all_gather" || op.name.find(".gather") == std::string::npos) continue;
      ++c.gathers;
      // Right after its receive, from the received share to the whole tensor.
      const Op& recv = t.ops[i - 1];
      EXPECT_EQ(recv.kind, "recv") << op.name;
      EXPECT_EQ(op.inputs, recv.outputs) << op.name;
      EXPECT_EQ(op.message_bytes, 2 * recv.message_bytes) << op.name;
      EXPECT_EQ(t.buffers[op.outputs[0]].bytes, op.message_bytes) << op.name;
      EXPECT_NE(op.group.str().find("tp"), std::string::npos) << op.group;
    }
    return c;
  };
  const Crossings whole = crossings(workload(spec + "}\n"));
  const Crossings split = crossings(workload(spec + ", scatter_gather: true}\n"));
  ASSERT_GT(whole.sends, 0u);
  EXPECT_EQ(whole.gathers, 0u);
  EXPECT_EQ(split.sends, whole.sends);
  EXPECT_EQ(split.recvs, whole.recvs);
  EXPECT_EQ(split.gathers, split.recvs);
  EXPECT_EQ(2 * split.sent, whole.sent);
  EXPECT_EQ(2 * split.received, whole.received);
  // With sequence parallelism each rank already holds 1/tp of the tokens: nothing changes.
  const Crossings sp = crossings(workload(spec + ", sp: true}\n"));
  const Crossings sp_split = crossings(workload(spec + ", sp: true, scatter_gather: true}\n"));
  EXPECT_EQ(sp_split.gathers, 0u);
  EXPECT_EQ(sp_split.sent, sp.sent);
  EXPECT_EQ(2 * sp.sent, whole.sent);
}

TEST(PipelineSplit, UnevenStagesPutTheGivenLayersOnTheFirstAndLastStage) {
  // Llama 3 405B's layout in small: one layer less on the first and the last stage
  // (Megatron's --decoder-first/last-pipeline-num-layers), the rest shared by the others.
  const std::string spec =
      "model: llama\nlayers: 10\nhidden: 64\nheads: 4\nintermediate: 128\nvocab: 100\nseq_len: 16\nbatch: 1\n"
      "parallel: {pp: 4, micro_batches: 4";
  auto layers_per_device = [](const Trace& t) {
    const std::regex layer(R"((?:^|[.:])layers\.(\d+)\.)");
    std::map<std::uint32_t, std::set<int>> per;
    for (const Op& op : t.ops) {
      std::smatch m;
      const bool crossing = op.kind == "send" || op.kind == "recv";  // named by the tensor they carry
      if (op.phase == Phase::forward && !crossing && std::regex_search(op.name, m, layer))
        per[op.device].insert(std::stoi(m[1]));
    }
    std::vector<std::set<int>> out;
    for (auto& [d, l] : per) out.push_back(l);
    return out;
  };
  const auto uneven = layers_per_device(workload(spec + ", first_stage_layers: 2, last_stage_layers: 2}\n"));
  ASSERT_EQ(uneven.size(), 4u);
  EXPECT_EQ(uneven[0], (std::set<int>{0, 1}));
  EXPECT_EQ(uneven[1], (std::set<int>{2, 3, 4}));
  EXPECT_EQ(uneven[2], (std::set<int>{5, 6, 7}));
  EXPECT_EQ(uneven[3], (std::set<int>{8, 9}));
  // Only the first given: the three others share the rest.
  const auto first = layers_per_device(workload(spec + ", first_stage_layers: 1}\n"));
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(first[0], (std::set<int>{0}));
  EXPECT_EQ(first[3], (std::set<int>{7, 8, 9}));
  // Counts that leave the others unequal shares, or are given without a pipeline, are
  // errors at the key.
  auto error_of_spec = [](const std::string& yaml) {
    try {
      workload(yaml);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error_of_spec(spec + ", first_stage_layers: 3}\n"),
            "w.yaml:9:57: parallel.first_stage_layers: llama: 10 layers, 3 on the first stage and the even share on the "
            "last, leave 7 for the other 3 stage(s): expected a positive multiple of 3 (the same on each)");
  EXPECT_EQ(error_of_spec("model: llama\nlayers: 4\nhidden: 64\nheads: 4\nintermediate: 128\nvocab: 100\n"
                          "parallel: {last_stage_layers: 1}\n"),
            "w.yaml:7:31: parallel.last_stage_layers: sets the layers of one pipeline stage: it needs pp of 2 or more");
}

TEST(PipelineSplit, StagesFollowTheUnitsTheGeneratorMarkedNotTheOpsNames) {
  // The same step with every block's number taken out of its names ("model.layers.2.mlp" ->
  // "model.layersC.mlp"): split by the units the generator wrote on its ops, it is the same
  // pipeline op for op; by names it would have no layers at all.
  const Trace step = generate(
      "model: llama\nlayers: 4\nhidden: 64\nheads: 4\nintermediate: 128\nvocab: 100\nseq_len: 16\nbatch: 1\n");
  Trace renamed = step;
  const std::regex block(R"(model\.layers\.(\d+)\.)");
  auto rename = [&](std::string& name) {
    std::smatch m;
    if (std::regex_search(name, m, block))
      name = m.prefix().str() + "model.layers" + static_cast<char>('A' + std::stoi(m[1])) + "." + m.suffix().str();
  };
  for (Op& op : renamed.ops) rename(op.name);
  for (Buffer& b : renamed.buffers) rename(b.name);
  for (ModelUnit& u : renamed.units) u.name += ".renamed";
  for (const Op& op : renamed.ops) ASSERT_FALSE(std::regex_search(op.name, block)) << op.name;
  ParallelSettings s;
  s.pp = 2;
  s.micro_batches = 2;
  const Trace a = parallelize(step, s), b = parallelize(renamed, s);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  std::size_t sends = 0;
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].kind, b.ops[i].kind) << a.ops[i].name << " / " << b.ops[i].name;
    EXPECT_EQ(a.ops[i].device, b.ops[i].device) << a.ops[i].name << " / " << b.ops[i].name;
    EXPECT_EQ(a.ops[i].message_bytes, b.ops[i].message_bytes) << a.ops[i].name;
    sends += a.ops[i].kind == "send" ? 1 : 0;
  }
  EXPECT_GT(sends, 0u);
  // Without the generator's units, the names are all there is, and they hold no layer.
  Trace unmarked = renamed;
  unmarked.units.clear();
  for (Op& op : unmarked.ops) op.unit = kNoUnit;
  EXPECT_THROW(parallelize(unmarked, s), InputError);
}
