// Checkpointing schedules for a chain (schedule/chain.h) against the optimum found by
// searching every schedule of the chain game on small chains.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>

#include "sim/policy/schedule/chain.h"

using namespace memsim::schedule;

namespace {

// ---- Griewank's game: snaps (x_0's included) and a register. Reversing step k needs x_{k-1}
// in the register. Least advances over all schedules, by 0-1 BFS over (next reverse,
// register, snaps).
std::uint64_t griewank_brute(int n, int snaps) {
  struct State {
    int k, p;
    unsigned s;
    auto operator<=>(const State&) const = default;
  };
  std::map<State, std::uint64_t> dist;
  std::deque<std::pair<State, std::uint64_t>> q;
  auto push = [&](State st, std::uint64_t d, bool front) {
    auto it = dist.find(st);
    if (it != dist.end() && it->second <= d) return;
    dist[st] = d;
    if (front)
      q.push_front({st, d});
    else
      q.push_back({st, d});
  };
  push({n, 0, 1u}, 0, true);
  while (!q.empty()) {
    auto [st, d] = q.front();
    q.pop_front();
    if (dist[st] < d) continue;
    if (st.k == 0) return d;
    if (st.p + 1 <= st.k - 1) push({st.k, st.p + 1, st.s}, d + 1, false);  // advance
    if (!(st.s >> st.p & 1u) && std::popcount(st.s) < snaps) push({st.k, st.p, st.s | 1u << st.p}, d, true);
    for (int j = 0; j < n; ++j)
      if (st.s >> j & 1u) {
        push({st.k, j, st.s}, d, true);                           // restore
        if (j > 0) push({st.k, st.p, st.s & ~(1u << j)}, d, true);  // free
      }
    if (st.p == st.k - 1) push({st.k - 1, st.p, st.s}, d, true);  // reverse
  }
  return ~0ull;
}

// ---- Gruslys et al.'s game: memory of m units; a hidden state costs 1, an internal state
// alpha. Reversing step k needs k's internal state: the register right after advancing to
// x_k, or a stored one.
std::uint64_t gruslys_brute(int n, int m, int alpha) {
  struct State {
    int k, p;
    bool reg_internal;
    unsigned h, i;
    auto operator<=>(const State&) const = default;
  };
  auto used = [&](unsigned h, unsigned i) { return std::popcount(h & ~i) + alpha * std::popcount(i); };
  std::map<State, std::uint64_t> dist;
  std::deque<std::pair<State, std::uint64_t>> q;
  auto push = [&](State st, std::uint64_t d, bool front) {
    if (used(st.h, st.i) > m) return;
    auto it = dist.find(st);
    if (it != dist.end() && it->second <= d) return;
    dist[st] = d;
    if (front)
      q.push_front({st, d});
    else
      q.push_back({st, d});
  };
  push({n, 0, false, 0, 0}, 0, true);
  while (!q.empty()) {
    auto [st, d] = q.front();
    q.pop_front();
    if (dist[st] < d) continue;
    if (st.k == 0) return d;
    if (st.p >= 0 && st.p + 1 <= st.k) push({st.k, st.p + 1, true, st.h, st.i}, d + 1, false);
    if (st.p >= 1) {
      push({st.k, st.p, st.reg_internal, st.h | 1u << st.p, st.i}, d, true);
      if (st.reg_internal) push({st.k, st.p, st.reg_internal, st.h, st.i | 1u << st.p}, d, true);
    }
    push({st.k, 0, false, st.h, st.i}, d, true);  // x_0 is always at hand
    for (int j = 1; j <= n; ++j) {
      if ((st.h | st.i) >> j & 1u) push({st.k, j, (st.i >> j & 1u) != 0, st.h, st.i}, d, true);
      if (st.h >> j & 1u) push({st.k, st.p, st.reg_internal, st.h & ~(1u << j), st.i}, d, true);
      if (st.i >> j & 1u) push({st.k, st.p, st.reg_internal, st.h, st.i & ~(1u << j)}, d, true);
    }
    if ((st.p == st.k && st.reg_internal) || (st.i >> st.k & 1u))
      push({st.k - 1, st.p, st.reg_internal && st.p != st.k, st.h, st.i & ~(1u << st.k)}, d, true);
  }
  return ~0ull;
}

std::uint64_t advances(const std::vector<ChainStep>& s) {
  return static_cast<std::uint64_t>(
      std::count_if(s.begin(), s.end(), [](const ChainStep& a) { return a.action == ChainAction::advance; }));
}

// Replays a revolve action list in Griewank's game: every advance continues from the
// register or restarts from a state reached before and kept since; every reverse k finds
// x_{k-1}. Returns the most snaps held at once (x_0's included).
int griewank_snaps(int n, const std::vector<ChainStep>& s) {
  std::vector<int> reached(n + 1, -1);  // action index of the latest advance to j
  reached[0] = -1;
  std::vector<std::pair<int, int>> kept;  // (from, to) action spans a snap is held
  int p = 0, next_reverse = n;
  auto restart = [&](int j, int at) {
    if (j == 0) return;
    EXPECT_GE(reached[j], 0) << "restart from x_" << j << " never reached";
    kept.push_back({reached[j], at});
  };
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    const int k = static_cast<int>(s[i].step);
    if (s[i].action == ChainAction::advance) {
      EXPECT_LE(k, next_reverse - 1) << "advance past the part still to reverse";
      if (p != k - 1) restart(k - 1, i);
      p = k;
      reached[k] = i;
    } else {
      EXPECT_EQ(k, next_reverse);
      if (p != k - 1) restart(k - 1, i);
      p = k - 1;
      --next_reverse;
    }
  }
  EXPECT_EQ(next_reverse, 0);
  // Spans of one state reached once merge; count overlaps.
  int most = 0;
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    std::vector<std::pair<int, int>> live;
    for (auto [a, b] : kept)
      if (a <= i && i <= b) live.push_back({a, b});
    std::sort(live.begin(), live.end());
    live.erase(std::unique(live.begin(), live.end(),
                           [](auto x, auto y) { return x.first == y.first; }),
               live.end());
    most = std::max(most, static_cast<int>(live.size()));
  }
  return most + 1;
}

}  // namespace

TEST(CkptChain, BinomialClosedFormMatchesTheRecurrence) {
  // t(l, c) = min_m m + t(l - m, c - 1) + t(m, c), t(1, c) = 0, t(l, 1) = l(l - 1)/2.
  const int L = 60, C = 7;
  std::vector<std::vector<std::uint64_t>> t(L + 1, std::vector<std::uint64_t>(C + 1, 0));
  for (int c = 1; c <= C; ++c)
    for (int l = 2; l <= L; ++l) {
      if (c == 1) {
        t[l][c] = static_cast<std::uint64_t>(l) * (l - 1) / 2;
        continue;
      }
      std::uint64_t best = ~0ull;
      for (int m = 1; m < l; ++m) best = std::min(best, m + t[l - m][c - 1] + t[m][c]);
      t[l][c] = best;
    }
  for (int c = 1; c <= C; ++c)
    for (int l = 1; l <= L; ++l) EXPECT_EQ(revolve_cost(l, c), t[l][c]) << "l=" << l << " c=" << c;
}

TEST(CkptChain, RevolveIsOptimalAgainstEverySchedule) {
  for (int n = 1; n <= 8; ++n)
    for (int c = 1; c <= 5; ++c) {
      const std::uint64_t best = griewank_brute(n, c);
      EXPECT_EQ(revolve_cost(n, c), best) << "n=" << n << " c=" << c;
      const auto s = revolve_schedule(n, c);
      EXPECT_EQ(advances(s), best) << "n=" << n << " c=" << c;
      EXPECT_LE(griewank_snaps(n, s), c) << "n=" << n << " c=" << c;
    }
}

TEST(CkptChain, RevolveScheduleOfAFiveStepChainWithTwoSnaps) {
  // t(5, 2): r = 2 (C(2 + 2, 2) = 6 >= 5), so t = 2 x 5 - C(2 + 2, 1) = 6.
  const auto s = revolve_schedule(5, 2);
  EXPECT_EQ(revolve_cost(5, 2), 6u);
  EXPECT_EQ(advances(s), 6u);
  using A = ChainAction;
  // Sweep to x_4 with a snap at x_2 (split 2: 2 + t(3, 1) + t(2, 2) = 2 + 3 + 1 = 6),
  // reverse 5; x_2 -> x_3, reverse 4; reverse 3 from x_2; then x_0 -> x_1, reverse 2; reverse 1.
  const std::vector<ChainStep> want{{A::advance, 1}, {A::advance, 2}, {A::advance, 3}, {A::advance, 4},
                                    {A::reverse, 5}, {A::advance, 3}, {A::reverse, 4}, {A::reverse, 3},
                                    {A::advance, 1}, {A::reverse, 2}, {A::reverse, 1}};
  EXPECT_EQ(s, want);
}

TEST(CkptChain, RevolveLongChainsStayLinearWithEnoughSnaps) {
  // n = 10,000 with 2 x sqrt(n) = 200 snaps: r = 2, so about 2n advances.
  const auto s = revolve_schedule(10'000, 200);
  EXPECT_EQ(advances(s), revolve_cost(10'000, 200));
  EXPECT_LT(revolve_cost(10'000, 200), 2u * 10'000);
}

TEST(CkptChain, BpttTableIsOptimalAgainstEverySchedule) {
  for (int alpha = 1; alpha <= 3; ++alpha) {
    const BpttTable table(6, 6, alpha);
    for (int n = 1; n <= 6; ++n) {
      const BpttTable small(n, 6, alpha);
      for (int m = 0; m <= 6; ++m) {
        const std::uint64_t best = gruslys_brute(n, m, alpha);
        EXPECT_EQ(small.cost(m), best) << "n=" << n << " m=" << m << " alpha=" << alpha;
        EXPECT_EQ(advances(small.schedule(m)), best) << "n=" << n << " m=" << m << " alpha=" << alpha;
      }
    }
  }
}

TEST(CkptChain, BpttBoundaries) {
  // One slot of nothing: every reversal from x_0, n(n+1)/2 advances (Gruslys's C(t, 1)).
  EXPECT_EQ(BpttTable(10, 0, 2).cost(0), 55u);
  // Memory for every internal state: each step once.
  EXPECT_EQ(BpttTable(10, 27, 3).cost(27), 10u);
  // Hidden states only (alpha beyond the memory): the binomial schedule with a taped forward
  // per reversal, t(n, m + 1) + n.
  for (int n = 1; n <= 30; ++n)
    for (int m = 0; m <= 5; ++m)
      EXPECT_EQ(BpttTable(n, m, 100).cost(m), revolve_cost(n, m + 1) + n) << "n=" << n << " m=" << m;
}

TEST(CkptChain, PlainChainIsGriewankShiftedByOne) {
  // When a step's backward reads only its state (alpha = 1), Gruslys's table on T steps and
  // Griewank's on T + 1 (the loss as the last step) agree.
  for (int n = 1; n <= 40; ++n)
    for (int m = 0; m <= 8; ++m)
      EXPECT_EQ(BpttTable(n, m, 1).cost(m), revolve_cost(n + 1, m + 1)) << "n=" << n << " m=" << m;
}
