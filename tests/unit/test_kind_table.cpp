// The op kinds of a step and the efficiency entries that time them (sim/report/kind_table.h):
// totals per kind, which table entry a kind takes, and the keys no op of a run reaches.
#include <gtest/gtest.h>

#include <string>

#include "sim/core/config.h"
#include "sim/report/kind_table.h"

using namespace memsim;

namespace {

// gpu0 and gpu1 alike (`tables` each), and a host that runs nothing.
PlatformSpec two_gpus(const std::string& tables) {
  std::string gpus;
  for (const char* name : {"gpu0", "gpu1"})
    gpus += std::string("  ") + name +
            ":\n"
            "    kind: gpu\n"
            "    compute: {fp32: 10TFLOPS}\n" +
            tables +
            "    tiers:\n"
            "      hbm: {role: compute, capacity: 16GiB, bandwidth: 1TB/s}\n";
  return load_platform(ConfigNode::parse_text("name: box\ndevices:\n" + gpus +
                                                  "  host:\n"
                                                  "    kind: cpu\n"
                                                  "    compute: {fp32: 1TFLOPS}\n"
                                                  "    efficiency: {default: 0.5, adam_step: 0.4}\n"
                                                  "    tiers:\n"
                                                  "      dram: {role: offload, capacity: 64GiB, bandwidth: 100GB/s}\n",
                                              "box.yaml"));
}

Op op(const std::string& kind, Phase phase, double flops, double bytes, std::uint32_t device = 0) {
  Op o;
  o.kind = kind;
  o.name = kind;
  o.phase = phase;
  o.flops = flops;
  o.bytes_moved = bytes;
  o.device = device;
  return o;
}

Trace trace(std::vector<Op> ops) {
  Trace t;
  t.name = "t";
  for (Op& o : ops) {
    o.id = static_cast<OpId>(t.ops.size());
    t.ops.push_back(std::move(o));
  }
  return t;
}

}  // namespace

TEST(KindTable, TotalsPerKindMostFlopsFirst) {
  Op reduce = op("all_reduce", Phase::backward, 0, 0);
  reduce.message_bytes = 1000;
  const Trace t = trace({op("linear", Phase::forward, 10, 4), op("relu", Phase::forward, 1, 8),
                         op("linear_backward", Phase::backward, 30, 8), op("linear", Phase::forward, 10, 4),
                         reduce, op("relu_backward", Phase::backward, 1, 8), op("adam_step", Phase::optimizer, 0, 16)});
  const auto kinds = op_kind_totals(t);
  ASSERT_EQ(kinds.size(), 6u);
  // FLOPs descending; relu and relu_backward tie on FLOPs and bytes, so by name; the two
  // without FLOPs by bytes moved.
  EXPECT_EQ(kinds[0].kind, "linear_backward");
  EXPECT_EQ(kinds[1].kind, "linear");
  EXPECT_EQ(kinds[1].ops, 2u);
  EXPECT_EQ(kinds[1].flops, 20);
  EXPECT_EQ(kinds[1].bytes_moved, 8);
  EXPECT_EQ(kinds[2].kind, "relu");
  EXPECT_EQ(kinds[3].kind, "relu_backward");
  EXPECT_EQ(kinds[4].kind, "adam_step");
  EXPECT_TRUE(kinds[4].phases[static_cast<int>(Phase::optimizer)]);
  EXPECT_FALSE(kinds[4].phases[static_cast<int>(Phase::forward)]);
  EXPECT_EQ(kinds[5].kind, "all_reduce");
  EXPECT_TRUE(kinds[5].communication);
  EXPECT_EQ(kinds[5].message_bytes, 1000u);
  EXPECT_FALSE(kinds[0].communication);
}

TEST(KindTable, EntryIsTheKindsKeyOrTheDefaultAndMemoryFallsBackToEfficiency) {
  const PlatformSpec only = two_gpus("    efficiency: {default: 0.8, linear: 0.7}\n");
  const DeviceSpec& d = only.devices[0];
  EXPECT_EQ(efficiency_entry(d, "linear").key, "efficiency.linear");
  EXPECT_EQ(efficiency_entry(d, "linear").value, 0.7);
  EXPECT_EQ(efficiency_entry(d, "relu").key, "efficiency.default");
  EXPECT_EQ(efficiency_entry(d, "relu").value, 0.8);
  // No memory table: the kind's efficiency entry times both terms.
  EXPECT_EQ(memory_efficiency_entry(d, "linear").key, "efficiency.linear");
  EXPECT_EQ(memory_efficiency_entry(d, "relu").key, "efficiency.default");
  const PlatformSpec both = two_gpus("    efficiency: {default: 0.8}\n    memory_efficiency: {default: 0.6, relu: 0.9}\n");
  const DeviceSpec& m = both.devices[0];
  EXPECT_EQ(memory_efficiency_entry(m, "relu").key, "memory_efficiency.relu");
  EXPECT_EQ(memory_efficiency_entry(m, "relu").value, 0.9);
  EXPECT_EQ(memory_efficiency_entry(m, "linear").key, "memory_efficiency.default");
  EXPECT_EQ(memory_efficiency_entry(m, "linear").value, 0.6);
  // The entries are the values the cost model takes.
  for (const char* kind : {"relu", "linear", "conv2d"}) {
    EXPECT_EQ(efficiency_entry(m, kind).value, m.efficiency_for(kind)) << kind;
    EXPECT_EQ(memory_efficiency_entry(m, kind).value, m.memory_efficiency_for(kind)) << kind;
  }
}

TEST(KindTable, UnusedKeysArePerDeviceThatRunsOps) {
  const PlatformSpec p = two_gpus(
      "    efficiency: {default: 0.8, matmul: 0.8, linear: 0.7, conv2d: 0.6}\n"
      "    memory_efficiency: {relu: 0.9}\n");
  // gpu0 runs linear and relu; gpu1 linear only; the host (op device 2) nothing.
  const Trace t = trace({op("linear", Phase::forward, 1, 1, 0), op("relu", Phase::forward, 1, 1, 0),
                         op("linear", Phase::forward, 1, 1, 1)});
  const auto unused = unused_efficiency_keys(t, p);
  ASSERT_EQ(unused.size(), 2u);
  EXPECT_EQ(unused[0].device, "gpu0");
  EXPECT_EQ(unused[0].efficiency, (std::vector<std::string>{"conv2d", "matmul"}));
  EXPECT_TRUE(unused[0].memory_efficiency.empty());
  EXPECT_EQ(unused[1].device, "gpu1");
  EXPECT_EQ(unused[1].memory_efficiency, std::vector<std::string>{"relu"});
  EXPECT_EQ(qualified_keys(unused[1]), (std::vector<std::string>{"gpu1.efficiency.conv2d", "gpu1.efficiency.matmul",
                                                                 "gpu1.memory_efficiency.relu"}));
  // Every key matched: nothing to say.
  EXPECT_TRUE(unused_efficiency_keys(trace({op("linear", Phase::forward, 1, 1, 0), op("relu", Phase::forward, 1, 1, 0),
                                            op("matmul", Phase::forward, 1, 1, 0), op("conv2d", Phase::forward, 1, 1, 0)}),
                                     two_gpus("    efficiency: {default: 0.8, matmul: 0.8, conv2d: 0.6}\n"))
                  .empty());
}

TEST(KindTable, NoteGroupsDevicesWithTheSameKeys) {
  std::vector<UnusedEfficiencyKeys> unused;
  for (int d = 0; d < 4; ++d) unused.push_back({"gpu" + std::to_string(d), {"conv2d", "matmul"}, {}});
  unused.push_back({"gpu4", {"matmul"}, {"relu"}});
  unused.push_back({"gpu5", {}, {"relu"}});
  EXPECT_EQ(unused_efficiency_lines(unused, "memsim info D W --op-kinds"),
            (std::vector<std::string>{
                "gpu0-3: efficiency keys conv2d, matmul match no op of this run (its kinds: memsim info D W --op-kinds)",
                "gpu4: efficiency key matmul and memory_efficiency key relu match no op of this run (its kinds: "
                "memsim info D W --op-kinds)",
                "gpu5: memory_efficiency key relu matches no op of this run (its kinds: memsim info D W --op-kinds)"}));
  // A pipeline's simulated ranks, a stage apart, with the same keys: one line.
  std::vector<UnusedEfficiencyKeys> stages;
  for (int s = 0; s < 16; ++s) stages.push_back({"gpu" + std::to_string(1024 * s), {"conv2d"}, {}});
  EXPECT_EQ(unused_efficiency_lines(stages, "K"),
            (std::vector<std::string>{"gpu0, gpu1024, ... gpu15360 (16 of them): efficiency key conv2d matches no op "
                                      "of this run (its kinds: K)"}));
  stages.resize(3);
  EXPECT_EQ(unused_efficiency_lines(stages, "K"),
            (std::vector<std::string>{"gpu0, gpu1024, gpu2048: efficiency key conv2d matches no op of this run (its "
                                      "kinds: K)"}));
}

TEST(KindTable, TextTableShowsEachKindsEntryAndTheUnusedKeys) {
  const PlatformSpec p = two_gpus("    efficiency: {default: 0.8, matmul: 0.8, linear: 0.7}\n");
  const Trace t = trace({op("linear", Phase::forward, 30, 4), op("linear_backward", Phase::backward, 60, 8),
                         op("relu", Phase::forward, 10, 8)});
  EXPECT_EQ(op_kinds_text(t, &p, &p.devices[0]),
            "t: 3 ops of 3 kinds; the entries of gpu0's tables that time them (box)\n"
            "  kind             ops  FLOPs   share  bytes moved  phases    efficiency   memory_efficiency\n"
            "  linear_backward    1     60   60.0%          8 B  backward  default 0.8  efficiency.default 0.8\n"
            "  linear             1     30   30.0%          4 B  forward   linear 0.7   efficiency.linear 0.7\n"
            "  relu               1     10   10.0%          8 B  forward   default 0.8  efficiency.default 0.8\n"
            "  total              3    100  100.0%         20 B\n"
            "  memory_efficiency 'efficiency.KIND': gpu0's memory_efficiency table names neither the kind nor a "
            "default, so the kind's efficiency entry times the memory-bound term too\n"
            "  gpu0's efficiency key matmul matches no kind of this workload\n");
}
