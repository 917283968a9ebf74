// PeakLiveSet against live sets worked out by hand: what is live the first time a tier's
// peak is reached, with releases before and after it, a later higher peak, workspace, and
// a buffer in two tiers during a copy.
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/report/peak.h"

namespace memsim {
namespace {

// Drives the set as MemoryState drives its listener: each change, then the tier's totals.
struct Driver {
  PeakLiveSet set;
  std::vector<TierUsage> usage = std::vector<TierUsage>(2);

  void change(std::uint32_t tier, BufferId b, std::uint64_t bytes, bool allocated,
              Category c = Category::activation) {
    set.on_allocation(AllocationChange{0, tier, b, c, allocated, Allocation{0, bytes}});
    TierUsage& u = usage[tier];
    u.allocated_bytes = allocated ? u.allocated_bytes + bytes : u.allocated_bytes - bytes;
    u.peak_allocated_bytes = std::max(u.peak_allocated_bytes, u.allocated_bytes);
    set.on_memory_change(tier, u);
  }
  void alloc(std::uint32_t tier, BufferId b, std::uint64_t bytes) { change(tier, b, bytes, true); }
  void free(std::uint32_t tier, BufferId b, std::uint64_t bytes) { change(tier, b, bytes, false); }

  // (buffer, bytes) live at the tier's peak, sorted.
  std::vector<std::pair<BufferId, std::uint64_t>> live(std::size_t tier) const {
    std::vector<std::pair<BufferId, std::uint64_t>> out;
    for (const auto& e : set.live_at_peak(tier)) out.emplace_back(e.buffer, e.bytes);
    std::sort(out.begin(), out.end());
    return out;
  }
};

using Live = std::vector<std::pair<BufferId, std::uint64_t>>;
constexpr BufferId kWorkspace = AllocationChange::kNoBuffer;

TEST(PeakLiveSet, BuffersReleasedAfterThePeakWereLiveAtIt) {
  Driver d;
  d.alloc(0, 0, 10);
  d.alloc(0, 1, 20);
  d.alloc(0, 2, 30);  // peak 60: 0, 1, 2
  d.free(0, 1, 20);
  d.free(0, 0, 10);
  d.alloc(0, 3, 25);  // 55: below the peak
  EXPECT_EQ(d.live(0), (Live{{0, 10}, {1, 20}, {2, 30}}));
}

TEST(PeakLiveSet, AHigherPeakForgetsWhatWasReleasedBeforeIt) {
  Driver d;
  d.alloc(0, 0, 10);
  d.alloc(0, 1, 20);  // peak 30
  d.free(0, 0, 10);
  d.alloc(0, 2, 50);  // peak 70: 1, 2
  d.free(0, 2, 50);
  d.alloc(0, 3, 40);  // 60
  EXPECT_EQ(d.live(0), (Live{{1, 20}, {2, 50}}));
}

TEST(PeakLiveSet, EqualingThePeakLaterKeepsTheFirstTime) {
  Driver d;
  d.alloc(0, 0, 10);
  d.alloc(0, 1, 10);  // peak 20 first here
  d.free(0, 1, 10);
  d.alloc(0, 2, 10);  // 20 again: not a new peak
  EXPECT_EQ(d.live(0), (Live{{0, 10}, {1, 10}}));
}

TEST(PeakLiveSet, WorkspaceIsReleasedLastInFirstOut) {
  Driver d;
  d.alloc(0, 0, 10);
  d.alloc(0, kWorkspace, 5);   // an op's workspace
  d.alloc(0, kWorkspace, 5);   // a remake inside it, with its own: peak 20
  d.free(0, kWorkspace, 5);
  d.free(0, kWorkspace, 5);
  d.alloc(0, kWorkspace, 5);   // 15
  EXPECT_EQ(d.live(0), (Live{{0, 10}, {kWorkspace, 5}, {kWorkspace, 5}}));
}

TEST(PeakLiveSet, TiersAreSeparateAndACopyHoldsBoth) {
  Driver d;
  d.alloc(0, 0, 10);
  d.alloc(0, 1, 10);  // gpu peak 20
  d.alloc(1, 0, 10);  // the copy of 0 to the host starts: held in both
  d.free(0, 0, 10);   // it lands
  d.alloc(1, 2, 5);   // host peak 15
  d.free(1, 0, 10);
  EXPECT_EQ(d.live(0), (Live{{0, 10}, {1, 10}}));
  EXPECT_EQ(d.live(1), (Live{{0, 10}, {2, 5}}));
}

TEST(PeakLiveSet, ATierThatHeldNothing) {
  Driver d;
  d.alloc(0, 0, 10);
  EXPECT_TRUE(d.live(1).empty());
  EXPECT_TRUE(d.set.live_at_peak(7).empty());
}

TEST(PeakLiveSet, LayerOfAnOp) {
  EXPECT_EQ(layer_of("layer3.0.bn1"), "layer3.0");
  EXPECT_EQ(layer_of("layer3.0.bn1.backward"), "layer3.0");
  EXPECT_EQ(layer_of("transformer.h.0.attn.c_attn"), "transformer.h.0.attn");
  EXPECT_EQ(layer_of("conv1"), "conv1");
  // An imported op named in its scope: the scope, whatever dots it or the op hold.
  EXPECT_EQ(layer_of("encoder.layers.3.self_attn/aten::addmm#2452"), "encoder.layers.3.self_attn");
  EXPECT_EQ(layer_of("Optimizer.step#SGD.step/aten::_foreach_add_.List#97"), "Optimizer.step#SGD.step");
  EXPECT_EQ(layer_of("avgpool.backward"), "avgpool");
}

}  // namespace
}  // namespace memsim
