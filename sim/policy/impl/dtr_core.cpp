#include "sim/policy/impl/dtr_core.h"

#include <algorithm>
#include <tuple>

namespace memsim {

std::string_view to_string(DtrHeuristic h) {
  switch (h) {
    case DtrHeuristic::full: return "full";
    case DtrHeuristic::local: return "local";
    case DtrHeuristic::lru: return "lru";
    case DtrHeuristic::largest: return "largest";
  }
  return "?";
}

std::optional<DtrHeuristic> dtr_heuristic_from_string(std::string_view s) {
  for (auto h : {DtrHeuristic::full, DtrHeuristic::local, DtrHeuristic::lru, DtrHeuristic::largest})
    if (to_string(h) == s) return h;
  return std::nullopt;
}

DtrRemakeRules dtr_remake_rules(const Trace& trace, const Liveness& liveness) {
  const std::size_t n = trace.buffers.size();
  constexpr std::uint64_t kForever = UINT64_MAX;
  auto last = [&](BufferId b) -> std::uint64_t {
    const OpId l = liveness.last_use[b];
    return l == kNoOp ? trace.buffers[b].producer : l;  // never read: dead at its producer
  };
  // horizon[c]: the last op at which c can still be remade: the least, over what its producer
  // and its in-place updaters read, of how long that stays available: for ever if
  // persistent; else until its last use, or, if it can be remade itself, until its horizon
  // (it is then dropped rather than freed at its last use, as DTR keeps a tensor whose last
  // reference goes rematerializable for its children). Updaters can come after c's children,
  // so iterate to the fixed point (horizons only shrink).
  std::vector<std::uint64_t> horizon(n, kForever);
  std::vector<std::uint8_t> own(n, 0);  // has a producer and is not persistent
  for (const Buffer& b : trace.buffers) {
    own[b.id] = b.producer != kNoOp && !b.persistent;
    if (b.producer == kNoOp) horizon[b.id] = 0;  // never remade
  }
  auto available = [&](BufferId p) -> std::uint64_t {
    if (trace.buffers[p].persistent) return kForever;
    if (own[p] && horizon[p] >= last(p)) return std::max(last(p), horizon[p]);
    return last(p);
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (const Op& op : trace.ops) {
      auto bound = [&](BufferId c) {
        if (!own[c]) return;
        for (BufferId p : op.reads())
          if (p != c && available(p) < horizon[c]) {
            horizon[c] = available(p);
            changed = true;
          }
      };
      for (BufferId c : op.outputs) bound(c);
      for (BufferId c : op.updates) bound(c);
    }
  }
  DtrRemakeRules rules;
  rules.evictable.assign(n, 0);
  rules.drop_at_death.assign(n, 0);
  for (const Buffer& b : trace.buffers) rules.evictable[b.id] = own[b.id] && horizon[b.id] >= last(b.id);
  // need[p]: the latest op that may need p made: its last use, or later if an evictable
  // buffer made from it may be remade then. Ops in reverse, to the fixed point.
  std::vector<std::uint64_t> need(n);
  for (const Buffer& b : trace.buffers) need[b.id] = last(b.id);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto op = trace.ops.rbegin(); op != trace.ops.rend(); ++op)
      for (const auto* targets : {&op->outputs, &op->updates})
        for (BufferId c : *targets) {
          if (!rules.evictable[c]) continue;
          for (BufferId p : op->reads())
            if (p != c && need[c] > need[p]) {
              need[p] = need[c];
              changed = true;
            }
        }
  }
  for (const Buffer& b : trace.buffers)
    rules.drop_at_death[b.id] = rules.evictable[b.id] && need[b.id] > last(b.id);
  return rules;
}

DtrCore::DtrCore(const Trace& trace, const Liveness& liveness, std::vector<double> op_cost,
                 DtrHeuristic heuristic)
    : trace_(trace),
      liveness_(liveness),
      op_cost_(std::move(op_cost)),
      heuristic_(heuristic),
      rules_(dtr_remake_rules(trace, liveness)),
      candidate_(rules_.evictable),
      dead_(trace.buffers.size(), 0),
      evicted_(trace.buffers.size(), 0),
      lock_(trace.buffers.size(), 0),
      remade_lock_(trace.buffers.size(), 0),
      last_access_(trace.buffers.size(), 0.0),
      slot_(trace.buffers.size(), -1),
      updaters_(trace.buffers.size()),
      node_(trace.buffers.size(), kNoNode) {
  const std::size_t n = trace.buffers.size();
  for (const Op& op : trace.ops)
    for (BufferId b : op.updates)
      if (candidate_[b]) updaters_[b].push_back(op.id);
  // Neighbours: an op joins each candidate it reads or updates with each candidate it makes
  // or updates (an in-place add_ joins its operand to the buffer it writes). Collected, then
  // sorted and deduplicated per buffer, then packed (CSR).
  std::vector<std::vector<BufferId>> lists(n);
  for (const Op& op : trace.ops)
    for (BufferId in : op.reads()) {
      if (!candidate_[in]) continue;
      for (const auto* targets : {&op.outputs, &op.updates})
        for (BufferId out : *targets)
          if (candidate_[out] && out != in) {
            lists[in].push_back(out);
            lists[out].push_back(in);
          }
    }
  nbr_begin_.assign(n + 1, 0);
  for (std::size_t b = 0; b < n; ++b) {
    auto& l = lists[b];
    std::sort(l.begin(), l.end());
    l.erase(std::unique(l.begin(), l.end()), l.end());
    nbr_begin_[b + 1] = nbr_begin_[b] + static_cast<std::uint32_t>(l.size());
  }
  nbr_.reserve(nbr_begin_[n]);
  for (auto& l : lists) nbr_.insert(nbr_.end(), l.begin(), l.end());
}

double DtrCore::cost(BufferId b) const {
  double c = op_cost_[trace_.buffers[b].producer];
  for (OpId u : updaters_[b]) c += op_cost_[u];
  return c;
}

std::uint32_t DtrCore::find(std::uint32_t x) {
  std::uint32_t root = x;
  while (parent_[root] != root) root = parent_[root];
  while (parent_[x] != root) {  // path compression
    const std::uint32_t next = parent_[x];
    parent_[x] = root;
    x = next;
  }
  return root;
}

void DtrCore::add_resident(BufferId b) {
  if (slot_[b] >= 0) return;
  slot_[b] = static_cast<std::int64_t>(resident_.size());
  resident_.push_back(b);
}

void DtrCore::remove_resident(BufferId b) {
  const std::int64_t i = slot_[b];
  if (i < 0) return;
  const BufferId moved = resident_.back();
  resident_[static_cast<std::size_t>(i)] = moved;
  slot_[moved] = i;
  resident_.pop_back();
  slot_[b] = -1;
}

void DtrCore::op_begins(OpId id, double now_s, bool recompute) {
  const Op& op = trace_.ops[id];
  if (!recompute) issued_s_ = now_s;
  for (const auto* list : {&op.inputs, &op.updates, &op.outputs})
    for (BufferId b : *list) ++lock_[b];
}

void DtrCore::op_ends(OpId id, double now_s, bool recompute) {
  const Op& op = trace_.ops[id];
  for (BufferId b : op.reads()) {
    --lock_[b];
    last_access_[b] = issued_s_;  // read when its op (or the op it is remade for) was issued
    remade_lock_[b] = 0;  // its reader ran
  }
  for (BufferId b : op.outputs) {
    --lock_[b];
    if (!candidate_[b]) continue;
    if (recompute) {
      if (!evicted_[b]) continue;  // the engine remakes only what was dropped
      evicted_[b] = 0;
      if (node_[b] != kNoNode) {
        class_cost_[find(node_[b])] -= cost(b);
        node_[b] = kNoNode;
      }
      remade_lock_[b] = 1;
      remade_locked_.push_back(b);
    }
    last_access_[b] = recompute ? issued_s_ : now_s;
    add_resident(b);
  }
  if (recompute) return;
  for (BufferId b : liveness_.dies_after[id]) {
    dead_[b] = 1;
    if (rules_.drop_at_death[b]) {
      // Dropped by the plan, still remakeable for its children: an evicted buffer like any.
      if (!evicted_[b]) evicted(b);
      continue;
    }
    // Freed: nothing remakes it; if it was evicted, its cost leaves its class.
    remove_resident(b);
    if (node_[b] != kNoNode) {
      class_cost_[find(node_[b])] -= cost(b);
      node_[b] = kNoNode;
    }
    evicted_[b] = 0;
  }
}

std::vector<BufferId> DtrCore::outer_op_done() {
  // Buffers past their last use that were remade (for a child) are resident again with no
  // free to come: they go now.
  std::vector<BufferId> dead_and_resident;
  for (BufferId b : remade_locked_) {
    remade_lock_[b] = 0;
    if (dead_[b] && !evicted_[b] && slot_[b] >= 0) dead_and_resident.push_back(b);
  }
  remade_locked_.clear();
  std::sort(dead_and_resident.begin(), dead_and_resident.end());
  dead_and_resident.erase(std::unique(dead_and_resident.begin(), dead_and_resident.end()),
                          dead_and_resident.end());
  return dead_and_resident;
}

void DtrCore::evicted(BufferId b) {
  remove_resident(b);
  evicted_[b] = 1;
  if (heuristic_ != DtrHeuristic::full) return;
  const auto node = static_cast<std::uint32_t>(parent_.size());
  parent_.push_back(node);
  class_cost_.push_back(cost(b));
  class_size_.push_back(1);
  node_[b] = node;
  for (std::uint32_t i = nbr_begin_[b]; i < nbr_begin_[b + 1]; ++i) {
    const BufferId n = nbr_[i];
    if (node_[n] == kNoNode) continue;
    std::uint32_t x = find(node_[b]), y = find(node_[n]);
    if (x == y) continue;
    if (class_size_[x] < class_size_[y]) std::swap(x, y);
    parent_[y] = x;
    class_size_[x] += class_size_[y];
    class_cost_[x] += class_cost_[y];
  }
}

double DtrCore::neighbourhood_cost(BufferId b) {
  double e = 0;
  if (heuristic_ == DtrHeuristic::local) {
    for (std::uint32_t i = nbr_begin_[b]; i < nbr_begin_[b + 1]; ++i)
      if (evicted_[nbr_[i]]) e += cost(nbr_[i]);
    return e;
  }
  // Distinct classes around b: neighbours are few, so a linear scan of the roots seen.
  std::uint32_t seen[16];
  std::size_t n_seen = 0;
  for (std::uint32_t i = nbr_begin_[b]; i < nbr_begin_[b + 1]; ++i) {
    const BufferId n = nbr_[i];
    if (node_[n] == kNoNode) continue;
    const std::uint32_t root = find(node_[n]);
    bool dup = false;
    for (std::size_t k = 0; k < n_seen && !dup; ++k) dup = seen[k] == root;
    if (dup) continue;
    if (n_seen < 16) seen[n_seen++] = root;
    e += class_cost_[root];
  }
  return e;
}

double DtrCore::score(BufferId b, double now_s) {
  // A buffer touched this very instant has the smallest staleness, not none.
  const double staleness = std::max(now_s - last_access_[b], 1e-12);
  const double bytes = std::max<double>(1.0, static_cast<double>(trace_.buffers[b].bytes));
  switch (heuristic_) {
    case DtrHeuristic::full:
    case DtrHeuristic::local: return (cost(b) + neighbourhood_cost(b)) / (bytes * staleness);
    case DtrHeuristic::lru: return 1.0 / staleness;
    case DtrHeuristic::largest: return 1.0 / bytes;
  }
  return 0;
}

std::optional<BufferId> DtrCore::choose(double now_s,
                                        const std::function<bool(BufferId)>& resident) {
  // Smallest (score, then the stalest, then the lowest id): deterministic. A buffer remade
  // for an op that has not read it yet goes only when nothing else can: evicting it undoes
  // work under way (and two inputs could evict each other in turn), but holding every such
  // buffer through a deep remake (a chain of residual blocks) can take more than the budget.
  std::optional<BufferId> best;
  std::tuple<bool, double, double, BufferId> best_key{};
  for (BufferId b : resident_) {
    if (lock_[b] || !resident(b)) continue;
    const std::tuple<bool, double, double, BufferId> key{remade_lock_[b] != 0, score(b, now_s),
                                                         last_access_[b], b};
    if (!best || key < best_key) {
      best = b;
      best_key = key;
    }
  }
  return best;
}

std::uint64_t DtrCore::locked_bytes(const std::function<bool(BufferId)>& resident) const {
  std::uint64_t bytes = 0;
  for (const Buffer& b : trace_.buffers)
    if (lock_[b.id] && resident(b.id)) bytes += b.bytes;
  return bytes;
}

}  // namespace memsim
