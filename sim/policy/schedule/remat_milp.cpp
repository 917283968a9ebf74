#include "sim/policy/schedule/remat_milp.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include <coin/Cbc_C_Interface.h>

namespace memsim::schedule {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Users of each node, in increasing order.
std::vector<std::vector<int>> users_of(const RematGraph& g) {
  std::vector<std::vector<int>> u(g.size());
  for (int j = 0; j < static_cast<int>(g.size()); ++j)
    for (int i : g.deps[j]) u[i].push_back(j);
  for (auto& v : u) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  return u;
}

double pinned_at(const RematGraph& g, int t) {
  return t < static_cast<int>(g.pinned.size()) ? g.pinned[t] : 0;
}

// The schedule as 0/1 matrices under the program's accounting: R (computed in stage t), S
// (kept into stage t: available at the end of t-1 and used again before it is recomputed).
struct Replay {
  std::vector<std::vector<std::uint8_t>> R, S;
  double peak = 0, cost = 0;
  int peak_stage = -1;  // the stage where the peak is reached
  bool valid = true;
};

Replay replay(const RematGraph& g, const std::vector<std::vector<int>>& recompute) {
  const int n = static_cast<int>(g.size());
  Replay r;
  r.R.assign(n, std::vector<std::uint8_t>(n, 0));
  r.S.assign(n, std::vector<std::uint8_t>(n, 0));
  for (int t = 0; t < n; ++t) {
    r.R[t][t] = 1;
    if (t < static_cast<int>(recompute.size()))
      for (int i : recompute[t]) {
        if (i >= t || !g.recomputable[i]) r.valid = false;
        if (i < t) r.R[t][i] = 1;
        if (i >= 0 && i < n) r.cost += g.cost[i];
      }
  }
  const auto users = users_of(g);
  // Stage where each value is next used / next computed, from stage t on.
  std::vector<int> next_use(n + 1), next_make(n + 1);
  for (int i = 0; i < n; ++i) {
    next_use[n] = next_make[n] = n;
    for (int t = n - 1; t > i; --t) {
      bool used = false;
      for (int j : users[i])
        if (j <= t && r.R[t][j]) {
          used = true;
          break;
        }
      next_use[t] = used ? t : next_use[t + 1];
      next_make[t] = r.R[t][i] ? t : next_make[t + 1];
    }
    bool avail = false;  // at the end of the previous stage
    for (int t = 0; t < n; ++t) {
      if (t > i && avail) r.S[t][i] = next_use[t] < n && next_use[t] < next_make[t];
      avail = r.R[t][i] || r.S[t][i];
    }
  }
  // Memory, stage by stage; and every read finds its value.
  for (int t = 0; t < n && r.valid; ++t) {
    double mem = g.constant + pinned_at(g, t);
    std::vector<std::uint8_t> here(n, 0);
    for (int i = 0; i < t; ++i)
      if (r.S[t][i]) {
        mem += g.mem[i];
        here[i] = 1;
      }
    for (int k = 0; k <= t; ++k) {
      if (!r.R[t][k]) continue;
      for (int i : g.deps[k])
        if (!here[i]) r.valid = false;
      mem += g.mem[k];
      here[k] = 1;
      if (mem + g.workspace[k] > r.peak) {
        r.peak = mem + g.workspace[k];
        r.peak_stage = t;
      }
      // Free what this stage no longer reads and the next does not keep.
      auto maybe_free = [&](int i) {
        if (!here[i] || (t + 1 < n && r.S[t + 1][i])) return;
        for (int j : users[i])
          if (j > k && j <= t && r.R[t][j]) return;
        here[i] = 0;
        mem -= g.mem[i];
      };
      for (int i : g.deps[k]) maybe_free(i);
      maybe_free(k);
    }
  }
  return r;
}

// A linear program in rows, turned into CBC's column-major form.
class Program {
 public:
  int var(double lb, double ub, double obj, bool integer) {
    lb_.push_back(lb);
    ub_.push_back(ub);
    obj_.push_back(obj);
    integer_.push_back(integer);
    return static_cast<int>(lb_.size()) - 1;
  }
  void row(double lo, double hi, const std::vector<std::pair<int, double>>& terms) {
    const int r = static_cast<int>(rlo_.size());
    rlo_.push_back(lo);
    rhi_.push_back(hi);
    for (auto [c, v] : terms) entries_.push_back({c, r, v});
  }
  std::size_t vars() const { return lb_.size(); }
  std::size_t rows() const { return rlo_.size(); }

  Cbc_Model* load(bool integer) const {
    std::vector<Entry> e = entries_;
    std::sort(e.begin(), e.end(), [](const Entry& a, const Entry& b) {
      return a.col != b.col ? a.col < b.col : a.row < b.row;
    });
    std::vector<CoinBigIndex> start(vars() + 1, 0);
    std::vector<int> index;
    std::vector<double> value;
    index.reserve(e.size());
    value.reserve(e.size());
    for (const Entry& x : e) {
      ++start[x.col + 1];
      index.push_back(x.row);
      value.push_back(x.value);
    }
    for (std::size_t c = 0; c < vars(); ++c) start[c + 1] += start[c];
    Cbc_Model* m = Cbc_newModel();
    Cbc_loadProblem(m, static_cast<int>(vars()), static_cast<int>(rows()), start.data(), index.data(),
                    value.data(), lb_.data(), ub_.data(), obj_.data(), rlo_.data(), rhi_.data());
    if (integer)
      for (std::size_t c = 0; c < vars(); ++c)
        if (integer_[c]) Cbc_setInteger(m, static_cast<int>(c));
    return m;
  }

 private:
  struct Entry {
    int col, row;
    double value;
  };
  std::vector<double> lb_, ub_, obj_, rlo_, rhi_;
  std::vector<bool> integer_;
  std::vector<Entry> entries_;
};

// Checkmate's program for the graph; R, S and FREE index the variables (-1: fixed at 0).
struct Model {
  Program p;
  std::vector<std::vector<int>> R, S;
  struct Free {
    int t, i, k, var;
  };
  std::vector<Free> frees;
  double scale = 1;  // objective scale (costs in units of the mean cost)
};

Model build(const RematGraph& g, double budget) {
  const int n = static_cast<int>(g.size());
  Model m;
  double mean = 0;
  for (double c : g.cost) mean += c;
  m.scale = mean > 0 ? mean / n : 1;
  const auto users = users_of(g);
  // A value is worth keeping into stage t while a user at or after t may run there.
  std::vector<int> last_user(n, -1);
  std::vector<bool> reread(n, false);  // a recomputable user may run again later
  for (int i = 0; i < n; ++i)
    for (int j : users[i]) {
      last_user[i] = std::max(last_user[i], j);
      if (g.recomputable[j]) reread[i] = true;
    }
  m.R.assign(n, std::vector<int>(n, -1));
  m.S.assign(n, std::vector<int>(n, -1));
  for (int t = 0; t < n; ++t) {
    m.R[t][t] = m.p.var(1, 1, 0, true);
    for (int i = 0; i < t; ++i) {
      if (g.recomputable[i]) m.R[t][i] = m.p.var(0, 1, g.cost[i] / m.scale, true);
      if (last_user[i] >= t || reread[i]) m.S[t][i] = m.p.var(0, 1, 0, true);
    }
  }
  auto R = [&](int t, int i) { return m.R[t][i]; };
  auto S = [&](int t, int i) { return t < n ? m.S[t][i] : -1; };
  // Dependencies.
  for (int t = 0; t < n; ++t)
    for (int j = 0; j <= t; ++j) {
      if (R(t, j) < 0) continue;
      for (int i : g.deps[j]) {
        std::vector<std::pair<int, double>> row{{R(t, j), 1}};
        if (R(t, i) >= 0) row.push_back({R(t, i), -1});
        if (S(t, i) >= 0) row.push_back({S(t, i), -1});
        m.p.row(-kInf, 0, row);
      }
    }
  // Keeping needs having.
  for (int t = 1; t < n; ++t)
    for (int i = 0; i < t; ++i) {
      if (S(t, i) < 0) continue;
      std::vector<std::pair<int, double>> row{{S(t, i), 1}};
      if (R(t - 1, i) >= 0) row.push_back({R(t - 1, i), -1});
      if (i < t - 1 && S(t - 1, i) >= 0) row.push_back({S(t - 1, i), -1});
      m.p.row(-kInf, 0, row);
    }
  // Memory.
  const double unit = std::max(1.0, budget / 1e6);  // bytes in units that keep CBC's numbers tame
  for (int t = 0; t < n; ++t) {
    int prev = -1;  // U[t][k-1]
    std::vector<std::pair<int, double>> freed_prev;
    for (int k = 0; k <= t; ++k) {
      const int u = m.p.var(0, kInf, 0, false);
      std::vector<std::pair<int, double>> row{{u, 1}};
      double rhs = 0;
      if (k == 0) {
        rhs = (g.constant + pinned_at(g, t)) / unit;
        for (int i = 0; i < t; ++i)
          if (S(t, i) >= 0) row.push_back({S(t, i), -g.mem[i] / unit});
      } else {
        row.push_back({prev, -1});
        for (auto [var, mem] : freed_prev) row.push_back({var, mem});
      }
      if (R(t, k) >= 0) row.push_back({R(t, k), -g.mem[k] / unit});
      m.p.row(rhs, rhs, row);
      // Within the budget while k runs.
      std::vector<std::pair<int, double>> cap{{u, 1}};
      if (R(t, k) >= 0 && g.workspace[k] > 0) cap.push_back({R(t, k), g.workspace[k] / unit});
      m.p.row(-kInf, budget / unit, cap);
      // What may be freed after k.
      freed_prev.clear();
      if (R(t, k) >= 0) {
        std::vector<int> cands = g.deps[k];
        cands.push_back(k);
        std::sort(cands.begin(), cands.end());
        cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
        for (int i : cands) {
          const int f = m.p.var(0, 1, 0, true);
          m.frees.push_back({t, i, k, f});
          // hazards: k not computed, i kept into t+1, a later user computed in this stage.
          std::vector<std::pair<int, double>> h{{R(t, k), -1}};
          double hmax = 1;
          if (t + 1 < n && S(t + 1, i) >= 0) {
            h.push_back({S(t + 1, i), 1});
            hmax += 1;
          }
          for (int j : users[i])
            if (j > k && j <= t && R(t, j) >= 0) {
              h.push_back({R(t, j), 1});
              hmax += 1;
            }
          // 1 - FREE <= hazards   and   hmax (1 - FREE) >= hazards; hazards = 1 + sum(h).
          auto lo = h;
          lo.push_back({f, 1});
          m.p.row(0, kInf, lo);
          auto hi = h;
          hi.push_back({f, hmax});
          m.p.row(-kInf, hmax - 1, hi);
          freed_prev.push_back({f, g.mem[i] / unit});
        }
      }
      prev = u;
    }
  }
  return m;
}

// A full assignment of the program's variables for a schedule (a MIP start).
std::vector<double> assignment(const Model& m, const RematGraph& g, const Replay& r) {
  std::vector<double> x(m.p.vars(), 0);
  const int n = static_cast<int>(g.size());
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < n; ++i) {
      if (m.R[t][i] >= 0) x[m.R[t][i]] = r.R[t][i];
      if (m.S[t][i] >= 0) x[m.S[t][i]] = r.S[t][i];
    }
  const auto users = users_of(g);
  for (const auto& f : m.frees) {
    bool free = r.R[f.t][f.k] && !(f.t + 1 < n && r.S[f.t + 1][f.i]);
    for (int j : users[f.i])
      if (j > f.k && j <= f.t && r.R[f.t][j]) free = false;
    x[f.var] = free;
  }
  return x;
}

// The schedule that keeps value i into stage t when keep[t][i] (and it is there to keep)
// and recomputes, in each stage, whatever that stage reads and does not have. Values that
// cannot be recomputed are kept while used.
std::vector<std::vector<int>> schedule_keeping(const RematGraph& g,
                                               const std::vector<std::vector<std::uint8_t>>& want) {
  const int n = static_cast<int>(g.size());
  const auto users = users_of(g);
  std::vector<int> last_user(n, -1);
  for (int i = 0; i < n; ++i)
    for (int j : users[i]) last_user[i] = std::max(last_user[i], j);
  std::vector<std::vector<int>> out(n);
  std::vector<std::uint8_t> avail(n, 0), keep(n, 0), make(n, 0);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < t; ++i)
      keep[i] = avail[i] && (g.recomputable[i] ? want[t][i] != 0 : last_user[i] >= t);
    std::fill(make.begin(), make.end(), 0);
    make[t] = 1;
    for (int j = t; j >= 0; --j) {
      if (!make[j]) continue;
      for (int i : g.deps[j])
        if (!keep[i] && !make[i] && g.recomputable[i] && i < t) make[i] = 1;
    }
    for (int i = 0; i < t; ++i)
      if (make[i]) out[t].push_back(i);
    for (int i = 0; i <= t; ++i) avail[i] = keep[i] || make[i];
  }
  return out;
}

// Chen et al.'s schedule on the graph (checkpoint-sqrt's): the recomputable nodes in
// segments of about `limit` bytes of values each; what a later segment reads is kept (a
// checkpoint); the rest is dropped once the forward leaves its segment, made again from the
// first stage that cannot run again and reads the segment, and kept from then on.
std::vector<std::vector<int>> segmented(const RematGraph& g, double limit) {
  const int n = static_cast<int>(g.size());
  std::vector<int> seg(n, -1);
  int segments = 0;
  double made = 0;
  for (int i = 0; i < n; ++i) {
    if (!g.recomputable[i]) continue;
    seg[i] = segments;
    made += g.mem[i];
    if (made > limit) {
      ++segments;
      made = 0;
    }
  }
  std::vector<std::uint8_t> checkpoint(n, 0);
  std::vector<int> first(segments + 1, n);
  for (int j = 0; j < n; ++j)
    for (int i : g.deps[j]) {
      if (seg[i] < 0) continue;
      if (!g.recomputable[j]) first[seg[i]] = std::min(first[seg[i]], j);
      else if (seg[i] < seg[j]) checkpoint[i] = 1;
    }
  std::vector<std::vector<std::uint8_t>> want(n, std::vector<std::uint8_t>(n, 0));
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < t; ++i)
      want[t][i] = seg[i] >= 0 && (checkpoint[i] || (g.recomputable[t] ? seg[t] == seg[i] : t >= first[seg[i]]));
  return schedule_keeping(g, want);
}

// Two-phase rounding of an LP solution (keep i into t when S*[t][i] reaches the threshold),
// then, while the schedule is over budget, stop keeping into the peak's stage the largest
// value kept there that can be recomputed.
std::vector<std::vector<int>> round_lp(const Model& m, const RematGraph& g, const double* x,
                                       const std::function<double()>& threshold, double budget) {
  const int n = static_cast<int>(g.size());
  std::vector<std::vector<std::uint8_t>> want(n, std::vector<std::uint8_t>(n, 0));
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < t; ++i)
      want[t][i] = x ? (m.S[t][i] >= 0 && x[m.S[t][i]] >= threshold()) : i == t - 1;
  auto rc = schedule_keeping(g, want);
  for (int round = 0; round < 4 * n; ++round) {
    const Replay r = replay(g, rc);
    if (!r.valid || r.peak <= budget || r.peak_stage < 0) break;
    const int t = r.peak_stage;
    int drop = -1;
    for (int i = 0; i < t; ++i)
      if (r.S[t][i] && g.recomputable[i] && want[t][i] && (drop < 0 || g.mem[i] > g.mem[drop])) drop = i;
    if (drop < 0) break;
    want[t][drop] = 0;
    rc = schedule_keeping(g, want);
  }
  return rc;
}

}  // namespace

double remat_peak(const RematGraph& g, const std::vector<std::vector<int>>& recompute) {
  return replay(g, recompute).peak;
}

double remat_cost(const RematGraph& g, const std::vector<std::vector<int>>& recompute) {
  const Replay r = replay(g, recompute);
  return r.valid ? r.cost : kInf;
}

std::uint64_t remat_program_size(const RematGraph& g) {
  // R and S: n^2; U: n^2 / 2; FREE and its two rows: n^2 x the mean in-degree.
  const double n = static_cast<double>(g.size());
  double edges = 0;
  for (const auto& d : g.deps) edges += static_cast<double>(d.size()) + 1;
  return static_cast<std::uint64_t>(2.5 * n * n + 1.5 * n * edges);
}

namespace {

// The options' limits on one solve: time where asked, and work (nodes, simplex iterations),
// which ends the search at the same point on any machine.
void set_limits(Cbc_Model* m, const RematOptions& options) {
  if (options.seconds > 0) Cbc_setMaximumSeconds(m, options.seconds);
  if (options.nodes > 0) Cbc_setMaximumNodes(m, static_cast<int>(std::min<std::int64_t>(options.nodes, INT_MAX)));
  if (options.iterations > 0)
    Cbc_setParameter(m, "maxIterations", std::to_string(options.iterations).c_str());
}

}  // namespace

RematAnswer solve_remat(const RematGraph& g, double budget, const RematOptions& options) {
  const int n = static_cast<int>(g.size());
  RematAnswer best;
  auto offer = [&](std::vector<std::vector<int>> rc, const std::string& method) {
    const Replay r = replay(g, rc);
    if (!r.valid || r.peak > budget * (1 + 1e-9)) return false;
    if (best.found && r.cost >= best.cost) return false;
    best.found = true;
    best.cost = r.cost;
    best.method = method;
    best.recompute = std::move(rc);
    return true;
  };
  // Keeping everything, when it fits, is optimal.
  if (offer(std::vector<std::vector<int>>(n), "keep-all")) {
    best.proven_optimal = true;
    return best;
  }
  // Chen's schedules (checkpoint-sqrt's) for a range of segment sizes: an answer when branch
  // and bound finds none in time, and its start.
  {
    double values = 0;
    for (int i = 0; i < n; ++i)
      if (g.recomputable[i]) values += g.mem[i];
    for (int k = 1; k <= 48; ++k) offer(segmented(g, values / k), "segments");
  }
  Model m = build(g, budget);

  // LP relaxation: a bound, and the rounding fallback.
  {
    std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)> lp(m.p.load(false), Cbc_deleteModel);
    Cbc_setLogLevel(lp.get(), 0);
    set_limits(lp.get(), options);
    Cbc_solve(lp.get());
    if (Cbc_isProvenOptimal(lp.get())) {
      best.bound = Cbc_getObjValue(lp.get()) * m.scale;
      const double* x = Cbc_getColSolution(lp.get());
      // Deterministic thresholds, then randomised rounding (keep with probability S*) from
      // fixed seeds, so a run is reproducible.
      for (double th : {1e-6, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0})
        offer(round_lp(m, g, x, [th] { return th; }, budget), "lp-rounding");
      for (unsigned seed = 1; seed <= 64; ++seed) {
        std::mt19937 rng(seed);
        std::uniform_real_distribution<double> u(1e-9, 1.0);
        offer(round_lp(m, g, x, [&] { return u(rng); }, budget), "lp-rounding");
      }
    } else if (Cbc_isProvenInfeasible(lp.get())) {
      return best;  // no schedule, not even a fractional one, fits
    }
  }
  // Little memory: every stage recomputes what it reads from the inputs.
  offer(round_lp(m, g, nullptr, {}, budget), "recompute-all");
  if (!options.integer) return best;

  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)> mip(m.p.load(true), Cbc_deleteModel);
  Cbc_setLogLevel(mip.get(), 0);
  set_limits(mip.get(), options);
  // CBC 2.10's preprocessing crashes in postProcess on some of these programs when stopped
  // by the time limit; the program is small enough without it.
  Cbc_setParameter(mip.get(), "preprocess", "off");
  if (best.found) {
    const std::vector<double> x = assignment(m, g, replay(g, best.recompute));
    std::vector<int> idx(x.size());
    for (std::size_t c = 0; c < x.size(); ++c) idx[c] = static_cast<int>(c);
    Cbc_setMIPStartI(mip.get(), static_cast<int>(x.size()), idx.data(), x.data());
  }
  Cbc_solve(mip.get());
  best.time_limit = Cbc_isSecondsLimitReached(mip.get()) != 0;
  // Stopped (status 1) short of the time limit: at the node or iteration limit.
  best.work_limit = Cbc_status(mip.get()) == 1 && !best.time_limit;
  best.bound = std::max(best.bound, Cbc_getBestPossibleObjValue(mip.get()) * m.scale);
  if (const double* x = Cbc_bestSolution(mip.get())) {
    std::vector<std::vector<int>> rc(n);
    for (int t = 0; t < n; ++t)
      for (int i = 0; i < t; ++i)
        if (m.R[t][i] >= 0 && x[m.R[t][i]] > 0.5) rc[t].push_back(i);
    offer(std::move(rc), "milp");
  }
  if (Cbc_isProvenOptimal(mip.get()) && best.found) {
    best.proven_optimal = true;
    best.bound = best.cost;
  }
  return best;
}

}  // namespace memsim::schedule
