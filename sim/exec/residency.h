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
#include <string>
#include <vector>

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

/// The driver: where buffers are, how space is taken and given back, and time.
class Memory {
 public:
  virtual ~Memory() = default;
  /// The run ended (an OOM, an error): the machine stops at once.
  virtual bool stopped() const { return false; }
  /// Whether `b` is readable in `tier`; whether it is in any tier.
  virtual bool resident(BufferId b, std::size_t tier) const = 0;
  virtual bool placed(BufferId b) const = 0;
  /// Blocks until something changes: a copy lands, another stream finishes an op. Only
  /// called while a buffer is being produced elsewhere or copied.
  virtual void wait_for_change() {}
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

class Residency {
 public:
  /// `who` names the policy in the messages of a plan that breaks the rules.
  Residency(const Trace& trace, Memory& memory, std::string who);

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
  const std::vector<OpId>& updaters(BufferId b) const { return updaters_[b]; }

 private:
  bool make_resident(BufferId b, const Site& site, const Op& op);
  void remake(BufferId b, const Op& reader, const Site& site);
  bool update_pending(BufferId b, const Op& op) const;

  const Trace& trace_;
  Memory& memory_;
  std::string who_;
  bool several_ = false;
  std::vector<BufferId>* reads_ = nullptr;
  std::vector<std::uint8_t> ready_;             // produced, or resident at the start
  std::vector<std::uint8_t> in_flight_;         // a copy of it is under way
  std::vector<std::uint8_t> free_on_arrival_;   // freed while in flight
  std::vector<std::uint8_t> dropped_;           // released before its last use
  std::vector<std::uint8_t> op_done_;           // ran (not counting re-runs)
  std::vector<std::vector<OpId>> updaters_;
};

/// The ops to run again, in order, to remake dropped buffer `b` for `reader`: its producer,
/// then the in-place updates of `b` issued before the reader.
std::vector<OpId> remake_ops(const Trace& trace, const Residency& r, BufferId b, OpId reader);

/// Per buffer resident at the start: the compute device (slot) whose memory holds it then,
/// the device of its first reader, else its own. Other buffers: kNoSlot.
inline constexpr std::uint32_t kNoSlot = 0xffffffffu;
std::vector<std::uint32_t> start_slots(const Trace& trace);

}  // namespace memsim::exec
