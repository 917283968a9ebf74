#pragma once
// Optimal rematerialization of a DAG as a mixed-integer program (Jain et al. 2020,
// "Checkmate: Breaking the Memory Wall with Optimal Tensor Rematerialization"), solved with
// COIN-OR CBC. Pure: a graph in, recomputations out; policy/impl/checkmate.cpp builds the
// graph from a trace and lowers the answer to a plan.
//
// Nodes 0..n-1 in topological order; node v makes one value of mem[v] bytes. Stage t computes
// node t (R[t][t] = 1), first recomputing any earlier recomputable node i with R[t][i] = 1,
// in index order; S[t][i] = 1 keeps i's value from stage t-1 into stage t. A value is freed
// after its last use in a stage unless kept into the next (FREE[t][i][k], linearised as in
// the paper). U[t][k], the memory while stage t computes k, stays within the budget:
//
//   min  sum_t sum_{i<t} cost[i] R[t][i]
//   s.t. R[t][j] <= R[t][i] + S[t][i]              for each edge i -> j, t >= j
//        S[t][i] <= R[t-1][i] + S[t-1][i]
//        U[t][k] = constant + pinned[t] + sum_i S[t][i] mem[i] + sum_{k'<=k} R[t][k'] mem[k']
//                  - sum_{k'<k} sum_{i in deps(k') + k'} mem[i] FREE[t][i][k']
//        U[t][k] + workspace[k] R[t][k] <= budget
//
// Without an integer solution within the solver's limits, the LP relaxation is rounded (the paper's
// two-phase rounding: keep i into stage t when S*[t][i] >= a threshold, then recompute
// whatever the stage needs that is not kept), over a range of thresholds.
#include <cstdint>
#include <string>
#include <vector>

namespace memsim::schedule {

struct RematGraph {
  std::vector<double> cost;        // per node: time to (re)compute it
  std::vector<double> mem;         // bytes of the value it makes
  std::vector<double> workspace;   // bytes it needs while it runs
  std::vector<bool> recomputable;  // forward ops; the rest run only at their own stage
  std::vector<std::vector<int>> deps;  // earlier nodes whose values it reads
  double constant = 0;             // bytes resident throughout (weights, inputs)
  /// Per stage (empty: none): bytes resident throughout the stage whatever the schedule,
  /// beyond `constant` — what nodes that never run again made and a later stage still reads
  /// (a weight's gradient, made in the backward and read by the optimizer). Their memory is
  /// not any node's `mem`: it lives from its maker's stage (count it in the maker's
  /// `workspace`) to its last reader's, which no schedule changes.
  std::vector<double> pinned;
  std::size_t size() const { return cost.size(); }
};

struct RematAnswer {
  bool found = false;           // a schedule within the budget
  bool proven_optimal = false;  // CBC proved it optimal
  bool time_limit = false;      // the solver stopped at the time limit
  bool work_limit = false;      // the solver stopped at its node or iteration limit
  double cost = 0;              // recomputation time of the schedule
  double bound = 0;             // a lower bound on it (LP or branch and bound)
  std::string method;           // "milp", "lp-rounding", "keep-all"
  /// Per stage t: the nodes recomputed before t runs, in increasing order.
  std::vector<std::vector<int>> recompute;
};

/// The memory of a schedule under the program's accounting (values freed after their last
/// use in a stage, kept across stages only while used later): the largest U + workspace.
double remat_peak(const RematGraph& g, const std::vector<std::vector<int>>& recompute);
/// Its recomputation cost; infinity when it reads a value that is not there.
double remat_cost(const RematGraph& g, const std::vector<std::vector<int>>& recompute);

struct RematOptions {
  /// CBC's time limit for each solve (the relaxation, then the program); 0: none. The
  /// answer then depends on the machine's speed.
  double seconds = 60;
  /// Limits that are work, not time, so that the answer is the same on any machine: branch
  /// and bound's nodes, and the simplex iterations of each solve (0: none).
  std::int64_t nodes = 0;
  std::int64_t iterations = 0;
  bool integer = true;       // false: LP relaxation and rounding only
};

RematAnswer solve_remat(const RematGraph& g, double budget, const RematOptions& options);

/// Variables and rows the program has for this graph (to refuse what is hopelessly large).
std::uint64_t remat_program_size(const RematGraph& g);

}  // namespace memsim::schedule
