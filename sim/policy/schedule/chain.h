#pragma once
// Checkpointing schedules for a chain, as pure arithmetic (no trace, no engine), so they are
// unit-tested against schedules enumerated by brute force.
//
// The chain game: steps 1..n, states x_0..x_n; advancing step k computes x_k from x_{k-1}
// (one unit of work); reversing step k runs its backward. x_0 is always at hand.
//
//  - revolve (Griewank 1992; Griewank & Walther 2000, "Algorithm 799: revolve"): reversing
//    step k needs x_{k-1} in the working register and includes step k's own taped forward
//    (not counted). `snaps` checkpoints may be held at once, one of them x_0. The least work
//    is t(n, c) = r n - C(c + r, r - 1), with r the least integer such that C(c + r, c) >= n.
//  - bptt (Gruslys et al. 2016, "Memory-efficient backpropagation through time", BPTT-MSM):
//    reversing step k needs k's internal state: the register just after advancing to x_k,
//    or a stored copy. Memory holds `slots` units: a hidden state x_k costs 1, an internal
//    state `alpha` (it contains x_k). The least number of advances, the first forward pass
//    included, is Q(n, m) = min( n + Q(n - 1, m),
//                                min_y y + Q(n - y, m - alpha) + Q(y - 1, m)   (internal at y)
//                                min_y y + Q(n - y, m - 1) + Q(y, m) )         (hidden at y)
//    with Q(0, m) = 0.
#include <cstdint>
#include <vector>

namespace memsim::schedule {

enum class ChainAction : std::uint8_t { advance, reverse };
struct ChainStep {
  ChainAction action;
  std::uint32_t step;  // 1-based
  bool operator==(const ChainStep&) const = default;
};

/// C(c + r, c), saturated at 2^62.
std::uint64_t binomial_reach(std::uint64_t c, std::uint64_t r);
/// Griewank's t(n, c): advances of the optimal reversal of n steps with c >= 1 snaps.
std::uint64_t revolve_cost(std::uint64_t n, std::uint64_t snaps);
/// The optimal reversal as actions: the first sweep's advances, then, for every reverse,
/// the advances from the checkpoint in use. Its advances number revolve_cost(n, snaps).
std::vector<ChainStep> revolve_schedule(std::uint32_t n, std::uint32_t snaps);

/// Gruslys et al.'s table, filled for every t <= n and m <= slots(); extend() adds columns
/// (column m needs only columns m - 1 and m - alpha), so a search over the slots fills only
/// as far as it looks.
class BpttTable {
 public:
  BpttTable(std::uint32_t n, std::uint32_t max_slots, std::uint32_t alpha);
  void extend(std::uint32_t max_slots);
  std::uint32_t slots() const { return static_cast<std::uint32_t>(cols_.size()) - 1; }
  /// Q(n, m): advances, the first forward pass included.
  std::uint64_t cost(std::uint32_t slots) const { return at(n_, slots).cost; }
  /// The optimal actions for `slots` <= slots(); advances number cost(slots).
  std::vector<ChainStep> schedule(std::uint32_t slots) const;
  std::uint32_t alpha() const { return alpha_; }
  /// Inner-loop steps to fill columns up to `max_slots` from scratch (for a time guard).
  static double work(std::uint32_t n, std::uint32_t max_slots, std::uint32_t alpha);

 private:
  struct Cell {
    std::uint64_t cost;
    std::uint32_t y;   // split point
    bool internal;     // store the internal state at y (else the hidden state)
  };
  const Cell& at(std::uint32_t t, std::uint32_t m) const { return cols_[m][t]; }
  std::uint32_t n_, alpha_;
  std::vector<std::vector<Cell>> cols_;  // per m, over t
};

}  // namespace memsim::schedule
