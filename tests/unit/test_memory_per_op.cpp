// Bytes per op: what a step of a million layers (four million ops) costs to hold. The
// structures are sized so that the 10^6-layer chain runs in under 2 GB (bench/run_vs_bare.py
// --million measures the whole run); these tests keep each one from growing unnoticed.
#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/core/interned.h"
#include "sim/core/small_vec.h"
#include "sim/report/peak.h"
#include "sim/report/recorder.h"
#include "sim/workload/analysis.h"
#include "sim/workload/trace.h"
#include "sim/workload/workload.h"

namespace memsim {
namespace {

TEST(MemoryPerOp, StructureSizes) {
  EXPECT_LE(sizeof(Op), 168u);
  EXPECT_LE(sizeof(Buffer), 56u);
  EXPECT_LE(sizeof(Event), 56u);
  EXPECT_LE(sizeof(SampleLog::Entry), 40u);
  EXPECT_EQ(sizeof(SmallVec<BufferId, 2>), 16u);
  EXPECT_EQ(sizeof(Interned), sizeof(void*));
  EXPECT_LE(sizeof(PeakBuffer), 64u);  // names are views into the report's one block of text
}

TEST(MemoryPerOp, IdsInlineUpToTwo) {
  SmallVec<BufferId, 2> v{3, 5};
  const BufferId* inline_at = v.data();
  EXPECT_EQ(v.capacity(), 2u);
  v.push_back(7);  // now on the heap
  EXPECT_NE(v.data(), inline_at);
  EXPECT_EQ(v.to_vector(), (std::vector<BufferId>{3, 5, 7}));
  v.erase(v.begin());
  v.insert(v.begin(), 9);
  EXPECT_EQ(v.to_vector(), (std::vector<BufferId>{9, 5, 7}));
  SmallVec<BufferId, 2> moved = std::move(v);
  EXPECT_EQ(moved.size(), 3u);
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(erase(moved, BufferId{5}), 1u);
  EXPECT_EQ(moved.to_vector(), (std::vector<BufferId>{9, 7}));
}

TEST(MemoryPerOp, KindsInternedOnce) {
  const Interned a("matmul_backward_input"), b(std::string("matmul_backward_input"));
  EXPECT_EQ(&a.str(), &b.str());
  EXPECT_EQ(a, "matmul_backward_input");
  EXPECT_NE(a, Interned("matmul"));
  EXPECT_TRUE(Interned().empty());
}

TEST(MemoryPerOp, ChainOpsNeedNoHeapForTheirIds) {
  // Every op of a chain reads at most two buffers, makes at most two and updates at most
  // two: none of them holds a heap block for its ids.
  const Trace t = generate_workload(ConfigNode::parse_text("model: chain\nlayers: 1000\nwidth: 8\noptimizer: sgd\n", "test"));
  ASSERT_GT(t.ops.size(), 4000u);
  for (const Op& op : t.ops) {
    EXPECT_LE(op.inputs.capacity(), 2u) << op.name;
    EXPECT_LE(op.outputs.capacity(), 2u) << op.name;
    EXPECT_LE(op.updates.capacity(), 2u) << op.name;
  }
}

TEST(MemoryPerOp, PerOpAndPerBufferListsAreOneBlock) {
  // dies_after (per op) and the updaters (per buffer) as offsets into one vector: the same
  // lists, in the same order, as a vector each would hold.
  const Trace t = generate_workload(ConfigNode::parse_text("model: chain\nlayers: 50\nwidth: 8\noptimizer: adam\n", "test"));
  const Liveness l = compute_liveness(t);
  ASSERT_EQ(l.dies_after.size(), t.ops.size());
  std::vector<std::vector<BufferId>> dies(t.ops.size());
  for (const Buffer& b : t.buffers) {
    if (b.persistent) continue;
    OpId end = l.last_use[b.id];
    if (end == kNoOp || (b.producer != kNoOp && end < b.producer)) end = b.producer == kNoOp ? 0 : b.producer;
    dies[end].push_back(b.id);
  }
  std::size_t listed = 0;
  for (OpId op = 0; op < t.ops.size(); ++op) {
    const auto got = l.dies_after[op];
    EXPECT_EQ(std::vector<BufferId>(got.begin(), got.end()), dies[op]) << t.ops[op].name;
    listed += got.size();
  }
  EXPECT_GT(listed, 100u);
  const Updaters u = updaters(t);
  ASSERT_EQ(u.size(), t.buffers.size());
  std::vector<std::vector<OpId>> by_buffer(t.buffers.size());
  for (const Op& op : t.ops)
    for (BufferId b : op.updates) by_buffer[b].push_back(op.id);
  std::size_t updated = 0;
  for (BufferId b = 0; b < t.buffers.size(); ++b) {
    EXPECT_EQ(std::vector<OpId>(u[b].begin(), u[b].end()), by_buffer[b]) << t.buffers[b].name;
    updated += !u[b].empty();
  }
  EXPECT_GT(updated, 100u) << "adam updates each weight and its two states";
  const IdLists none(3, {}, {});
  EXPECT_EQ(none.size(), 3u);
  EXPECT_TRUE(none[2].empty());
}

}  // namespace
}  // namespace memsim
