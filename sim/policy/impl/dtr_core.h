#pragma once
// DTR's bookkeeping (Kirisame et al. 2021), apart from the engine so it is unit-tested alone:
// which buffers are resident and evictable, when each was last used, which are locked by the
// ops under way, the evicted neighbourhoods, and the choice of the buffer to evict.
//
// A buffer is a candidate when it has a producer, is not persistent, and can be remade up to
// its last use: everything its producer (and its in-place updaters) reads is persistent,
// lives as long, or can itself be remade until then (dtr_remake_rules()). A buffer that a
// candidate may need after its own last use is dropped there instead of freed, as DTR keeps
// a tensor whose last reference goes rematerializable for its children; remade for a child,
// it is dropped again once the op that needed it has run.
//
// Heuristics, smallest score evicted first:
//   full     h = (c(t) + e*(t)) / (m(t) x s(t)), e*(t) the cost of the evicted buffers around
//            t, tracked as equivalence classes in a union-find (DTR's h_DTR^eq): evicting t
//            merges its class with its evicted neighbours'; remaking t subtracts its cost
//            from its class (classes are not split, as in DTR's implementation)
//   local    the same with e*(t) = the costs of t's evicted immediate neighbours only
//   lru      h = 1 / s(t) (the stalest first)
//   largest  h = 1 / m(t) (the largest first; ties to the stalest)
// c(t): the time of t's producer plus its in-place updaters; m(t): bytes; s(t): time since
// t was last accessed, counted as the program counts it: an op accesses what it reads (and
// what is remade for it) when it is issued, and what it makes when it is done. A buffer
// remade for a reader is thus as stale as the request, not fresher than the checkpoint it
// was remade from (as DTR's simulator stamps them); stamped at the end of each re-run
// instead, the remade intermediates of a segment outlive the spread-out checkpoints.
// Neighbours of t: what its producer read or updated, and what the ops that read or update t
// make or update. A buffer dropped at its last use counts as evicted; one freed there leaves
// its class.
// The op being prepared holds its operands (locked); a buffer remade for it stays until the
// op that needed it has read it, unless nothing else is left to evict.
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/workload/trace.h"

namespace memsim {

enum class DtrHeuristic : std::uint8_t { full, local, lru, largest };
std::string_view to_string(DtrHeuristic h);
std::optional<DtrHeuristic> dtr_heuristic_from_string(std::string_view s);

struct DtrRemakeRules {
  std::vector<std::uint8_t> evictable;      // may be evicted (see above)
  std::vector<std::uint8_t> drop_at_death;  // dropped, not freed, at its last use
};
DtrRemakeRules dtr_remake_rules(const Trace& trace, const Liveness& liveness);

class DtrCore {
 public:
  /// `op_cost`: seconds (or any unit) per op, used as the compute cost c.
  DtrCore(const Trace& trace, const Liveness& liveness, std::vector<double> op_cost,
          DtrHeuristic heuristic);

  // Events, in simulated seconds.
  /// `op` starts (or starts again, as a recomputation, for the op last begun): its operands
  /// are locked.
  void op_begins(OpId op, double now_s, bool recompute);
  /// `op` is done: its operands are unlocked and touched, its outputs resident (or, for a
  /// recomputation, the evicted ones remade and locked until a reader runs).
  void op_ends(OpId op, double now_s, bool recompute);
  /// The outer op is done: buffers remade for it are unlocked; those past their last use
  /// are returned, to drop (nothing frees them otherwise).
  std::vector<BufferId> outer_op_done();
  /// The buffer was evicted (dropped): it joins the evicted classes.
  void evicted(BufferId b);

  /// The candidate to evict now among those `resident` says are in the failing tier, or
  /// nullopt when every resident candidate is locked. Buffers remade for an op that has not
  /// read them yet come last.
  std::optional<BufferId> choose(double now_s, const std::function<bool(BufferId)>& resident);
  /// The score h of a resident candidate (smaller: evicted first). For tests and reports.
  double score(BufferId b, double now_s);

  bool is_candidate(BufferId b) const { return candidate_[b] != 0; }
  bool is_evicted(BufferId b) const { return evicted_[b] != 0; }
  /// Locked: an operand of an op under way. Remade-locked: remade for an op not yet run.
  bool is_locked(BufferId b) const { return lock_[b] != 0; }
  bool is_remade_locked(BufferId b) const { return remade_lock_[b] != 0; }
  /// Bytes of the resident buffers locked now (for the OOM reason).
  std::uint64_t locked_bytes(const std::function<bool(BufferId)>& resident) const;
  std::size_t resident_candidates() const { return resident_.size(); }

 private:
  void add_resident(BufferId b);
  void remove_resident(BufferId b);
  double cost(BufferId b) const;  // c(t): producer + in-place updaters
  double neighbourhood_cost(BufferId b);
  std::uint32_t find(std::uint32_t node);  // with path compression

  const Trace& trace_;
  const Liveness& liveness_;
  std::vector<double> op_cost_;
  DtrHeuristic heuristic_;
  DtrRemakeRules rules_;
  std::vector<std::uint8_t> candidate_;
  std::vector<std::uint8_t> dead_;
  std::vector<std::uint8_t> evicted_;
  std::vector<std::uint32_t> lock_;         // operands of the ops under way
  std::vector<std::uint8_t> remade_lock_;   // remade, not yet read by the op it was for
  std::vector<BufferId> remade_locked_;
  std::vector<double> last_access_;
  double issued_s_ = 0;                     // when the op being prepared began
  std::vector<std::int64_t> slot_;          // index in resident_, or -1
  std::vector<BufferId> resident_;
  std::vector<std::uint32_t> nbr_begin_;    // CSR of neighbours (candidates only)
  std::vector<BufferId> nbr_;
  std::vector<std::vector<OpId>> updaters_;
  // Union-find over eviction events: node_[b] is b's node while it is evicted.
  static constexpr std::uint32_t kNoNode = UINT32_MAX;
  std::vector<std::uint32_t> node_;
  std::vector<std::uint32_t> parent_;
  std::vector<double> class_cost_;
  std::vector<std::uint32_t> class_size_;
};

}  // namespace memsim
