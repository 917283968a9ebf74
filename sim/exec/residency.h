#pragma once
// What happens to memory around an op, written once.
//
// The residency machine holds the state of every buffer in a step — produced yet, being
// copied, to be freed when its copy lands, dropped (released before its last use, so a
// reader remakes it) — and the rules that move it: before an op runs, every buffer it reads
// is made resident in its device's compute tier (waiting for a copy under way, copying it
// back, or remaking it by re-running its producer and the in-place updates the reader saw,
// recursively); its outputs (on a re-run: only the dropped ones) and its workspace are
// allocated; after it, the workspace is released and its outputs are present. A plan's
// free, drop and recompute steps act through it too.
//
// Where the memory is and how time passes is the driver's: the engine drives the machine
// with simulated time, allocators and copy engines (sim/engine), and replay() drives it in
// zero time with a byte counter per device, so that planners see what the engine will do
// (sim/exec/replay.h). Nothing else implements these rules. No SimGrid here.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sim/core/condition.h"
#include "sim/core/error.h"
#include "sim/workload/analysis.h"
#include "sim/workload/trace.h"

namespace memsim::exec {

/// Where an op runs: its compute device (as Op::device names it), its stream, and the tier
/// its operands must be in. A re-run to remake a buffer runs where its reader runs.
struct Site {
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::size_t tier = 0;
};

/// Where an op's workspace went (the driver's to fill in).
struct Workspace {
  std::size_t tier = 0;
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

/// The driver: where buffers are, how space is taken and given back, and time. A driver
/// derives from it and is final (the machine is a template over it).
class Memory {
 public:
  virtual ~Memory() = default;
  /// The run ended (an OOM, an error): the machine stops at once.
  virtual bool stopped() const { return false; }
  /// Whether `b` is readable in `tier`; whether it is in any tier.
  virtual bool resident(BufferId b, std::size_t tier) const = 0;
  virtual bool placed(BufferId b) const = 0;
  /// Blocks until `done` holds (or the run stopped): a copy lands, another stream finishes
  /// an op. Only called while a buffer is being produced elsewhere or copied.
  /// `on`: the device whose ops can make it hold (kAnyDevice: any).
  virtual void wait_until(Condition done, std::uint32_t on = kAnyDevice) {
    (void)done;
    (void)on;
  }
  /// The clock, for the stall of a read that waits for memory.
  virtual double clock() const { return 0; }
  /// Starts bringing `b` (placed elsewhere) into `tier`: its reader waits for all of it.
  virtual void copy_in(BufferId b, std::size_t tier) = 0;
  /// A read waited for memory from `since_s` (a copy in flight, a copy on demand).
  virtual void stalled(double since_s, const Op& reader, BufferId b, std::size_t tier) {
    (void)since_s, (void)reader, (void)b, (void)tier;
  }
  /// Space for output `b` of `op` in site.tier, or false: the run stopped.
  virtual bool allocate(BufferId b, const Site& site, const Op& op) = 0;
  /// Space for op's workspace (op.workspace_bytes > 0), or false: the run stopped. `at`
  /// says where it went, for release_workspace.
  virtual bool allocate_workspace(const Op& op, const Site& site, Workspace& at) = 0;
  virtual void release_workspace(const Op& op, const Workspace& at) = 0;
  /// The op's time; `recompute`: it runs again to remake dropped buffers.
  virtual void execute(const Op& op, const Site& site, bool recompute) = 0;
  /// Gives back b's space where it is (never called while b is being copied).
  virtual void release(BufferId b) = 0;
  /// Around each run of an op: before its reads are checked, and after its outputs are
  /// present (not reached when the run stops). enter() returns what leave() is given back:
  /// the op that was in progress, for a re-run nested in it.
  virtual OpId enter(const Op& op, bool recompute) { (void)recompute; return op.id; }
  virtual void leave(const Op& op, bool recompute, OpId previous) {
    (void)op, (void)recompute, (void)previous;
  }
};

template <class M>
class Residency {
 public:
  /// `who` names the policy in the messages of a plan that breaks the rules.
  Residency(const Trace& trace, M& memory, std::string who);

  /// With several streams, a read also waits for the in-place updates issued before it on
  /// other streams.
  void set_several_streams(bool several) { several_ = several; }
  /// Every buffer an op reads (once resident) is appended here from now on (null: none).
  void record_reads(std::vector<BufferId>* reads) { reads_ = reads; }

  /// Buffers resident when the step starts are present from the start.
  void present_at_start(BufferId b) { ready_[b] = 1; }

  /// Runs `op` at `site` under the rules above. False when the run stopped.
  bool run(const Op& op, const Site& site, bool recompute = false);
  /// A plan's recompute step: whether any output of `op` is dropped (else it is skipped).
  bool needs_recompute(const Op& op) const;
  /// A plan's free step: b is dead; released now, or when its copy lands.
  void free(BufferId b);
  /// A plan's or a policy's drop: released now (or on landing); a later reader remakes it.
  /// Throws PolicyError for a buffer no op makes.
  void drop(BufferId b);
  /// Releases b now, or when the copy under way lands.
  void release(BufferId b);

  /// A copy of b starts; it lands (b is then released if it was freed meanwhile).
  void copy_started(BufferId b) { in_flight_[b] = 1; }
  void copy_landed(BufferId b);

  bool ready(BufferId b) const { return ready_[b] != 0; }
  bool in_flight(BufferId b) const { return in_flight_[b] != 0; }
  bool dropped(BufferId b) const { return dropped_[b] != 0; }
  /// The ops that update b in place, in issue order.
  std::span<const OpId> updaters(BufferId b) const { return updaters_[b]; }

 private:
  bool make_resident(BufferId b, const Site& site, const Op& op);
  void remake(BufferId b, const Op& reader, const Site& site);
  bool update_pending(BufferId b, const Op& op) const;
  std::uint32_t updaters_device(BufferId b, const Op& op) const;
  std::uint32_t op_device(OpId op) const { return trace_.ops[op].device; }

  const Trace& trace_;
  M& memory_;
  std::string who_;
  bool several_ = false;
  std::vector<BufferId>* reads_ = nullptr;
  std::vector<std::uint8_t> ready_;             // produced, or resident at the start
  std::vector<std::uint8_t> in_flight_;         // a copy of it is under way
  std::vector<std::uint8_t> free_on_arrival_;   // freed while in flight
  std::vector<std::uint8_t> dropped_;           // released before its last use
  std::vector<std::uint8_t> op_done_;           // ran (not counting re-runs)
  Updaters updaters_;
  mutable std::vector<std::uint32_t> done_updates_;  // per buffer: its first updates, all done
};


/// Per buffer resident at the start: the compute device (slot) whose memory holds it then,
/// the device of its first reader, else its own. Other buffers: kNoSlot.
inline constexpr std::uint32_t kNoSlot = 0xffffffffu;
std::vector<std::uint32_t> start_slots(const Trace& trace);

// ---------------------------------------------------------------------------------------
// The rules. A template over the driver so that, the driver's class being final, the calls
// into it are direct (the machine runs around every op of the engine's fast path).

template <class M>
Residency<M>::Residency(const Trace& trace, M& memory, std::string who)
    : trace_(trace),
      memory_(memory),
      who_(std::move(who)),
      ready_(trace.buffers.size(), 0),
      in_flight_(trace.buffers.size(), 0),
      free_on_arrival_(trace.buffers.size(), 0),
      dropped_(trace.buffers.size(), 0),
      op_done_(trace.ops.size(), 0),
      updaters_(memsim::updaters(trace)),
      done_updates_(trace.buffers.size(), 0) {}

// An op reads what the in-place updates issued before it wrote: with several streams, one
// may still be under way elsewhere (a gradient accumulated on the GPU, read by a step on the
// host). Updaters are in issue order and few per buffer.
template <class M>
bool Residency<M>::update_pending(BufferId b, const Op& op) const {
  // The first update of b not yet done: those before it are done for good, so the search
  // starts where the last one stopped (a gradient accumulated over 192 micro-batches has 192
  // updates, and a stream waiting for them is asked after every op).
  const std::span<const OpId> us = updaters_[b];
  std::uint32_t& from = done_updates_[b];
  while (from < us.size() && op_done_[us[from]]) ++from;
  return from < us.size() && us[from] < op.id;
}

// The device of the updates of b still pending before `op` (kAnyDevice: several).
template <class M>
std::uint32_t Residency<M>::updaters_device(BufferId b, const Op& op) const {
  const std::span<const OpId> us = updaters_[b];
  std::uint32_t device = kAnyDevice;
  for (std::uint32_t i = done_updates_[b]; i < us.size() && us[i] < op.id; ++i) {
    const std::uint32_t d = op_device(us[i]);
    if (device != kAnyDevice && d != device) return kAnyDevice;
    device = d;
  }
  return device;
}

template <class M>
bool Residency<M>::make_resident(BufferId b, const Site& site, const Op& op) {
  if (ready_[b] && !in_flight_[b] && memory_.resident(b, site.tier) &&
      !(several_ && update_pending(b, op)))
    return true;  // the usual case
  double t0 = memory_.clock();
  bool memory_wait = false;
  while (!memory_.stopped()) {
    if (several_ && update_pending(b, op)) {
      memory_.wait_until([&] { return !update_pending(b, op); }, updaters_device(b, op));
      t0 = memory_.clock();  // waiting for another stream's work is a dependency, not a stall
    } else if (!ready_[b] || in_flight_[b]) {
      const bool produced = ready_[b] != 0;
      memory_wait |= in_flight_[b] != 0;
      // Made by its producer's stream (a copy's landing: any device).
      const OpId producer = trace_.buffers[b].producer;
      memory_.wait_until([&] { return ready_[b] && !in_flight_[b]; },
                         ready_[b] || producer == kNoOp ? kAnyDevice : op_device(producer));
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

template <class M>
bool Residency<M>::run(const Op& op, const Site& site, bool recompute) {
  const OpId previous = memory_.enter(op, recompute);
  // Ops on other streams it waits for, as a CUDA event makes it wait (never on a re-run).
  if (!recompute)
    for (OpId w : op.waits_for)
      while (!op_done_[w]) {
        if (memory_.stopped()) return false;
        memory_.wait_until([&] { return op_done_[w] != 0; }, op_device(w));
      }
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


template <class M>
void Residency<M>::remake(BufferId b, const Op& reader, const Site& site) {
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
    // The producer, then the in-place updates the reader saw (an in-place ReLU after a BN).
    std::vector<OpId> ops{trace_.buffers[cur].producer};
    for (OpId u : updaters_[cur])
      if (u < before) ops.push_back(u);
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

template <class M>
bool Residency<M>::needs_recompute(const Op& op) const {
  for (BufferId b : op.outputs)
    if (dropped_[b]) return true;
  return false;
}

template <class M>
void Residency<M>::release(BufferId b) {
  if (in_flight_[b])
    free_on_arrival_[b] = 1;
  else
    memory_.release(b);
}

template <class M>
void Residency<M>::free(BufferId b) {
  dropped_[b] = 0;  // dead now: a later re-run of its producer must not remake it
  release(b);
}

template <class M>
void Residency<M>::drop(BufferId b) {
  if (trace_.buffers[b].producer == kNoOp)
    throw PolicyError(fmt::format("policy {} drops '{}', which has no producer to recompute it from",
                                  who_, trace_.buffers[b].name));
  dropped_[b] = 1;
  release(b);
}

template <class M>
void Residency<M>::copy_landed(BufferId b) {
  in_flight_[b] = 0;
  if (free_on_arrival_[b]) {
    free_on_arrival_[b] = 0;
    memory_.release(b);
  }
}

}  // namespace memsim::exec
