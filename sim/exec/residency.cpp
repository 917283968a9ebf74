#include "sim/exec/residency.h"

#include <optional>
#include <utility>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/workload/analysis.h"

namespace memsim::exec {

Residency::Residency(const Trace& trace, Memory& memory, std::string who)
    : trace_(trace),
      memory_(memory),
      who_(std::move(who)),
      ready_(trace.buffers.size(), 0),
      in_flight_(trace.buffers.size(), 0),
      free_on_arrival_(trace.buffers.size(), 0),
      dropped_(trace.buffers.size(), 0),
      op_done_(trace.ops.size(), 0),
      updaters_(memsim::updaters(trace)) {}

// An op reads what the in-place updates issued before it wrote: with several streams, one
// may still be under way elsewhere (a gradient accumulated on the GPU, read by a step on the
// host). Updaters are in issue order and few per buffer.
bool Residency::update_pending(BufferId b, const Op& op) const {
  for (OpId u : updaters_[b]) {
    if (u >= op.id) break;
    if (!op_done_[u]) return true;
  }
  return false;
}

bool Residency::make_resident(BufferId b, const Site& site, const Op& op) {
  if (ready_[b] && !in_flight_[b] && memory_.resident(b, site.tier) &&
      !(several_ && update_pending(b, op)))
    return true;  // the usual case
  double t0 = memory_.clock();
  bool memory_wait = false;
  while (!memory_.stopped()) {
    if (several_ && update_pending(b, op)) {
      memory_.wait_for_change();
      t0 = memory_.clock();  // waiting for another stream's work is a dependency, not a stall
    } else if (!ready_[b] || in_flight_[b]) {
      const bool produced = ready_[b] != 0;
      memory_wait |= in_flight_[b] != 0;
      memory_.wait_for_change();
      if (!produced) t0 = memory_.clock();
    } else if (!memory_.resident(b, site.tier)) {
      if (!memory_.placed(b)) {
        if (!dropped_[b])
          throw PolicyError(fmt::format("policy {}: op '{}' reads buffer '{}', which was freed "
                                        "before its last use",
                                        who_, op.name, trace_.buffers[b].name));
        remake(b, op, site);  // recompute time, not stall
        continue;
      }
      memory_.copy_in(b, site.tier);  // the reader stalls for the whole copy
      memory_wait = true;
    } else {
      break;
    }
  }
  if (memory_wait && memory_.clock() > t0) memory_.stalled(t0, op, b, site.tier);
  return !memory_.stopped();
}

bool Residency::run(const Op& op, const Site& site, bool recompute) {
  const OpId previous = memory_.enter(op, recompute);
  for (BufferId b : op.reads()) {
    if (!make_resident(b, site, op)) return false;
    if (reads_) reads_->push_back(b);
  }
  for (BufferId b : op.outputs) {
    // A re-run remakes only what was dropped; the op's other outputs are alive or dead.
    if (recompute && !dropped_[b]) continue;
    if (!memory_.allocate(b, site, op)) return false;
  }
  Workspace workspace;
  if (op.workspace_bytes > 0 && !memory_.allocate_workspace(op, site, workspace)) return false;
  memory_.execute(op, site, recompute);
  if (!recompute) op_done_[op.id] = 1;
  if (op.workspace_bytes > 0) memory_.release_workspace(op, workspace);
  for (BufferId b : op.outputs) {
    ready_[b] = 1;
    dropped_[b] = 0;
  }
  memory_.leave(op, recompute, previous);
  return !memory_.stopped();
}

std::vector<OpId> remake_ops(const Trace& trace, const Residency& r, BufferId b, OpId reader) {
  // The producer, then the in-place updates the reader saw (an in-place ReLU after a BN).
  std::vector<OpId> ops{trace.buffers[b].producer};
  for (OpId u : r.updaters(b))
    if (u < reader) ops.push_back(u);
  return ops;
}

void Residency::remake(BufferId b, const Op& reader, const Site& site) {
  // Iterative: walk down to a dropped buffer whose remaking needs nothing dropped, remake
  // it, and come back up. Depth is bounded by memory, not by the caller's stack.
  std::vector<std::pair<BufferId, OpId>> path{{b, reader.id}};
  while (!path.empty() && !memory_.stopped()) {
    const auto [cur, before] = path.back();
    if (!dropped_[cur]) {
      path.pop_back();
      continue;
    }
    if (trace_.buffers[cur].producer == kNoOp)
      throw PolicyError(fmt::format("policy {} dropped '{}', which has no producer to recompute "
                                    "it from",
                                    who_, trace_.buffers[cur].name));
    const auto ops = remake_ops(trace_, *this, cur, before);
    std::optional<std::pair<BufferId, OpId>> missing;
    for (OpId p : ops) {
      for (BufferId in : trace_.ops[p].reads())
        if (in != cur && dropped_[in] && !missing) missing = {{in, p}};
      if (missing) break;
    }
    if (missing) {
      path.push_back(*missing);
      continue;
    }
    for (OpId p : ops)
      if (!run(trace_.ops[p], site, true)) return;
    path.pop_back();
  }
}

bool Residency::needs_recompute(const Op& op) const {
  for (BufferId b : op.outputs)
    if (dropped_[b]) return true;
  return false;
}

void Residency::release(BufferId b) {
  if (in_flight_[b])
    free_on_arrival_[b] = 1;
  else
    memory_.release(b);
}

void Residency::free(BufferId b) {
  dropped_[b] = 0;  // dead now: a later re-run of its producer must not remake it
  release(b);
}

void Residency::drop(BufferId b) {
  if (trace_.buffers[b].producer == kNoOp)
    throw PolicyError(fmt::format("policy {} drops '{}', which has no producer to recompute it from",
                                  who_, trace_.buffers[b].name));
  dropped_[b] = 1;
  release(b);
}

void Residency::copy_landed(BufferId b) {
  in_flight_[b] = 0;
  if (free_on_arrival_[b]) {
    free_on_arrival_[b] = 0;
    memory_.release(b);
  }
}

std::vector<std::uint32_t> start_slots(const Trace& trace) {
  std::vector<std::uint32_t> slot(trace.buffers.size(), kNoSlot);
  for (const Op& op : trace.ops)
    for (BufferId b : op.reads())
      if (slot[b] == kNoSlot) slot[b] = op.device;
  for (const Buffer& b : trace.buffers)
    if (b.producer != kNoOp)
      slot[b.id] = kNoSlot;
    else if (slot[b.id] == kNoSlot)
      slot[b.id] = b.device;
  return slot;
}

}  // namespace memsim::exec
