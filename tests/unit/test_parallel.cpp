// Data parallelism without SimGrid: the flows of NCCL's ring, the sharding arithmetic of
// DDP and ZeRO-1/2/3 on Llama 7B over 8 ranks, where the communication is placed, and the
// multi-node platform's naming.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <set>

#include "sim/core/config.h"
#include "sim/core/presets.h"
#include "sim/collectives/collectives.h"
#include "sim/platform/platform.h"
#include "sim/workload/parallel.h"
#include "sim/workload/trace_io.h"
#include "sim/workload/workload.h"
#include "tests/platform_helpers.h"

using namespace memsim;

namespace {

// The llama-7b preset's spec at `dp` ranks and ZeRO stage `zero`, for a test to set more.
ConfigNode llama_7b_spec(int dp, int zero) {
  const Preset* preset = find_preset("workloads", "llama-7b");
  EXPECT_NE(preset, nullptr);
  ConfigNode spec = ConfigNode::parse_text(preset->text, preset->path);
  spec.override_value({"parallel", "dp"}, std::to_string(dp), "test");
  spec.override_value({"parallel", "zero"}, std::to_string(zero), "test");
  return spec;
}

Trace llama_7b(int dp, int zero) { return generate_workload(llama_7b_spec(dp, zero)); }

// The module a name is a path into, by the rule for ops that carry no unit (the ZeRO-3
// collectives are named after their unit's module).
std::string named_unit(const std::string& name) {
  Trace t;
  Op op;
  op.name = name;
  t.add_op(op);
  assign_units_from_names(t);
  return t.units.at(t.ops[0].unit).name;
}

// A rank's model state: weights and master weights, optimizer state (all persistent), and
// the gradients its optimizer steps read (full or shards).
struct ModelState {
  std::uint64_t weights = 0, optimizer = 0, gradients = 0, comm_persistent = 0;
  std::uint64_t buffers = 0;  // how many were counted (each shard rounds up by < dp bytes)
  std::uint64_t total() const { return weights + optimizer + gradients; }
};
ModelState model_state(const Trace& t) {
  ModelState m;
  for (const Buffer& b : t.buffers) {
    if (!b.persistent) continue;
    if (b.category == Category::weight) m.weights += b.bytes, ++m.buffers;
    if (b.category == Category::optimizer_state) m.optimizer += b.bytes, ++m.buffers;
    if (b.category == Category::comm) m.comm_persistent += b.bytes;
  }
  std::set<BufferId> grads;
  for (const Op& op : t.ops)
    if (op.phase == Phase::optimizer)
      for (BufferId b : op.inputs)
        if (t.buffers[b].category == Category::gradient) grads.insert(b);
  for (BufferId b : grads) m.gradients += t.buffers[b].bytes, ++m.buffers;
  return m;
}

}  // namespace

namespace {
// The one phase of the default algorithm of `kind` on n ranks of one node.
CollectivePhase default_phase(std::string_view kind, std::uint64_t bytes, std::uint32_t n) {
  const GroupTopology one_node{std::vector<std::uint32_t>(n, 0), false};
  const auto phases = default_collective_algorithm(kind).phases(kind, bytes, one_node);
  return phases.empty() ? CollectivePhase{} : phases.front();
}
}  // namespace

TEST(CollectivePattern, RingAllReduceSendsTwoNMinusOneChunksToTheNextRank) {
  const CollectivePhase p = default_phase("all_reduce", 800, 4);
  ASSERT_EQ(p.flows.size(), 4u);
  EXPECT_EQ(p.steps, 6u);
  for (std::uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(p.flows[r].from, r);
    EXPECT_EQ(p.flows[r].to, (r + 1) % 4);
    EXPECT_EQ(p.flows[r].bytes, 6u * 200u);
  }
  EXPECT_EQ(default_phase("all_gather", 800, 4).flows[0].bytes, 3u * 200u);
  EXPECT_EQ(default_phase("reduce_scatter", 800, 4).steps, 3u);
  EXPECT_EQ(default_phase("all_to_all", 800, 4).flows.size(), 12u);
  EXPECT_EQ(default_phase("broadcast", 800, 4).flows.size(), 3u);
  EXPECT_EQ(default_phase("broadcast", 800, 4).flows[0].bytes, 800u);
  EXPECT_TRUE(default_phase("all_reduce", 800, 1).flows.empty());
  EXPECT_TRUE(is_communication_kind("reduce_scatter"));
  EXPECT_FALSE(is_communication_kind("matmul"));
}

TEST(Parallel, ModelStatePerGpuFollowsTheShardingArithmeticForLlama7BOnEightRanks) {
  // Mixed-precision AdamW: bf16 weights and gradients (2 + 2 bytes per parameter), fp32
  // master weights (4) and two fp32 moments (8): 16P in all.
  const double N = 8;
  const Trace ddp = llama_7b(8, 0);
  const double P = static_cast<double>(ddp.parameters);
  ASSERT_NEAR(P, 6'738'415'616.0, 0);
  const std::map<int, double> expected{{0, 16 * P}, {1, 4 * P + 12 * P / N}, {2, 2 * P + 14 * P / N}, {3, 16 * P / N}};
  for (const auto& [zero, bytes] : expected) {
    const Trace t = zero == 0 ? ddp : llama_7b(8, zero);
    const ModelState m = model_state(t);
    // Each shard is rounded up to a whole byte: at most N - 1 bytes per buffer.
    EXPECT_NEAR(static_cast<double>(m.total()), bytes, static_cast<double>(m.buffers) * (N - 1)) << "zero " << zero;
    EXPECT_EQ(t.parallel.ranks, 8u);
    ASSERT_EQ(t.groups.size(), 1u);
    EXPECT_EQ(t.groups[0].ranks.size(), 8u);
  }
  // DDP's buckets are persistent comm buffers of the gradients' size on top (PyTorch's
  // default gradient_as_bucket_view=False); ZeRO-3's gathered parameters are transient.
  EXPECT_EQ(model_state(ddp).comm_persistent, static_cast<std::uint64_t>(2 * P));
  EXPECT_EQ(model_state(llama_7b(8, 3)).comm_persistent, 0u);
}

TEST(Parallel, DdpAllReducesEveryGradientOnceInBucketsAsBackwardMakesThem) {
  const Trace t = llama_7b(8, 0);
  std::uint64_t reduced = 0, grads = 0;
  std::set<BufferId> seen;
  OpId last_backward = 0;
  for (const Op& op : t.ops)
    if (op.phase == Phase::backward && op.kind != "all_reduce") last_backward = op.id;
  bool overlapped = false;
  for (const Op& op : t.ops) {
    if (op.kind != "all_reduce") continue;
    EXPECT_EQ(op.group, "dp");
    EXPECT_LE(op.message_bytes, (25u << 20) + 2 * 131'072'000u);  // one large tensor may exceed it
    reduced += op.message_bytes;
    for (BufferId b : op.updates)
      if (t.buffers[b].category == Category::gradient) EXPECT_TRUE(seen.insert(b).second);
    overlapped |= op.id < last_backward;
  }
  for (const Buffer& b : t.buffers)
    if (b.category == Category::gradient) grads += b.bytes;
  EXPECT_EQ(reduced, grads);
  EXPECT_TRUE(overlapped);  // buckets go out while backward still runs
}

TEST(Parallel, LocalDdpReducesTheWholeGradientBufferOnceAfterTheBackward) {
  // Megatron-LM's --DDP-impl local: the gradients live in one contiguous buffer, all-reduced
  // (zero 0) or reduce-scattered (zero 1, its distributed optimizer) once, after the last
  // backward op; no bucket memory of its own.
  for (int zero : {0, 1}) {
    SCOPED_TRACE(zero);
    ConfigNode spec = llama_7b_spec(8, zero);
    const Trace bucketed = generate_workload(spec);
    spec.override_value({"parallel", "ddp"}, "local", "test");
    const Trace t = generate_workload(spec);
    const char* kind = zero == 0 ? "all_reduce" : "reduce_scatter";
    OpId last_backward = 0;
    std::size_t reductions = 0;
    std::uint64_t reduced = 0, grads = 0;
    for (const Op& op : t.ops)
      if (op.phase == Phase::backward && op.kind != kind) last_backward = op.id;
    for (const Op& op : t.ops)
      if (op.kind == kind) {
        ++reductions;
        reduced = op.message_bytes;
        EXPECT_GT(op.id, last_backward);
      }
    for (const Op& op : bucketed.ops)
      if (op.kind == kind) grads += op.message_bytes;
    EXPECT_EQ(reductions, 1u);
    EXPECT_EQ(reduced, grads);  // every gradient the buckets reduced
    EXPECT_EQ(model_state(t).comm_persistent, 0u);
  }
  ConfigNode bad = ConfigNode::parse_text("model: chain\nlayers: 2\nwidth: 8\nparallel: {dp: 2, zero: 3, ddp: local}\n",
                                          "w.yaml");
  try {
    generate_workload(bad);
    ADD_FAILURE() << "zero 3 with ddp local was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "w.yaml:4:33: parallel.ddp: local (one reduction after the backward) needs zero 0, 1 or 2, got zero 3 "
              "(which gathers and reduces per unit)");
  }
}

TEST(Parallel, HsdpShardsTheStateWithinAGroupAndAllReducesTheShardAcrossGroups) {
  // FSDP's HYBRID_SHARD on 16 ranks in groups of 8: the model state is 16P/8 (not 16P/16),
  // each unit's weights are gathered and its gradients reduce-scattered within the group
  // ("dp_shard", ranks 0-7), and each gradient shard is then all-reduced with the ranks
  // holding the same shard in the other group ("dp_replica", ranks 0 and 8).
  ConfigNode spec = llama_7b_spec(16, 3);
  const Trace full = generate_workload(spec);
  spec.override_value({"parallel", "hsdp"}, "8", "test");
  const Trace t = generate_workload(spec);
  const double P = static_cast<double>(t.parameters);
  const ModelState m = model_state(t);
  EXPECT_NEAR(static_cast<double>(m.total()), 16 * P / 8, static_cast<double>(m.buffers) * 7);
  EXPECT_NEAR(static_cast<double>(model_state(full).total()), 16 * P / 16, static_cast<double>(m.buffers) * 15);
  EXPECT_EQ(t.parallel.ranks, 16u);
  EXPECT_EQ(t.parallel.dp_replicas, 2u);
  std::map<std::string, std::vector<std::uint32_t>> groups;
  for (const ProcessGroup& g : t.groups) groups[g.name] = g.ranks;
  EXPECT_EQ(groups["dp_shard"], (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(groups["dp_replica"], (std::vector<std::uint32_t>{0, 8}));
  // Gathers and reduce-scatters within the group, of the same bytes as full sharding's; one
  // all-reduce of each unit's gradient shard across the groups, right after its reduce-scatter.
  std::map<std::string, std::uint64_t> bytes, bytes_full;
  for (const Op& op : full.ops)
    if (!op.group.empty()) bytes_full[std::string(op.kind)] += op.message_bytes;
  std::size_t reduce_scatters = 0, all_reduces = 0;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const Op& op = t.ops[i];
    if (op.group.empty()) continue;
    bytes[std::string(op.kind)] += op.message_bytes;
    if (op.kind == "all_gather" || op.kind == "reduce_scatter") EXPECT_EQ(op.group, "dp_shard") << op.name;
    if (op.kind == "reduce_scatter") {
      ++reduce_scatters;
      ASSERT_LT(i + 1, t.ops.size());
      const Op& ar = t.ops[i + 1];
      EXPECT_EQ(ar.kind, "all_reduce") << op.name;
      EXPECT_EQ(ar.group, "dp_replica");
      EXPECT_EQ(ar.updates, op.outputs);  // the shards the reduce-scatter made
      std::uint64_t shards = 0;
      for (BufferId b : op.outputs) shards += t.buffers[b].bytes;
      EXPECT_EQ(ar.message_bytes, shards);
      EXPECT_NEAR(static_cast<double>(shards), static_cast<double>(op.message_bytes) / 8,
                  static_cast<double>(op.outputs.size()));
    }
    if (op.kind == "all_reduce") ++all_reduces;
  }
  EXPECT_GT(reduce_scatters, 30u);
  EXPECT_EQ(all_reduces, reduce_scatters);
  EXPECT_EQ(bytes["all_gather"], bytes_full["all_gather"]);
  EXPECT_EQ(bytes["reduce_scatter"], bytes_full["reduce_scatter"]);
  EXPECT_EQ(bytes_full["all_reduce"], 0u);
  EXPECT_NE(t.description.find("hsdp 8 x 2 replicas"), std::string::npos) << t.description;
}

TEST(Parallel, HsdpIsRefusedWhereItMeansNothing) {
  auto error = [](const std::string& parallel) {
    try {
      generate_workload(ConfigNode::parse_text("model: chain\nlayers: 2\nwidth: 8\nparallel: " + parallel + "\n",
                                               "w.yaml"));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error("{dp: 8, zero: 2, hsdp: 4}"),
            "w.yaml:4:34: parallel.hsdp: shards the model state within groups of data-parallel ranks as zero 3 does "
            "(FSDP's HYBRID_SHARD): it needs zero 3, got zero 2");
  EXPECT_EQ(error("{dp: 8, zero: 3, hsdp: 3}"),
            "w.yaml:4:34: parallel.hsdp: expected a divisor of dp (8): the ranks of one shard group, got '3'");
  EXPECT_EQ(error("{dp: 8, zero: 3, hsdp: 8}"), "(no error)");  // one group: FULL_SHARD
}

TEST(Parallel, OverlappedParamGatherGathersEachBucketBeforeItsFirstForwardUse) {
  // Megatron's --overlap-param-gather: the distributed optimizer's all-gather of a bucket's
  // updated weight shards runs before the bucket's first use in the forward (the next step's,
  // in the steady state), not after the optimizer step; the same gathers of the same bytes.
  for (int zero : {1, 2}) {
    SCOPED_TRACE(zero);
    ConfigNode spec = llama_7b_spec(8, zero);
    const Trace after = generate_workload(spec);
    spec.override_value({"parallel", "overlap_param_gather"}, "true", "test");
    const Trace t = generate_workload(spec);
    std::uint64_t gathered = 0, gathered_after = 0;
    std::size_t gathers = 0, gathers_after = 0;
    for (const Op& op : after.ops)
      if (op.kind == "all_gather") {
        EXPECT_EQ(op.phase, Phase::optimizer);
        gathered_after += op.message_bytes, ++gathers_after;
      }
    for (std::size_t i = 0; i < t.ops.size(); ++i) {
      const Op& op = t.ops[i];
      if (op.kind != "all_gather") continue;
      EXPECT_EQ(op.phase, Phase::forward) << op.name;
      gathered += op.message_bytes, ++gathers;
      // The next op that is no gather reads one of the weights it gathers, and no op before
      // it does.
      std::size_t j = i + 1;
      while (t.ops[j].kind == "all_gather") ++j;
      bool reads = false;
      for (BufferId w : op.updates)
        reads |= std::find(t.ops[j].inputs.begin(), t.ops[j].inputs.end(), w) != t.ops[j].inputs.end();
      EXPECT_TRUE(reads) << op.name << " then " << t.ops[j].name;
      for (std::size_t k = 0; k < i; ++k)
        for (BufferId w : op.updates)
          EXPECT_EQ(std::find(t.ops[k].inputs.begin(), t.ops[k].inputs.end(), w), t.ops[k].inputs.end())
              << t.ops[k].name << " reads a weight before " << op.name;
    }
    EXPECT_EQ(gathers, gathers_after);
    EXPECT_EQ(gathered, gathered_after);
    EXPECT_GT(gathers, 1u);
  }
  ConfigNode bad = ConfigNode::parse_text(
      "model: chain\nlayers: 2\nwidth: 8\nparallel: {dp: 2, zero: 3, overlap_param_gather: true}\n", "w.yaml");
  try {
    generate_workload(bad);
    ADD_FAILURE() << "zero 3 with overlap_param_gather was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.overlap_param_gather: gathers the updated weight shards of zero 1 or 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(Parallel, ZeroThreeGathersEachBlockBeforeItsForwardAndItsBackward) {
  const Trace t = llama_7b(8, 3);
  std::map<std::string, int> gathers;
  for (const Op& op : t.ops)
    if (op.kind == "all_gather") ++gathers[named_unit(op.name)];
  EXPECT_EQ(gathers["model.layers.0"], 2);
  EXPECT_EQ(gathers["model.layers.31"], 2);
  // A block's forward reads its gathered parameters, never the shards.
  for (const Op& op : t.ops)
    if (op.phase == Phase::forward && op.kind == "linear")
      for (BufferId b : op.inputs) EXPECT_NE(t.buffers[b].category, Category::weight) << op.name;
  // Each gather after the first waits for an op before it (prefetch: the previous block's start).
  int waiting = 0;
  for (const Op& op : t.ops)
    if (op.kind == "all_gather" && !op.waits_for.empty()) {
      ++waiting;
      EXPECT_LT(op.waits_for[0], op.id);
    }
  EXPECT_GT(waiting, 60);
}

TEST(Parallel, TheNativeTraceKeepsGroupsWaitsAndLayout) {
  const Trace t = llama_7b(4, 3);
  std::ostringstream out;
  write_trace_json(t, out);
  const Trace back = read_trace(ConfigNode::parse_text(out.str(), "t.json"));
  ASSERT_EQ(back.groups.size(), 1u);
  EXPECT_EQ(back.groups[0].ranks, t.groups[0].ranks);
  EXPECT_EQ(back.parallel.ranks, 4u);
  ASSERT_EQ(back.ops.size(), t.ops.size());
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    EXPECT_EQ(back.ops[i].waits_for, t.ops[i].waits_for);
    EXPECT_EQ(back.ops[i].group, t.ops[i].group);
  }
  // The file does not say how its ranks split into replicas: no samples to count; the
  // tokens of each are kept.
  EXPECT_EQ(t.samples, 1u);
  EXPECT_EQ(back.samples, 0u);
  EXPECT_EQ(back.sample_tokens, 4096u);
}

TEST(Parallel, TheNativeTraceKeepsTheSamplesOfOneReplica) {
  ConfigNode spec = llama_7b_spec(1, 0);
  spec.override_value({"layers"}, "1", "test");
  spec.override_value({"batch"}, "3", "test");
  spec.override_value({"parallel", "micro_batches"}, "2", "test");
  const Trace t = generate_workload(spec);
  EXPECT_EQ(t.samples, 6u);  // 2 micro-batches of 3
  std::ostringstream out;
  write_trace_json(t, out);
  const Trace back = read_trace(ConfigNode::parse_text(out.str(), "t.json"));
  EXPECT_EQ(back.samples, 6u);
  EXPECT_EQ(back.sample_tokens, 4096u);
}

TEST(Parallel, WithoutUnitsOpsBelongToTheirModulePaths) {
  Trace t;
  const BufferId w = t.add_buffer("model.layers.3.self_attn.q_proj.weight", 4, Category::weight, true);
  const BufferId g = t.add_buffer("grad", 4, Category::gradient);
  for (const char* name : {"layer1.0.conv1", "lm_head", "model.layers.3.mlp", "loss", "stem.conv", "adam_step"}) {
    Op op;
    op.name = name;
    t.add_op(op);
  }
  t.units.push_back({"stem", false});
  t.ops[4].unit = 0;  // a unit given is kept
  t.ops[5].phase = Phase::optimizer;  // a step is its weight's
  t.ops[5].inputs = {g};
  t.ops[5].updates = {w};
  assign_units_from_names(t);
  auto unit = [&](const Op& op) {
    return t.units.at(op.unit).name + (t.units.at(op.unit).layer ? " (layer)" : "");
  };
  EXPECT_EQ(unit(t.ops[0]), "layer1.0 (layer)");
  EXPECT_EQ(unit(t.ops[1]), "lm_head");
  EXPECT_EQ(unit(t.ops[2]), "model.layers.3 (layer)");
  EXPECT_EQ(unit(t.ops[3]), "loss");
  EXPECT_EQ(unit(t.ops[4]), "stem");
  EXPECT_EQ(t.ops[5].unit, t.ops[2].unit);  // one unit per name
  EXPECT_EQ(t.units.size(), 5u);
}

TEST(Parallel, GeneratorsMarkTheirBlocksAsUnits) {
  // Every op of a block is the block's, its backward and its optimizer steps too;
  // what is outside the blocks belongs to its module path.
  const Trace t = generate_workload(ConfigNode::parse_text(
      "model: llama\nlayers: 3\nhidden: 64\nheads: 4\nintermediate: 128\nvocab: 100\nseq_len: 16\nbatch: 1\n"
      "recompute: full\n",
      "t.yaml"));
  std::set<std::string> layers;
  for (const ModelUnit& u : t.units)
    if (u.layer) layers.insert(u.name);
  EXPECT_EQ(layers, (std::set<std::string>{"model.layers.0", "model.layers.1", "model.layers.2"}));
  for (const Op& op : t.ops) {
    ASSERT_NE(op.unit, kNoUnit) << op.name;
    const ModelUnit& u = t.units.at(op.unit);
    EXPECT_EQ(op.name.starts_with("model.layers."), u.layer) << op.name << " in " << u.name;
    if (u.layer) EXPECT_TRUE(op.name.starts_with(u.name + ".")) << op.name << " in " << u.name;
  }
  // A parameter's unit is its optimizer step's: the module of the weight it updates.
  for (const Op& op : t.ops)
    if (op.phase == Phase::optimizer) {
      ASSERT_FALSE(op.updates.empty()) << op.name;
      const std::string& weight = t.buffers.at(op.updates[0]).name;
      EXPECT_TRUE(weight.starts_with(t.units.at(op.unit).name + ".")) << weight;
    }
  // Resnet's residual blocks too.
  const Trace r = generate_workload(ConfigNode::parse_text("model: resnet\ndepth: 18\nbatch: 1\nimage_size: 32\n", "r.yaml"));
  std::size_t blocks = 0;
  for (const ModelUnit& u : r.units) blocks += u.layer ? 1 : 0;
  EXPECT_EQ(blocks, 8u);
}

TEST(MultiNode, NodesAreRenumberedAcrossTheFabric) {
  const PlatformSpec p = test::preset_platform("dgx-h100-superpod", "4");
  EXPECT_EQ(p.nodes, 4u);
  EXPECT_EQ(p.compute_devices().size(), 32u);
  EXPECT_EQ(p.devices[*p.find_device("gpu8")].node, 1u);
  EXPECT_TRUE(p.find_tier("host3.dram"));
  EXPECT_TRUE(p.find_tier("gpu31.hbm"));
  int nics = 0, nvlinks = 0;
  for (const LinkSpec& l : p.links) {
    nics += l.name.rfind("ib", 0) == 0;
    nvlinks += l.name.rfind("nvlink", 0) == 0;
  }
  EXPECT_EQ(nics, 32);  // one NIC per GPU
  EXPECT_EQ(nvlinks, 32);
  bool rail = false;
  for (const LinkSpec& l : p.links)
    if (l.name == "ib9") rail = l.from == "gpu9.hbm" && l.to == "rail1";
  EXPECT_TRUE(rail);
}

TEST(Parallel, GradientAccumulationRunsForwardAndBackwardPerMicroBatchThenReducesOnce) {
  const Preset* preset = find_preset("workloads", "resnet18");
  ASSERT_NE(preset, nullptr);
  ConfigNode spec = ConfigNode::parse_text(preset->text, preset->path);
  spec.override_value({"batch"}, "16", "test");
  spec.override_value({"parallel", "dp"}, "8", "test");
  spec.override_value({"parallel", "global_batch"}, "512", "test");  // 512 / (16 x 8) = 4
  const Trace t = generate_workload(spec);
  EXPECT_NE(t.description.find("4 micro-batches"), std::string::npos) << t.description;
  int convs = 0, accumulates = 0, all_reduces = 0;
  OpId last_accumulate = 0, first_all_reduce = kNoOp;
  for (const Op& op : t.ops) {
    convs += op.name == "conv1" || op.name.rfind("conv1@mb", 0) == 0;
    if (op.kind == "accumulate_grad" && op.name.find(".accumulate@mb") != std::string::npos) {
      ++accumulates;
      last_accumulate = op.id;
    }
    if (op.kind == "all_reduce") {
      ++all_reduces;
      first_all_reduce = std::min(first_all_reduce, op.id);
    }
  }
  EXPECT_EQ(convs, 4);
  EXPECT_EQ(accumulates, 3 * 62);  // ResNet-18's 62 parameter tensors, in micro-batches 1-3
  EXPECT_GT(all_reduces, 0);
  // DDP's no_sync(): nothing is reduced before the last micro-batch's backward begins.
  OpId last_backward_start = kNoOp;
  for (const Op& op : t.ops)
    if (op.phase == Phase::backward && op.name.find("@mb3") != std::string::npos && last_backward_start == kNoOp)
      last_backward_start = op.id;
  EXPECT_GT(first_all_reduce, last_backward_start);
  EXPECT_LT(first_all_reduce, last_accumulate);  // but then overlapped with it
  // Weights and optimizer state are not copied per micro-batch.
  const Trace one = [&] {
    ConfigNode s1 = ConfigNode::parse_text(preset->text, preset->path);
    s1.override_value({"batch"}, "16", "test");
    s1.override_value({"parallel", "dp"}, "8", "test");
    return generate_workload(s1);
  }();
  EXPECT_EQ(model_state(t).weights, model_state(one).weights);
  EXPECT_EQ(model_state(t).optimizer, model_state(one).optimizer);
}

TEST(Parallel, Zero3GathersEveryUnitInEveryMicroBatch) {
  const Preset* preset = find_preset("workloads", "llama-7b");
  ASSERT_NE(preset, nullptr);
  ConfigNode spec = ConfigNode::parse_text(preset->text, preset->path);
  spec.override_value({"layers"}, "2", "test");
  spec.override_value({"seq_len"}, "512", "test");
  spec.override_value({"parallel", "dp"}, "4", "test");
  spec.override_value({"parallel", "zero"}, "3", "test");
  spec.override_value({"parallel", "micro_batches"}, "3", "test");
  const Trace t = generate_workload(spec);
  std::map<std::string, int> gathers, scatters;
  for (const Op& op : t.ops) {
    if (op.kind == "all_gather") ++gathers[named_unit(op.name)];
    if (op.kind == "reduce_scatter") ++scatters[named_unit(op.name)];
  }
  EXPECT_EQ(gathers["model.layers.1"], 2 * 3);  // forward and backward, three micro-batches
  EXPECT_EQ(scatters["model.layers.1"], 1);     // the accumulated gradients, once
}
