// Checkmate's program (schedule/remat_milp.h) against the optimum found by searching every
// schedule of a small training graph.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <queue>

#include "sim/policy/schedule/remat_milp.h"

using namespace memsim::schedule;

namespace {

// A five-op forward with a skip connection (a0 feeds f3 and the backward of f1 and f2) and
// its backward: ten nodes.
//   0 f0: x -> a0      1 f1: a0 -> a1      2 f2: a1 -> a2     3 f3: a2, a0 -> a3
//   4 loss: a3 -> l    5 b3: l, a3 -> g3   6 b2: g3, a2 -> g2 7 b1: g2, a1, a0 -> g1
//   8 b0: g1, a0 -> g0 9 w: g0 -> gw
RematGraph skip_graph() {
  RematGraph g;
  g.cost = {1, 3, 2, 2, 1, 1, 1, 1, 1, 1};
  g.mem = {4, 4, 4, 4, 1, 4, 4, 4, 4, 1};
  g.workspace.assign(10, 0);
  g.workspace[2] = 1;
  g.recomputable = {true, true, true, true, true, false, false, false, false, false};
  g.deps = {{}, {0}, {1}, {2, 0}, {3}, {4, 3}, {5, 2}, {6, 1, 0}, {7, 0}, {8}};
  g.constant = 2;
  return g;
}

// Least recomputation over all schedules: Dijkstra over (next op, values in memory). At
// each point: recompute an earlier forward node whose inputs are there, run the next node
// when its inputs are, or free a value. Memory while a node runs: what is held, its value
// and its workspace.
double brute_force(const RematGraph& g, double budget) {
  const int n = static_cast<int>(g.size());
  using State = std::pair<int, unsigned>;
  std::map<State, double> dist;
  using Item = std::pair<double, State>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> q;
  auto push = [&](State s, double d) {
    auto it = dist.find(s);
    if (it != dist.end() && it->second <= d) return;
    dist[s] = d;
    q.push({d, s});
  };
  auto held = [&](unsigned m) {
    double b = g.constant;
    for (int i = 0; i < n; ++i)
      if (m >> i & 1u) b += g.mem[i];
    return b;
  };
  auto ready = [&](int v, unsigned m) {
    for (int i : g.deps[v])
      if (!(m >> i & 1u)) return false;
    return true;
  };
  push({0, 0u}, 0);
  while (!q.empty()) {
    auto [d, s] = q.top();
    q.pop();
    if (dist[s] < d) continue;
    auto [t, m] = s;
    if (t == n) return d;
    for (int i = 0; i < n; ++i)
      if (m >> i & 1u) push({t, m & ~(1u << i)}, d);
    if (ready(t, m) && held(m) + g.mem[t] + g.workspace[t] <= budget) push({t + 1, m | 1u << t}, d);
    for (int i = 0; i < t; ++i)
      if (g.recomputable[i] && !(m >> i & 1u) && ready(i, m) &&
          held(m) + g.mem[i] + g.workspace[i] <= budget)
        push({t, m | 1u << i}, d + g.cost[i]);
  }
  return INFINITY;
}

}  // namespace

TEST(CkptMilp, KeepingEverythingNeedsTheBaselinePeak) {
  const RematGraph g = skip_graph();
  // At b3: constant 2 + a0..a3 16 + l 1 + g3 4 = 23.
  EXPECT_EQ(remat_peak(g, std::vector<std::vector<int>>(10)), 23);
  EXPECT_EQ(brute_force(g, 23), 0);
  EXPECT_GT(brute_force(g, 22), 0);
}

TEST(CkptMilp, ProvesOptimalOnATenNodeGraphAndMatchesBruteForce) {
  const RematGraph g = skip_graph();
  int tight = 0;
  for (double budget : {23.0, 22.0, 20.0, 19.0, 18.0, 17.0, 16.0, 15.0}) {
    const double best = brute_force(g, budget);
    const RematAnswer a = solve_remat(g, budget, {});
    SCOPED_TRACE(budget);
    if (std::isinf(best)) {
      EXPECT_FALSE(a.found);
      continue;
    }
    ++tight;
    ASSERT_TRUE(a.found);
    EXPECT_TRUE(a.proven_optimal);
    EXPECT_NEAR(a.cost, best, 1e-9);
    EXPECT_NEAR(remat_cost(g, a.recompute), best, 1e-9);
    EXPECT_LE(remat_peak(g, a.recompute), budget);
  }
  EXPECT_GE(tight, 4);
}

TEST(CkptMilp, BelowWhatAnyScheduleNeedsThereIsNone) {
  const RematGraph g = skip_graph();
  // b1 reads g2, a1, a0 and makes g1: 2 + 12 + 4 = 18 at least, whatever was recomputed.
  EXPECT_TRUE(std::isinf(brute_force(g, 12)));
  const RematAnswer a = solve_remat(g, 12, {});
  EXPECT_FALSE(a.found);
}

TEST(CkptMilp, PinnedMemoryCountsInEveryStageAndLeavesTheAnswer) {
  // A byte pinned throughout raises every stage by one: the same schedules at one more.
  RematGraph g = skip_graph();
  g.pinned.assign(10, 1);
  EXPECT_EQ(remat_peak(g, std::vector<std::vector<int>>(10)), 24);
  const RematAnswer a = solve_remat(g, 20, {});
  ASSERT_TRUE(a.found);
  EXPECT_TRUE(a.proven_optimal);
  EXPECT_NEAR(a.cost, brute_force(skip_graph(), 19), 1e-9);
  EXPECT_LE(remat_peak(g, a.recompute), 20);
  EXPECT_FALSE(solve_remat(g, 12 + 1, {}).found);
}

TEST(CkptMilp, LpRoundingFindsAScheduleWithoutBranching) {
  const RematGraph g = skip_graph();
  RematOptions o;
  o.integer = false;
  const RematAnswer a = solve_remat(g, 19, o);
  ASSERT_TRUE(a.found);
  EXPECT_NE(a.method, "milp");
  EXPECT_LE(remat_peak(g, a.recompute), 19);
  EXPECT_GE(a.cost + 1e-9, brute_force(g, 19));
  EXPECT_LE(a.bound, a.cost + 1e-9);
}

namespace {

// A 30-layer chain and its backward (61 nodes, ~20k variables and rows).
RematGraph chain_with_backward() {
  RematGraph g;
  const int layers = 30;
  for (int i = 0; i < layers; ++i) {
    g.cost.push_back(1 + i % 3);
    g.mem.push_back(10);
    g.recomputable.push_back(true);
    g.deps.push_back(i == 0 ? std::vector<int>{} : std::vector<int>{i - 1});
  }
  g.cost.push_back(1);  // loss
  g.mem.push_back(1);
  g.recomputable.push_back(true);
  g.deps.push_back({layers - 1});
  for (int i = layers - 1; i >= 0; --i) {  // backward of layer i reads its input and the grad
    std::vector<int> d{static_cast<int>(g.size()) - 1};
    if (i > 0) d.push_back(i - 1);
    g.deps.push_back(d);
    g.cost.push_back(1);
    g.mem.push_back(10);
    g.recomputable.push_back(false);
  }
  g.workspace.assign(g.size(), 0);
  return g;
}

}  // namespace

TEST(CkptMilp, AGraphTooLargeForItsWorkLimitSaysSo) {
  // One branch-and-bound node and 500 simplex iterations, no time limit: not proven optimal,
  // stopped at the limit of work, the same on any machine, and the schedule found fits.
  const RematGraph g = chain_with_backward();
  RematOptions o;
  o.seconds = 0;
  o.nodes = 1;
  o.iterations = 500;
  const RematAnswer a = solve_remat(g, 100, o);
  ASSERT_TRUE(a.found);
  EXPECT_FALSE(a.proven_optimal);
  EXPECT_TRUE(a.work_limit);
  EXPECT_FALSE(a.time_limit);
  EXPECT_LE(remat_peak(g, a.recompute), 100);
  EXPECT_LE(a.bound, a.cost + 1e-9);
  // Work, not time: the same answer again.
  const RematAnswer again = solve_remat(g, 100, o);
  EXPECT_EQ(again.recompute, a.recompute);
  EXPECT_EQ(again.cost, a.cost);
  EXPECT_EQ(again.bound, a.bound);
}

TEST(CkptMilp, AGraphStoppedByItsTimeLimitSaysSo) {
  // A tenth of a second: whether it is enough depends on the machine, so only the report is
  // checked — an answer that is not proven optimal says it stopped at the time limit.
  const RematGraph g = chain_with_backward();
  RematOptions o;
  o.seconds = 0.1;
  const RematAnswer a = solve_remat(g, 100, o);
  ASSERT_TRUE(a.found);
  EXPECT_EQ(a.proven_optimal, !a.time_limit);
  EXPECT_FALSE(a.work_limit);
  EXPECT_LE(remat_peak(g, a.recompute), 100);
  EXPECT_LE(a.bound, a.cost + 1e-9);
}
