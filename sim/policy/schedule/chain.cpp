#include "sim/policy/schedule/chain.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace memsim::schedule {
namespace {

constexpr std::uint64_t kSaturated = 1ull << 62;

// Where revolve splits [lo, hi] with c snaps: g(m) = (m - lo) + t(hi - m, c - 1) + t(m - lo, c)
// is convex in m (t is convex in its first argument), so the first m where it stops falling
// is a minimum.
std::uint32_t split(std::uint32_t lo, std::uint32_t hi, std::uint32_t c) {
  auto g = [&](std::uint32_t m) {
    return (m - lo) + revolve_cost(hi - m, c - 1) + revolve_cost(m - lo, c);
  };
  std::uint32_t a = lo + 1, b = hi - 1;  // the answer is in [a, b]
  while (a < b) {
    const std::uint32_t mid = a + (b - a) / 2;
    if (g(mid + 1) >= g(mid))
      b = mid;
    else
      a = mid + 1;
  }
  return a;
}

}  // namespace

std::uint64_t binomial_reach(std::uint64_t c, std::uint64_t r) {
  // C(c + r, r) = prod_{i=1..r} (c + i) / i, each partial product an integer.
  unsigned __int128 v = 1;
  for (std::uint64_t i = 1; i <= r; ++i) {
    v = v * (c + i) / i;
    if (v >= kSaturated) return kSaturated;
  }
  return static_cast<std::uint64_t>(v);
}

std::uint64_t revolve_cost(std::uint64_t n, std::uint64_t snaps) {
  if (snaps == 0) throw std::invalid_argument("revolve needs at least one snap (x_0's)");
  if (n <= 1) return 0;
  if (snaps == 1) return n * (n - 1) / 2;
  std::uint64_t r = 1;
  while (binomial_reach(snaps, r) < n) ++r;
  return r * n - binomial_reach(snaps + 1, r - 1);
}

std::vector<ChainStep> revolve_schedule(std::uint32_t n, std::uint32_t snaps) {
  if (snaps == 0) throw std::invalid_argument("revolve needs at least one snap (x_0's)");
  std::vector<ChainStep> out;
  out.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(revolve_cost(n, snaps) + n, 1ull << 26)));
  struct Task {
    std::uint32_t lo, hi, c;
  };
  // revolve(lo, hi, c): reverse steps hi .. lo+1 with x_lo in the register and in a snap.
  std::vector<Task> todo{{0, n, snaps}};
  while (!todo.empty()) {
    const Task t = todo.back();
    todo.pop_back();
    if (t.hi <= t.lo) continue;
    if (t.hi - t.lo == 1) {
      out.push_back({ChainAction::reverse, t.hi});
    } else if (t.c == 1) {
      for (std::uint32_t k = t.hi; k > t.lo; --k) {
        for (std::uint32_t a = t.lo + 1; a < k; ++a) out.push_back({ChainAction::advance, a});
        out.push_back({ChainAction::reverse, k});
      }
    } else {
      const std::uint32_t m = split(t.lo, t.hi, t.c);
      for (std::uint32_t a = t.lo + 1; a <= m; ++a) out.push_back({ChainAction::advance, a});
      todo.push_back({t.lo, m, t.c});        // second: back from x_m to x_lo
      todo.push_back({m, t.hi, t.c - 1});    // first: the part after the new snap at x_m
    }
  }
  return out;
}

BpttTable::BpttTable(std::uint32_t n, std::uint32_t max_slots, std::uint32_t alpha)
    : n_(n), alpha_(std::max<std::uint32_t>(alpha, 1)) {
  extend(max_slots);
}

double BpttTable::work(std::uint32_t n, std::uint32_t max_slots, std::uint32_t alpha) {
  double w = 0;
  for (std::uint64_t t = 2; t <= n; ++t)
    w += static_cast<double>(std::min<std::uint64_t>(max_slots + 1ull, static_cast<std::uint64_t>(alpha) * (t - 1))) *
         static_cast<double>(t);
  return w;
}

void BpttTable::extend(std::uint32_t max_slots) {
  for (std::uint32_t m = static_cast<std::uint32_t>(cols_.size()); m <= max_slots; ++m) {
    cols_.emplace_back(n_ + 1);
    Cell* const here = cols_[m].data();
    const Cell* const less1 = m >= 1 ? cols_[m - 1].data() : nullptr;
    const Cell* const less_a = m >= alpha_ ? cols_[m - alpha_].data() : nullptr;
    here[0] = {0, 0, true};
    for (std::uint32_t t = 1; t <= n_; ++t) {
      // Advance to the end and reverse the last step from the register.
      Cell best{t + here[t - 1].cost, t, true};
      // With memory for every remaining internal state, storing them all is optimal:
      // every step is advanced once.
      if (m >= static_cast<std::uint64_t>(alpha_) * (t - 1)) {
        if (t > 1) best = {t, 1, true};
      } else {
        for (std::uint32_t y = 1; y < t; ++y) {
          if (less_a) {
            const std::uint64_t c = y + less_a[t - y].cost + here[y - 1].cost;
            if (c < best.cost) best = {c, y, true};
          }
          if (less1) {
            const std::uint64_t c = y + less1[t - y].cost + here[y].cost;
            if (c < best.cost) best = {c, y, false};
          }
        }
      }
      here[t] = best;
    }
  }
}

std::vector<ChainStep> BpttTable::schedule(std::uint32_t slots) const {
  if (slots > this->slots()) throw std::invalid_argument("bptt schedule beyond the table's slots");
  std::vector<ChainStep> out;
  struct Task {
    bool reverse;
    std::uint32_t lo, t, m;
  };
  std::vector<Task> todo{{false, 0, n_, slots}};
  while (!todo.empty()) {
    const Task k = todo.back();
    todo.pop_back();
    if (k.reverse) {
      out.push_back({ChainAction::reverse, k.lo});
      continue;
    }
    if (k.t == 0) continue;
    const Cell& c = at(k.t, k.m);
    for (std::uint32_t a = k.lo + 1; a <= k.lo + c.y; ++a) out.push_back({ChainAction::advance, a});
    if (c.internal) {
      // Right part from the stored internal state at y, then y's backward, then the rest.
      todo.push_back({false, k.lo, c.y - 1, k.m});
      todo.push_back({true, k.lo + c.y, 0, 0});
      if (c.y < k.t) todo.push_back({false, k.lo + c.y, k.t - c.y, k.m - alpha_});
    } else {
      todo.push_back({false, k.lo, c.y, k.m});
      todo.push_back({false, k.lo + c.y, k.t - c.y, k.m - 1});
    }
  }
  return out;
}

}  // namespace memsim::schedule
