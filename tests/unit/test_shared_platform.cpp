// What a large platform shares and makes only when used: the copies of a node hold one copy of
// the node description's tables (sim/core/shared_table.h), a run's memory keeps an allocator
// only for the tiers it touches, and the terminal names identical tiers of every node once.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sim/core/shared_table.h"
#include "sim/memory/memory_state.h"
#include "sim/platform/platform.h"
#include "sim/report/writers.h"
#include "tests/platform_helpers.h"

using namespace memsim;

TEST(SharedTable, ACopySharesUntilItIsChanged) {
  SharedMap<std::string, double> a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.find("x"), a.end());
  EXPECT_EQ(a.count("x"), 0u);
  a["x"] = 0.5;
  SharedMap<std::string, double> b = a;
  EXPECT_TRUE(b.shares_with(a));
  EXPECT_EQ(b.at("x"), 0.5);
  b["y"] = 0.25;  // b's own table from here
  EXPECT_FALSE(b.shares_with(a));
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(b.size(), 2u);
  EXPECT_FALSE(a.contains("y"));
  b.clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(a.at("x"), 0.5);

  SharedVector<std::string> v{"send", "recv"};
  SharedVector<std::string> w = v;
  w.push_back("all_reduce");
  EXPECT_EQ(v.size(), 2u);
  EXPECT_EQ(w.size(), 3u);
  EXPECT_EQ(w.back(), "all_reduce");
  EXPECT_EQ(v[1], "recv");
}

TEST(SharedPlatform, EveryNodeIsTheFirstRenamedWithItsTables) {
  const PlatformSpec p = test::preset_platform("dgx-h100-superpod", "3");
  const PlatformSpec one = test::preset_platform("dgx-h100-superpod", "1");
  ASSERT_EQ(p.devices.size(), 3 * one.devices.size());
  ASSERT_EQ(p.tiers.size(), 3 * one.tiers.size());
  const std::size_t per_node = one.devices.size();
  for (std::size_t i = 0; i < p.devices.size(); ++i) {
    const DeviceSpec& d = p.devices[i];
    const DeviceSpec& first = p.devices[i % per_node];
    const DeviceSpec& alone = one.devices[i % per_node];
    EXPECT_EQ(d.node, i / per_node) << d.name;
    EXPECT_EQ(d.kind, alone.kind) << d.name;
    EXPECT_EQ(d.peak_flops, alone.peak_flops) << d.name;
    EXPECT_EQ(d.efficiency.get(), alone.efficiency.get()) << d.name;
    EXPECT_EQ(d.memory_efficiency.get(), alone.memory_efficiency.get()) << d.name;
    EXPECT_EQ(d.reserved.get(), alone.reserved.get()) << d.name;
    EXPECT_EQ(d.host.per_kind_s.get(), alone.host.per_kind_s.get()) << d.name;
    EXPECT_EQ(d.host.sync_after.get(), alone.host.sync_after.get()) << d.name;
    // One table for all the copies, not one each.
    if (!first.efficiency.empty()) EXPECT_TRUE(d.efficiency.shares_with(first.efficiency)) << d.name;
    ASSERT_EQ(d.tiers.size(), alone.tiers.size()) << d.name;
    for (std::size_t k = 0; k < d.tiers.size(); ++k) {
      const TierSpec& t = p.tiers[d.tiers[k]];
      const TierSpec& a = one.tiers[alone.tiers[k]];
      EXPECT_EQ(t.name, d.name + a.name.substr(alone.name.size())) << t.name;
      EXPECT_EQ(t.device, d.name);
      EXPECT_EQ(t.role, a.role) << t.name;
      EXPECT_EQ(t.capacity_bytes, a.capacity_bytes) << t.name;
      EXPECT_EQ(t.bandwidth_Bps, a.bandwidth_Bps) << t.name;
      EXPECT_EQ(t.allocator, a.allocator) << t.name;
      EXPECT_EQ(t.allocator_params, p.tiers[first.tiers[k]].allocator_params) << t.name;  // shared
      EXPECT_EQ(p.find_tier(t.name), d.tiers[k]) << t.name;
    }
    EXPECT_EQ(d.compute_tier.has_value(), alone.compute_tier.has_value()) << d.name;
    if (d.compute_tier) EXPECT_EQ(p.tiers[*d.compute_tier].name, d.name + ".hbm") << d.name;
  }
  EXPECT_EQ(p.devices[per_node].name, "gpu8");
}

TEST(SharedPlatform, AnEditOfOneCopyLeavesTheOthers) {
  PlatformSpec p = test::preset_platform("dgx-h100-superpod", "2");
  DeviceSpec& gpu8 = p.devices[*p.find_device("gpu8")];
  const double before = p.devices[0].efficiency_for("linear");
  gpu8.efficiency["linear"] = 0.125;
  EXPECT_EQ(gpu8.efficiency_for("linear"), 0.125);
  EXPECT_EQ(p.devices[0].efficiency_for("linear"), before);
}

TEST(LazyMemory, AnUntouchedTierReportsAsItsAllocatorStarts) {
  const PlatformSpec p = test::preset_platform("dgx-h100-superpod", "2");
  const Trace trace;
  std::vector<std::uint64_t> caps(p.tiers.size(), UINT64_MAX);
  const std::size_t far = *p.find_tier("gpu9.hbm");
  caps[far] = 1ull << 30;
  MemoryState m(p, trace, caps);
  EXPECT_EQ(m.tier_count(), p.tiers.size());
  TierUsage u;
  std::vector<std::uint64_t> tiles;
  m.report(far, u, tiles);
  EXPECT_EQ(u.capacity_bytes, p.tiers[far].capacity_bytes);
  EXPECT_EQ(u.budget_bytes, 1ull << 30);
  EXPECT_EQ(u.peak_allocated_bytes, 0u);
  EXPECT_TRUE(tiles.empty());
  // Used, it keeps what happened.
  const auto a = m.allocate_anonymous(far, 4096, Category::workspace, 1.0);
  ASSERT_TRUE(a.has_value());
  m.release_anonymous(far, *a, Category::workspace, 2.0);
  m.report(far, u, tiles);
  EXPECT_EQ(u.peak_allocated_bytes, a->bytes);
  EXPECT_EQ(u.peak_time_s, 1.0);
  EXPECT_EQ(m.usage(far).allocated_bytes, 0u);
  EXPECT_EQ(m.usage(far).limit_bytes(), 1ull << 30);
  // Beyond its cap it refuses.
  EXPECT_FALSE(m.allocate_anonymous(far, 2ull << 30, Category::workspace, 3.0).has_value());
}

TEST(LineGroups, IdenticalTiersOfEveryNodeAreOneLine) {
  LineGroups g;
  g.add("gpu0.hbm", "A");
  g.add("gpu1.hbm", "A");
  g.add("host0.dram", "B");
  g.add("gpu2.hbm", "A");
  g.add("gpu3.hbm", "C");
  g.add("gpu4.hbm", "A");
  g.add("host1.dram", "B");
  g.add("switch", "A");
  g.add("gpu05.nvme", "D");
  const std::vector<std::pair<std::string, std::string>> want{
      {"gpu0-2,4.hbm", "A"}, {"host0-1.dram", "B"}, {"gpu3.hbm", "C"}, {"switch", "A"}, {"gpu05.nvme", "D"}};
  EXPECT_EQ(g.lines(), want);

  LineGroups links;
  for (int i = 0; i < 10; ++i) links.add("ib" + std::to_string(8 * i), "same");
  EXPECT_EQ(links.lines(), (std::vector<std::pair<std::string, std::string>>{{"ib0,8,...,72 (10 of them)", "same"}}));
}
