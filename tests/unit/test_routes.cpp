// Routes between tiers (sim/platform/routes.h): the routes a run asks for are the ones the
// whole table holds, though the search stops early; the nearest offload tier is the widest,
// then the shortest, then the first in file order, as found over every pair; a table holds
// nothing it was not asked for.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <stdexcept>

#include "sim/platform/platform.h"
#include "sim/platform/routes.h"
#include "tests/platform_helpers.h"

using namespace memsim;

namespace {

PlatformSpec preset(const std::string& name, const std::string& nodes = "") {
  return test::preset_platform(name, nodes);
}

void expect_same(const Route& a, const Route& b, const std::string& what) {
  ASSERT_EQ(a.elements.size(), b.elements.size()) << what;
  for (std::size_t i = 0; i < a.elements.size(); ++i) {
    EXPECT_EQ(a.elements[i].kind, b.elements[i].kind) << what << " element " << i;
    EXPECT_EQ(a.elements[i].index, b.elements[i].index) << what << " element " << i;
    EXPECT_EQ(a.elements[i].forward, b.elements[i].forward) << what << " element " << i;
  }
  EXPECT_EQ(a.bottleneck_Bps, b.bottleneck_Bps) << what;
  EXPECT_EQ(a.latency_s, b.latency_s) << what;
}

const std::vector<std::pair<std::string, std::string>> kPlatforms = {
    {"dgx-a100", ""}, {"box4-v100-shared-pcie", ""}, {"a100-40gb-nvme", ""},
    {"dgx-h100-superpod", "3"}, {"dgx-a100-superpod", "2"}, {"tpu-v4", ""}};

}  // namespace

TEST(Routes, WantedRoutesAreTheWholeTablesRoutes) {
  std::mt19937 rng(7);
  for (const auto& [name, nodes] : kPlatforms) {
    const PlatformSpec p = preset(name, nodes);
    const RouteTable all = compute_routes(p);
    const std::size_t n = p.tiers.size();
    // A few destinations from each tier, in order and without repeats, as a run asks.
    std::vector<std::vector<std::size_t>> wanted(n);
    for (std::size_t src = 0; src < n; ++src)
      for (std::size_t dst = 0; dst < n; ++dst)
        if (dst != src && rng() % 3 == 0) wanted[src].push_back(dst);
    const RouteTable some = compute_routes(p, &wanted);
    std::size_t held = 0;
    for (std::size_t src = 0; src < n; ++src)
      for (std::size_t dst = 0; dst < n; ++dst) {
        const Route* a = all.find(src, dst);
        const Route* s = some.find(src, dst);
        const bool asked = std::find(wanted[src].begin(), wanted[src].end(), dst) != wanted[src].end();
        const std::string what = name + ": " + p.tiers[src].name + " -> " + p.tiers[dst].name;
        if (src == dst) EXPECT_EQ(a, nullptr) << what;
        if (!asked) {
          EXPECT_EQ(s, nullptr) << what << " was not asked for";
          continue;
        }
        ASSERT_EQ(a != nullptr, s != nullptr) << what;
        if (a) {
          expect_same(*a, *s, what);
          ++held;
        }
      }
    EXPECT_GT(held, 0u) << name;
  }
}

TEST(Routes, NearestOffloadIsTheWidestThenShortestThenFirst) {
  for (const auto& [name, nodes] : kPlatforms) {
    const PlatformSpec p = preset(name, nodes);
    const RouteTable all = compute_routes(p);
    std::vector<std::size_t> computes;
    for (std::size_t d : p.op_devices()) computes.push_back(*p.devices[d].operand_tier());
    const auto found = nearest_offloads(p, computes);
    ASSERT_EQ(found.size(), computes.size());
    for (std::size_t k = 0; k < computes.size(); ++k) {
      const std::size_t from = computes[k];
      // Over every pair: the widest route, then the fewest elements, then file order.
      std::optional<std::size_t> best;
      for (std::size_t t = 0; t < p.tiers.size(); ++t) {
        const Route* r = all.find(from, t);
        if (p.tiers[t].role != TierRole::offload || !r) continue;
        const Route* b = best ? all.find(from, *best) : nullptr;
        if (!b || r->bottleneck_Bps > b->bottleneck_Bps ||
            (r->bottleneck_Bps == b->bottleneck_Bps && r->elements.size() < b->elements.size()))
          best = t;
      }
      const std::string what = name + ": " + p.tiers[from].name;
      ASSERT_EQ(best.has_value(), found[k].has_value()) << what;
      if (!best) continue;
      EXPECT_EQ(found[k]->tier, *best) << what << " swaps to " << p.tiers[found[k]->tier].name;
      expect_same(found[k]->out, *all.find(from, *best), what + " out");
      expect_same(found[k]->in, *all.find(*best, from), what + " in");
    }
  }
}

TEST(Routes, AGpuOfANodeSwapsToItsOwnNodesHost) {
  const PlatformSpec p = preset("dgx-h100-superpod", "4");
  std::vector<std::size_t> computes;
  for (std::size_t d : p.compute_devices()) computes.push_back(*p.devices[d].compute_tier);
  const auto found = nearest_offloads(p, computes);
  for (std::size_t k = 0; k < computes.size(); ++k) {
    ASSERT_TRUE(found[k].has_value());
    const auto gpu = *p.find_device(p.tiers[computes[k]].device);
    const auto host = *p.find_device(p.tiers[found[k]->tier].device);
    EXPECT_EQ(p.devices[host].node, p.devices[gpu].node) << p.tiers[computes[k]].name;
  }
}

TEST(Routes, ATableHoldsOnlyWhatIsSetInOrder) {
  RouteTable t(3);
  Route r;
  r.bottleneck_Bps = 1e9;
  t.set(0, 2, r);
  EXPECT_NE(t.find(0, 2), nullptr);
  EXPECT_EQ(t.find(0, 1), nullptr);
  EXPECT_EQ(t.find(2, 0), nullptr);
  EXPECT_EQ(t.find(7, 0), nullptr);  // past the table: none
  EXPECT_THROW(t.set(0, 1, r), std::logic_error);  // out of order
  EXPECT_THROW(t.set(0, 2, r), std::logic_error);  // twice
}
