// Bytes per op: what a step of a million layers (four million ops) costs to hold. The
// structures are sized so that the 10^6-layer chain runs in under 2 GB (bench/run_vs_bare.py
// --million measures the whole run); these tests keep each one from growing unnoticed.
#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/core/interned.h"
#include "sim/core/small_vec.h"
#include "sim/report/recorder.h"
#include "sim/workload/trace.h"
#include "sim/workload/workload.h"

namespace memsim {
namespace {

TEST(MemoryPerOp, StructureSizes) {
  EXPECT_LE(sizeof(Op), 176u);
  EXPECT_LE(sizeof(Buffer), 56u);
  EXPECT_LE(sizeof(Event), 56u);
  EXPECT_LE(sizeof(SampleLog::Entry), 40u);
  EXPECT_EQ(sizeof(SmallVec<BufferId, 2>), 16u);
  EXPECT_EQ(sizeof(Interned), sizeof(void*));
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

}  // namespace
}  // namespace memsim
