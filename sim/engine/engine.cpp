#include "sim/engine/engine.h"

#include <algorithm>
#include <cassert>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <span>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <simgrid/s4u.hpp>
#include <simgrid/simix.hpp>
#include <xbt/log.h>

#include "sim/core/error.h"
#include "sim/core/function_ref.h"
#include "sim/core/heap.h"
#include "sim/core/units.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/collective_runner.h"
#include "sim/engine/sg_platform.h"
#include "sim/engine/tally.h"
#include "sim/exec/residency.h"

namespace sg4 = simgrid::s4u;

namespace memsim {
namespace {

constexpr std::size_t kOomLiveBuffers = 10;

// Who asks for memory, for the wait it may stall and the OOM report: an op (its outputs and
// workspace); the engine on behalf of the op in progress (a copy, an eviction); or the
// start of the step (the buffers resident then).
struct OomSite {
  enum class Kind : std::uint8_t { op, copy, eviction, start } kind = Kind::op;
  OpId op = 0;                           // the op, or the op in progress
  std::uint32_t device = 0, stream = 0;  // whose time a wait is
  BufferId buffer = 0;                   // a copy's or an eviction's buffer
  std::size_t to = 0;                    // and where it goes

  /// The op as the stream running it waits: a collective's stream is its device's
  /// communication stream, not the op's own.
  static OomSite of(const Op& op, const exec::Site& site) { return {Kind::op, op.id, site.device, site.stream, 0, 0}; }
  /// What the OOM report calls it: the op's name, or what the engine was doing.
  std::string describe(const Trace& trace, const PlatformSpec& platform) const {
    switch (kind) {
      case Kind::op: return trace.ops[op].name;
      case Kind::copy:
        return fmt::format("(copy of {} to {})", trace.buffers[buffer].name, platform.tiers[to].name);
      case Kind::eviction:
        return fmt::format("(evicting {} to {})", trace.buffers[buffer].name, platform.tiers[to].name);
      case Kind::start: return "(start of iteration: resident buffers)";
    }
    return {};
  }
};

// The planners' caps leave the reserved bytes out (run.cpp); the allocators hold them too.
std::vector<std::uint64_t> with_reserved(std::vector<std::uint64_t> caps,
                                         const std::vector<std::uint64_t>& reserved,
                                         const PlatformSpec& platform) {
  for (std::size_t t = 0; t < caps.size(); ++t)
    caps[t] = std::min(platform.tiers[t].capacity_bytes, caps[t] + reserved[t]);
  return caps;
}

// The engine drives the residency machine (sim/exec/residency.h) with simulated time: it is
// the machine's Memory, with allocators, copy engines and SimGrid's clock.
class Simulation final : public RuntimeView, private exec::Memory, private CollectiveRunner::Driver {
 public:
  Simulation(const PlanningContext& ctx, const PlanResult& planned, Recorder& recorder, bool exact)
      : exact_(exact),
        platform_(ctx.platform),
        trace_(ctx.trace),
        planned_(planned),
        runtime_(planned.hooks ? *planned.hooks : no_hooks_),
        recorder_(recorder),
        liveness_(ctx.liveness),
        reserved_(reserved_per_tier(ctx.platform, ctx.trace)),
        memory_(ctx.platform, ctx.trace, with_reserved(ctx.tier_caps, reserved_, ctx.platform)),
        durations_(ctx.durations),
        compute_devices_(ctx.platform.op_devices()),
        accelerators_(ctx.platform.compute_devices().size()),
        op_hooks_(runtime_.has_op_hooks()),
        plan_(planned.plan),
        residency_(ctx.trace, *this, planned.label),
        leaving_(ctx.platform.tiers.size(), 0),
        arriving_(ctx.platform.tiers.size(), 0),
        short_(ctx.platform.tiers.size(), 0) {
    memory_.set_listener(&recorder_);
    recorder_.reserve(ctx.trace.ops.size() + 16, 2 * ctx.trace.ops.size() + ctx.trace.buffers.size());
  }

  Summary run();

  // RuntimeView
  // Never earlier than a time already handed out: executing deferred time as one SimGrid
  // activity can land a rounding error short of the sum it stands for.
  double now_s() const override {
    Lane& l = lane();
    l.latest_s = std::max(l.latest_s, sg4::Engine::get_clock() + l.deferred_s);
    return l.latest_s;
  }
  const Trace& trace() const override { return trace_; }
  const Liveness& liveness() const override { return liveness_; }
  const PlatformSpec& platform() const override { return platform_; }
  const MemoryState& memory() const override { return memory_; }
  OpId current_op() const override { return current_slot(); }
  bool in_flight(BufferId b) const override { return residency_.in_flight(b); }
  bool dropped(BufferId b) const override { return residency_.dropped(b); }
  bool in_use(BufferId b) const override { return pins_[b] > 0; }

 private:
  struct Stream {
    std::uint32_t device;  // index into compute_devices_
    std::uint32_t stream;
    std::vector<Step> own;  // its steps, when the plan's are split over several streams
    std::span<const Step> steps;  // what it runs: the plan's steps (a plan of one stream), or own
  };

  void split_plan();
  void place_initial_buffers();
  void run_stream(const Stream& s);
  void evict(BufferId b, std::size_t to);
  void pin(const Op& op, int by);  // counts op's buffers in (1) or out (-1) of use
  void apply(const Action& a);
  void run_hook(void (RuntimeHooks::*hook)(const RuntimeView&, OpId, std::vector<Action>&), OpId op);
  void run_steps(const Stream& s);
  void run_op(const Op& op, std::uint32_t device_slot, std::uint32_t stream,
              bool recompute = false);
  /// The routes the run can take, per source tier; `runs` marks the devices that run ops or hold buffers.
  std::vector<std::vector<std::size_t>> wanted_routes(std::vector<bool>& runs) const;
  void count_route(std::size_t from, std::size_t to, std::uint64_t bytes) override;
  void sleep_until(double end_s) override {
    flush();
    Lane& l = lane();
    l.until = end_s;  // the others may defer up to it: this stream acts next then
    sg4::this_actor::sleep_until(end_s);
    l.until = kActing;
  }
  /// Whether a copy can run: a plan's or a policy's, or an op reading a buffer that lives on
  /// another device (CollectiveRunner::plan_replay).
  bool copies_possible() const;
  /// The stream op runs on: a collective's is its device's communication stream.
  std::uint32_t op_stream(const Op& op) const { return collectives_->runs(op.id) ? collectives_->stream(op) : op.stream; }

  // exec::Memory: the machine's driver.
  friend class exec::Residency<Simulation>;
  bool stopped() const override { return stopped_; }
  bool resident(BufferId b, std::size_t tier) const override { return memory_.resident(b, tier); }
  bool placed(BufferId b) const override {
    return memory_.placement(b).tier != Placement::kNowhere;
  }
  double clock() const override { return now_s(); }
  void copy_in(BufferId b, std::size_t tier) override { start_copy(b, tier, CopyCause::demand); }
  void stalled(double since_s, const Op& reader, BufferId b, std::size_t tier) override {
    record_stall(since_s, here(OomSite::Kind::op, reader.id), b, trace_.buffers[b].bytes, tier);
  }
  bool allocate(BufferId b, const exec::Site& site, const Op& op) override {
    // The clock is read inside: allocate() may wait for memory and retry later.
    return allocate(site.tier, trace_.buffers[b].bytes, OomSite::of(op, site),
                    [&] { return memory_.allocate(b, site.tier, now_s()); });
  }
  bool allocate_workspace(const Op& op, const exec::Site& site, exec::Workspace& at) override;
  void release_workspace(const Op& op, const exec::Workspace& at) override;
  void execute(const Op& op, const exec::Site& site, bool recompute) override;
  void release(BufferId b) override { memory_.release(b, now_s()); }
  OpId enter(const Op& op, bool recompute) override;
  void leave(const Op& op, bool recompute, OpId previous) override;
  /// Why a copy starts: a plan step or an eviction; a policy's prefetch, given up (no OOM)
  /// when the policy finds no room for it; a reader that needs it now, which records the
  /// whole wait as its stall (so making room is not counted a second time).
  enum class CopyCause : std::uint8_t { policy, prefetch, demand };
  bool allocate(std::size_t tier, std::uint64_t bytes, const OomSite& site,
                FunctionRef<bool()> attempt, CopyCause cause = CopyCause::policy);
  void start_copy(BufferId b, std::size_t to, CopyCause cause = CopyCause::policy);
  void wait_until(Condition done, std::uint32_t on = kAnyDevice) override;
  void notify() override;
  void report_oom(std::size_t tier, std::uint64_t bytes, const OomSite& site);
  std::uint32_t copy_owner(std::size_t from, std::size_t to, int& direction) const;
  void guarded(const std::function<void()>& body);
  /// Every event goes to the recorder and to the tally (the summary's time accounting).
  void emit(const Event& e) {
    if (++events_ > kMostEvents)
      throw InputError(fmt::format("{}: op '{}': the run passed {} events, the engine's horizon; a step "
                                   "that long is not one training iteration",
                                   op_where(trace_, current_slot()), op_name(current_slot()), kMostEvents));
    past_horizon(e.end_s, e.op != kNoOp ? e.op : current_slot());
    recorder_.record(e);
    tally_->on_event(e);
  }
  // The engine's horizon: an iteration that ends past it, or makes more events, comes from
  // inputs beyond what any machine does (docs/platforms.md), and is an error naming the op.
  static constexpr double kHorizonS = 1e7;  // about 116 days of simulated time
  static constexpr std::size_t kMostEvents = 50'000'000;  // a few GB of recorded events
  std::string op_name(OpId op) const { return op < trace_.ops.size() ? trace_.ops[op].name : "?"; }
  void past_horizon(double end_s, OpId op) const override {
    if (end_s <= kHorizonS) return;
    throw InputError(fmt::format("{}: op '{}' would end at {} of simulated time, past the engine's horizon of "
                                 "{} (about 116 days): check the op's work and the platform's rates",
                                 op_where(trace_, op), op_name(op), format_seconds(end_s),
                                 format_seconds(kHorizonS)));
  }
  void record_stall(double t0, const OomSite& site, BufferId b, std::uint64_t bytes, std::size_t tier);
  bool can_defer(double end_s) const;
  void flush() override;

  const bool exact_;  // no deferral: every op its own SimGrid activity, every collective its flows
  bool copies_foreseen_ = true;  // a copy may run (no collective's flows replayed)
  // Per device: at most one of its streams ever computes, so no two executions share its
  // SimGrid host and flush() may sleep a stream's time rather than execute it.
  std::vector<char> sleeps_;
  void choose_sleeps();
  // No copy can run and the run is not --exact: a waiting stream's test can only come to hold
  // by the ops of the device it names (Lane::waits_on), so a change on one device runs the
  // tests of its own streams and of those that wait on any (see tested()).
  bool tests_by_device_ = false;
  const PlatformSpec& platform_;
  const Trace& trace_;
  const PlanResult& planned_;
  RuntimeHooks no_hooks_;  // for a static policy
  RuntimeHooks& runtime_;
  Recorder& recorder_;
  const Liveness& liveness_;
  std::vector<std::uint64_t> reserved_;  // per tier: bytes outside the allocator (CUDA, NCCL)
  MemoryState memory_;
  const std::vector<double>& durations_;
  std::vector<std::size_t> compute_devices_;  // the devices ops name (op_devices): hosts last
  std::size_t accelerators_ = 0;              // how many of them are compute devices
  bool op_hooks_ = false;
  const Plan& plan_;
  exec::Residency<Simulation> residency_;
  std::vector<Stream> streams_;
  std::size_t streams_done_ = 0;
  std::vector<OpId> stream_at_;  // per stream: the op it runs or last ran

  // The host that issues each device's work (DeviceSpec::host): per op, the host time
  // issued so far on its device, up to and including it (op-id order is program order);
  // per device, the time the host last caught up with the device and the sum at that op.
  // Op i is issued at host_at_ + (issued_s_[i] - host_sum_at_): the host runs ahead of the
  // device freely, except after an op it waits for.
  std::vector<double> issued_s_;
  std::vector<double> host_at_, host_sum_at_;
  // Per device: the latest op (in program order) the host has issued. A re-run to remake a
  // dropped buffer is issued by the host too (Megatron's checkpointed layer runs its forward
  // again from Python), right after it: its host time moves every later op's issue time.
  std::vector<OpId> host_cursor_;
  bool host_clock_ = false;
  // The host's synchronizing calls: a run of consecutive ops of `sync_after` kinds in a
  // device's program order is one call (Megatron's batch_isend_irecv of a step's sends and
  // receives, then torch.cuda.synchronize()). Per op, the call before it in program order
  // whose ops must all have ended before the host issues it (kNoCall: none); per call, its
  // ops, in sync_ops_[sync_from_[c], sync_from_[c + 1]).
  static constexpr std::uint32_t kNoCall = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> sync_gate_;
  std::vector<std::uint32_t> sync_from_;
  std::vector<OpId> sync_ops_;
  std::vector<std::uint32_t> call_of_;  // per op: the call it belongs to (kNoCall: none)
  std::vector<std::uint8_t> ended_;  // per op: ended (its first run)
  std::vector<std::uint8_t> issued_;  // per op: its host has issued it (its first run)
  bool call_ended(std::uint32_t call) const;
  bool call_issued(std::uint32_t call) const;
  void wait_for_call(std::uint32_t call, std::uint32_t device);
  void wait_for_host(const Op& op);
  void wait_for_host_recompute(const Op& op);
  void host_sleep_until(double issued, OpId op);
  void setup_host_clock();
  void host_after(const Op& op);

  SgPlatform sg_;  // hosts, routes and copy engines in SimGrid
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr changed_;
  int waiters_ = 0;
  int outside_waiters_ = 0;  // of them, actors outside the streams
  std::uint64_t waits_begun_ = 0;

  // Each stream's actor: the op it runs or last ran, and whose time its waits are (its actor's
  // data points at its lane). Streams run at once: one current op shared by all of them made a
  // demand copy on one stream name another stream's op, and a runtime policy then evict the
  // very buffer the copy was for (capuchin on Mixtral with expert parallelism went round
  // swapping one gradient out and in for ever); a copy's stall was charged to stream 0.
  //
  // A lane also says when its stream acts next, for the others' deferral (can_defer): its
  // time executing or sleeping ends (`until`), or what it waits for (`waiting`, its test),
  // or kActing: it yielded to SimGrid elsewhere (a collective's flows, a lock), at a time
  // not known here. Deferred time (`deferred_s`) is the stream's own; so is its clock.
  static constexpr double kActing = -std::numeric_limits<double>::infinity();
  // Past this many streams (a per-rank run of many ranks), the test over all of them per op
  // would cost more than the activities it saves: no deferral. GPT-3 175B's 16 stages on
  // 1,024 A100s have 110 streams: with 64 here they summed nothing (a run 3.5-4.0 -> 3.0-3.6 s
  // of user time at 256); a per-rank Llama 7B pipeline of 32 GPUs (160 streams), which sums
  // little, took as long either way.
  static constexpr std::size_t kMostDeferringLanes = 256;
  struct Lane {
    OpId op = 0;
    std::uint32_t device = 0, stream = 0;
    double deferred_s = 0;
    double latest_s = 0;  // the latest time now_s() returned to this stream
    double until = kActing;
    const Condition* waiting = nullptr;
    std::uint32_t waits_on = kAnyDevice;  // the device whose ops can make `waiting` hold
    std::uint32_t listed = kNotListed;    // its place in waiting_on_ while it waits
    bool done = false;
    sg4::Actor* actor = nullptr;  // its stream's: suspended while it waits, resumed by notify()
    std::uint64_t waits_from = 0;     // when it began to wait, in waits begun
  };
  std::vector<Lane> lanes_;
  // The waiting streams by the device their test names (the last list: any), for notify() to
  // run only the tests a change can make hold (with tests_by_device_).
  static constexpr std::uint32_t kNotListed = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::vector<Lane*>> waiting_on_;
  std::vector<Lane*>& waiting_list(std::uint32_t device) {
    return waiting_on_[std::min<std::size_t>(device, waiting_on_.size() - 1)];
  }
  void list_waiting(Lane& l) {
    std::vector<Lane*>& list = waiting_list(l.waits_on);
    l.listed = static_cast<std::uint32_t>(list.size());
    list.push_back(&l);
  }
  void unlist_waiting(Lane& l) {
    if (l.listed == kNotListed) return;
    std::vector<Lane*>& list = waiting_list(l.waits_on);
    list[l.listed] = list.back();
    list[l.listed]->listed = l.listed;
    list.pop_back();
    l.listed = kNotListed;
  }
  std::vector<std::int32_t> pins_;  // per buffer: ops begun and not finished that touch it
  mutable Lane outside_;  // outside the streams' actors (copies, SimGrid's maestro)
  Lane& lane() const {
    if (const sg4::Actor* self = sg4::Actor::self())
      if (Lane* l = self->get_data<Lane>()) return *l;
    return outside_;
  }
  OpId& current_slot() const { return lane().op; }
  /// Whether a change made by `by` (the calling stream's lane) can make l's test hold.
  bool tested(const Lane& l, const Lane& by) const {
    return !tests_by_device_ || stopped_ || l.waits_on == kAnyDevice || l.waits_on == by.device || &by == &outside_;
  }
  /// Debug builds (`make sanitize`) check what tested() relies on: the test of a stream it
  /// leaves out does not hold (its own device's change would have woken it).
  void check_untested(const Lane& by) const {
#ifndef NDEBUG
    for (const Lane& l : lanes_)
      assert((!l.waiting || tested(l, by) || !(*l.waiting)()) && "a test left out by tested() holds");
#else
    (void)by;
#endif
  }
  /// A wait of the calling stream's actor, for `op`.
  OomSite here(OomSite::Kind kind, OpId op, BufferId b = 0, std::size_t to = 0) const {
    const Lane& l = lane();
    return {kind, op, l.device, l.stream, b, to};
  }
  // Fast path: while no other stream can act before an op of this stream ends, nothing can
  // observe the clock between its ops, so their durations are summed and executed as one
  // SimGrid activity when something could (another stream's next act, a copy, a wait, the
  // end). now_s() includes the deferred time, so every event and memory change carries its
  // exact simulated time, and everything still happens in the order of simulated time.
  int copies_in_flight_ = 0;
  std::size_t max_actors_ = 0;  // streams and copies at once (actor_limit())
  std::vector<int> leaving_;   // per tier: copies out of it under way
  std::vector<int> arriving_;  // per tier: copies into it under way
  // Per tier: allocations that failed and wait for room (an op's outputs, a demand copy, a
  // plan's copy). A runtime prefetch into such a tier is not started: it would take the room
  // the eviction made for them, and the failed allocation would evict again (a swap-lru or
  // capuchin fallback evicting a gradient that another stream prefetches back at once went
  // round for 20 s of simulated time on Mixtral with expert parallelism).
  std::vector<int> short_;
  bool stopped_ = false;
  std::exception_ptr error_;
  std::size_t events_ = 0;
  std::optional<Tally> tally_;
  // Lists for the runtime hooks' actions, reused: applying an action can block its stream's
  // actor (a copy waits for room) while another stream runs a hook, so each hook call takes a
  // list of its own (by index) and gives it back when its actions are applied. The lists live
  // here, not on the actors' stacks: a PolicyError thrown while applying one then leaves no
  // scoped object on a SimGrid stack, which AddressSanitizer cannot unpoison as it unwinds.
  std::deque<std::vector<Action>> action_lists_;
  std::vector<std::size_t> spare_action_lists_;
  std::uint32_t max_streams_ = 1;
  Summary summary_;

  std::optional<CollectiveRunner> collectives_;  // which ops run over the network, and running them
};

// The actors' stacks (see run()); AddressSanitizer's redzones make frames several times larger.
#if defined(__SANITIZE_ADDRESS__)
constexpr unsigned kStackScale = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr unsigned kStackScale = 4;
#else
constexpr unsigned kStackScale = 1;
#endif
#else
constexpr unsigned kStackScale = 1;
#endif
constexpr unsigned kStreamStackBytes = kStackScale * 256 * 1024;
constexpr unsigned kCopyStackBytes = kStackScale * 128 * 1024;

// How many SimGrid actors (streams and copies in flight) a run may hold at once. Each actor's
// stack is a mapping of the process and its guard page a second; Linux allows a process
// vm.max_map_count mappings (65,530 by default) and SimGrid aborts when it cannot protect a
// stack ("Failed to protect stack": ZeRO-Offload on 8,000 simulated GPUs). A quarter of the
// limit is left for the process's own mappings (libraries, malloc's large blocks).
std::size_t actor_limit() {
  std::size_t maps = 65530;
  if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    unsigned long long v = 0;
    if (std::fscanf(f, "%llu", &v) == 1 && v > 0) maps = static_cast<std::size_t>(v);
    std::fclose(f);
  }
  return maps * 3 / 4 / 2;
}

std::string too_many_actors(const std::string& step, std::size_t streams, std::size_t copies, std::size_t limit,
                            double at_s) {
  return fmt::format("{}: {} streams and {} copies in flight at {} are more SimGrid actors than this system "
                     "allows at once ({}: each takes two of the process's mappings, and vm.max_map_count "
                     "caps them): simulate fewer devices (--devices, parallel.symmetric: true) or raise "
                     "vm.max_map_count",
                     step, streams, copies, format_seconds(at_s), limit);
}

void Simulation::guarded(const std::function<void()>& body) {
  try {
    body();
  } catch (...) {
    if (!error_) error_ = std::current_exception();
    stopped_ = true;
    notify();
  }
}

void Simulation::split_plan() {
  // Each step goes to the stream of the compute step before it (the first steps to device
  // 0's stream 0), except that a step preparing an op (a swap-in, a recomputation) after a
  // collective goes to the compute stream the collective was issued from: NCCL's stream runs
  // ahead of the compute stream, and a prefetch placed there before a backward op moved its
  // buffer before the forward had made it ("moves buffer '...router.weights', which is in no
  // tier": capuchin on Mixtral with expert parallelism). A free or a swap-out after a
  // collective stays on its stream: it must wait for the collective to end.
  // Two passes: the first counts, so that a plan of one stream runs from the plan itself and
  // the others' steps are copied once, into vectors of their exact size (a million-op plan is
  // a hundred megabytes).
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> index;
  auto stream_of = [&](std::uint32_t device, std::uint32_t stream) {
    auto [it, fresh] = index.try_emplace({device, stream}, streams_.size());
    if (fresh) streams_.push_back({device, stream, {}, {}});
    return it->second;
  };
  auto each_step = [&](auto&& take) {
    std::size_t current = stream_of(0, 0);
    std::size_t issuer = current;  // the compute stream that issued the last compute step
    for (const Step& step : plan_.steps) {
      if (step.kind == StepKind::compute) {
        const Op& op = trace_.ops.at(step.id);
        // A collective runs on its device's communication stream (NCCL's own), after the
        // compute streams.
        const bool collective = collectives_->runs(op.id);
        current = stream_of(op.device, collective ? collectives_->stream(op) : op.stream);
        issuer = collective ? stream_of(op.device, op.stream) : current;
      }
      take(step.kind == StepKind::swap_in || step.kind == StepKind::recompute ? issuer : current, step);
    }
  };
  std::vector<std::size_t> count;
  each_step([&](std::size_t k, const Step&) {
    if (k >= count.size()) count.resize(k + 1, 0);
    ++count[k];
  });
  for (std::size_t k = 0; k < count.size(); ++k)
    if (count[k] == plan_.steps.size()) {
      streams_[k].steps = plan_.steps;
      return;
    }
  for (std::size_t k = 0; k < count.size(); ++k) streams_[k].own.reserve(count[k]);
  each_step([&](std::size_t k, const Step& step) { streams_[k].own.push_back(step); });
  for (Stream& st : streams_) st.steps = st.own;
}

void Simulation::place_initial_buffers() {
  // Buffers resident when the iteration starts live in the compute tier of the device of
  // their first reader (exec::start_slots), unless the plan places them elsewhere
  // (optimizer state kept in host memory or on NVMe).
  const auto slots = exec::start_slots(trace_);
  std::vector<std::size_t> home(trace_.buffers.size(), SIZE_MAX);
  for (const InitialPlacement& p : plan_.placements) {
    if (p.buffer >= trace_.buffers.size() || p.tier >= platform_.tiers.size())
      throw PolicyError(fmt::format("policy {} places buffer {} in tier {}: no such buffer or tier",
                                    planned_.label, p.buffer, p.tier));
    if (trace_.buffers[p.buffer].producer != kNoOp)
      throw PolicyError(fmt::format("policy {} places buffer '{}' at the start, but op '{}' makes it",
                                    planned_.label, trace_.buffers[p.buffer].name,
                                    trace_.ops[trace_.buffers[p.buffer].producer].name));
    home[p.buffer] = p.tier;
  }
  // Memory outside the allocator's use first: the CUDA context, NCCL's channel buffers.
  for (std::size_t t = 0; t < reserved_.size(); ++t)
    if (reserved_[t] > 0 && !memory_.allocate_anonymous(t, reserved_[t], Category::runtime, 0.0)) {
      report_oom(t, reserved_[t], OomSite{OomSite::Kind::start});
      return;
    }
  for (const Buffer& b : trace_.buffers) {
    if (b.producer != kNoOp) continue;
    residency_.present_at_start(b.id);
    if (b.device >= compute_devices_.size())
      throw InputError(fmt::format("{}: buffer '{}' belongs to compute device {}, but platform '{}' "
                                   "has {} compute device(s)",
                                   trace_.name, b.name, b.device, platform_.name,
                                   compute_devices_.size()));
    const std::size_t tier = home[b.id] != SIZE_MAX
                                 ? home[b.id]
                                 : *platform_.devices[compute_devices_[slots[b.id]]].operand_tier();
    if (!memory_.allocate(b.id, tier, 0.0)) {
      report_oom(tier, b.bytes, OomSite{OomSite::Kind::start});
      return;
    }
  }
}

void Simulation::record_stall(double t0, const OomSite& site, BufferId b, std::uint64_t bytes,
                              std::size_t tier) {
  emit({EventKind::stall, t0, now_s(), site.device, site.stream, site.op, b, bytes, kNoId,
        static_cast<std::uint32_t>(tier)});
}

void Simulation::flush() {
  Lane& l = lane();
  if (l.deferred_s <= 0) return;
  const double d = l.deferred_s;
  l.deferred_s = 0;  // while it executes, its clock is SimGrid's own
  l.until = sg4::Engine::get_clock() + d;
  // Alone on its device's host, an execution of d seconds' work takes d seconds: a sleep of
  // d is the same time, for one SimGrid activity and simcall where an execution costs five
  // (see sleeps_).
  if (sleeps_[l.device])
    sg4::this_actor::sleep_for(d);
  else
    sg4::this_actor::execute(d * kHostSpeed);
  l.until = kActing;
}

// An op of the calling stream, ending at end_s, may be deferred when no other stream can act
// before it ends: every other stream has finished, or waits for something that does not
// hold yet (only a notify() can free it, and the notifier flushes first), or executes or
// sleeps past end_s on another device (two streams of one device share its SimGrid host, so
// one running there runs slower while this one executes). A stream that yielded elsewhere
// (a collective's flows), a copy in flight, or an end too close to another's to order them
// apart: no. Thus every act of every stream happens in the order of simulated time, as
// without deferral, and only the clock's rounding differs.
bool Simulation::can_defer(double end_s) const {
  if (exact_ || copies_in_flight_ > 0) return false;
  if (streams_.size() == 1) return true;
  if (lanes_.size() > kMostDeferringLanes) return false;
  const Lane& me = lane();
  check_untested(me);
  const double tie = 1e-12 * std::max(1.0, std::abs(end_s));
  for (const Lane& l : lanes_) {
    if (&l == &me || l.done) continue;
    if (l.waiting) {
      if (tested(l, me) && (stopped_ || (*l.waiting)())) return false;
      continue;
    }
    if (l.device == me.device || !(end_s + tie < l.until)) return false;
  }
  return true;
}

void Simulation::notify() {
  if (waiters_ == 0) return;
  // Wake the waiters only when one of them can go on (or one outside the streams waits,
  // whose test is not kept), after the notifier's deferred time: the woken act at the
  // notifier's time.
  bool any = stopped_ || outside_waiters_ > 0;
  const Lane& by = lane();
  check_untested(by);
  // Only the streams whose test names the changing device or any, where tested() says so
  // (otherwise it says so of every stream).
  const auto narrow = [&] { return tests_by_device_ && !stopped_ && &by != &outside_; };
  if (narrow()) {
    for (const std::uint32_t list : {by.device, kAnyDevice})
      for (const Lane* l : waiting_list(list))
        if (!any) any = (*l->waiting)();
  } else {
    for (std::size_t i = 0; i < lanes_.size() && !any; ++i)
      any = lanes_[i].waiting && (*lanes_[i].waiting)();
  }
  if (!any) return;
  flush();
  // The streams whose test holds now (every waiting stream once the run stopped) wake, each
  // its actor resumed, in the order they began to wait; a stream whose test
  // does not hold sleeps on, its test kept, until a later change frees it. They are woken in
  // one simcall, so no actor runs between two wake-ups: woken one by one, the streams of the
  // rank whose arrival ran a collective ordered their acts at its end otherwise than its
  // peers' did, and a symmetric run differed from the per-rank run it stands for. A woken
  // stream counts as acting until it waits again (it may change what the others test).
  // (The list is the call's own: other actors run, and may notify, before SimGrid's maestro
  // runs this simcall.)
  std::vector<Lane*> wake;
  if (narrow()) {
    for (const std::uint32_t list : {by.device, kAnyDevice})
      for (Lane* l : waiting_list(list))
        if ((*l->waiting)()) wake.push_back(l);
  } else {
    for (Lane& l : lanes_)
      if (l.waiting && (stopped_ || (*l.waiting)())) wake.push_back(&l);
  }
  std::sort(wake.begin(), wake.end(), [](const Lane* a, const Lane* b) { return a->waits_from < b->waits_from; });
  for (Lane* l : wake) {
    l->waiting = nullptr;
    unlist_waiting(*l);
  }
  simgrid::kernel::actor::simcall_answered([this, &wake, outside = outside_waiters_ > 0] {
    for (Lane* l : wake) l->actor->resume();
    if (outside) changed_->notify_all();
  });
}

void Simulation::wait_until(Condition done, std::uint32_t on) {
  flush();
  if (stopped_ || done()) return;
  Lane& l = lane();
  if (&l != &outside_) {
    // A stream's actor suspends itself, its test kept, and notify() resumes it. SimGrid's
    // actors do not run between the test and the suspension, so no change is missed. It
    // yields before and after, where taking and giving back a mutex did (a mutex and a
    // condition variable per stream: each wait made two activities more): the other actors
    // acting at this instant act in the same order as they did.
    sg4::this_actor::yield();
    while (!stopped_ && !done()) {
      l.waits_on = on;
      l.waiting = &done;
      list_waiting(l);
      l.waits_from = waits_begun_++;
      ++waiters_;
      sg4::this_actor::suspend();
      --waiters_;
      l.waiting = nullptr;
      unlist_waiting(l);
    }
    sg4::this_actor::yield();
    return;
  }
  // Outside the streams (a copy's actor): its test is not kept; it waits on changed_, which
  // every notify() with such a waiter signals. Taking the mutex may yield to other actors:
  // what they change meanwhile is seen below, before this actor waits.
  std::unique_lock lock(*mutex_);
  while (!stopped_ && !done()) {
    l.waits_on = on;
    ++outside_waiters_;
    l.waits_from = waits_begun_++;
    ++waiters_;
    changed_->wait(lock);
    --waiters_;
    --outside_waiters_;
  }
}

void Simulation::report_oom(std::size_t tier, std::uint64_t bytes, const OomSite& site) {
  if (stopped_) return;
  stopped_ = true;
  OomReport r;
  r.op = site.describe(trace_, platform_);
  r.op_id = site.op;
  r.tier = platform_.tiers[tier].name;
  r.requested_bytes = bytes;
  r.allocated_bytes = memory_.usage(tier).allocated_bytes;
  r.capacity_bytes = memory_.usage(tier).limit_bytes();
  r.largest_free_block = memory_.largest_free_block(tier);
  r.reason = memory_.failure_reason(tier, bytes);
  std::string why = runtime_.oom_reason();
  if (why.empty()) why = planned_.oom_reason;
  if (!why.empty()) r.reason = r.reason.empty() ? why : r.reason + "; " + why;
  for (BufferId b : memory_.largest_resident(tier, kOomLiveBuffers))
    r.largest_live.push_back({trace_.buffers[b].name, trace_.buffers[b].category, trace_.buffers[b].bytes});
  summary_.status = "oom";
  summary_.oom = std::move(r);
  notify();
}

bool Simulation::allocate(std::size_t tier, std::uint64_t bytes, const OomSite& site,
                          FunctionRef<bool()> attempt, CopyCause cause) {
  // The reader of a demand copy records its whole wait itself.
  auto stall = [&](double t0) {
    if (cause != CopyCause::demand && now_s() > t0) record_stall(t0, site, kNoId, bytes, tier);
  };
  std::vector<Action> actions;
  struct Short {  // counted in short_ while this allocation has failed and not yet succeeded
    int* waiting = nullptr;
    ~Short() {
      if (waiting) --*waiting;
    }
  } waiting;
  while (!stopped_) {
    if (attempt()) return true;
    if (cause != CopyCause::prefetch && !waiting.waiting) {
      waiting.waiting = &short_[tier];
      ++short_[tier];
    }
    actions.clear();
    runtime_.on_alloc_failure(*this, AllocationFailure{tier, bytes, site.op}, actions);
    if (actions.empty()) {
      if (cause == CopyCause::prefetch) return false;
      // Space held by copies leaving this tier is free once they land, and copies arriving
      // in it (prefetches for later ops) can be evicted once they have landed: wait for
      // them before calling it an OOM.
      if (leaving_[tier] > 0 || arriving_[tier] > 0) {
        const double t0 = now_s();
        while ((leaving_[tier] > 0 || arriving_[tier] > 0) && !stopped_)
          wait_until([&] { return leaving_[tier] == 0 && arriving_[tier] == 0; });
        stall(t0);
        continue;
      }
      report_oom(tier, bytes, site);
      return false;
    }
    for (const Action& a : actions) apply(a);
    const double t0 = now_s();
    for (const Action& a : actions)
      while (residency_.in_flight(a.id) && !stopped_) wait_until([&] { return !residency_.in_flight(a.id); });
    stall(t0);
  }
  return false;
}

std::uint32_t Simulation::copy_owner(std::size_t from, std::size_t to, int& direction) const {
  // The copy runs on the engines of the accelerator it leaves (out) or enters (in); between
  // two host tiers, on the host's.
  auto dev_from = *platform_.find_device(platform_.tiers[from].device);
  auto dev_to = *platform_.find_device(platform_.tiers[to].device);
  if (platform_.devices[dev_from].kind != DeviceKind::cpu) {
    direction = 0;
    return static_cast<std::uint32_t>(dev_from);
  }
  direction = platform_.devices[dev_to].kind != DeviceKind::cpu ? 1 : 0;
  return static_cast<std::uint32_t>(direction == 1 ? dev_to : dev_from);
}

void Simulation::start_copy(BufferId b, std::size_t to, CopyCause cause) {
  const Buffer& buf = trace_.buffers[b];
  const std::size_t from = memory_.placement(b).tier;
  if (residency_.in_flight(b) || from == to) return;
  if (cause == CopyCause::prefetch && short_[to] > 0) return;  // its reader fetches it on demand
  flush();
  if (from == Placement::kNowhere)
    throw PolicyError(fmt::format("policy {} moves buffer '{}', which is in no tier",
                                 planned_.label, buf.name));
  if (!sg_.routes.find(from, to))
    throw InputError(fmt::format("platform '{}' has no link from {} to {} (needed to move '{}')",
                                 platform_.name, platform_.tiers[from].name,
                                 platform_.tiers[to].name, buf.name));
  Allocation address;
  if (!allocate(to, buf.bytes, here(OomSite::Kind::copy, current_slot(), b, to), [&] {
        auto a = memory_.reserve_move(b, to, now_s());
        if (a) address = *a;
        return a.has_value();
      }, cause))
    return;
  if (streams_.size() + static_cast<std::size_t>(copies_in_flight_) >= max_actors_)
    throw InputError(too_many_actors(trace_.name, streams_.size(), static_cast<std::size_t>(copies_in_flight_),
                                     max_actors_, now_s()));
  if (!copies_foreseen_) collectives_->stop_replay();
  tests_by_device_ = false;
  residency_.copy_started(b);
  ++copies_in_flight_;
  ++leaving_[from];
  ++arriving_[to];
  int direction = 0;
  const std::uint32_t owner = copy_owner(from, to, direction);
  // A swap-in moves data toward where ops run: into a compute tier, or between two stores
  // into the faster one (NVMe to host DRAM); everything else is a swap-out.
  const TierSpec& dst = platform_.tiers[to];
  const TierSpec& src = platform_.tiers[from];
  const bool to_compute =
      dst.role == TierRole::compute ||
      (src.role != TierRole::compute && dst.bandwidth_Bps > src.bandwidth_Bps);
  auto copy = sg4::Actor::init("copy", sg_.device_hosts[owner]);
  copy->set_stacksize(kCopyStackBytes / 1024);  // in KiB
  copy->start([this, b, from, to, address, owner, direction, to_compute] {
    guarded([&] {
      auto& slot = sg_.copy_slots[2 * owner + direction];
      if (!slot) slot = sg4::Semaphore::create(platform_.devices[owner].copy_engines);
      slot->acquire();
      const double t0 = now_s();
      const std::uint64_t bytes = trace_.buffers[b].bytes;
      count_route(from, to, bytes);
      sg4::Comm::sendto(sg_.tier_hosts[from], sg_.tier_hosts[to], bytes);
      const double t1 = now_s();
      slot->release();
      memory_.finish_move(b, to, address, t1);
      --copies_in_flight_;
      --leaving_[from];
      --arriving_[to];
      emit({to_compute ? EventKind::swap_in : EventKind::swap_out, t0, t1, owner,
            static_cast<std::uint32_t>(direction), kNoOp, b, bytes, static_cast<std::uint32_t>(from),
            static_cast<std::uint32_t>(to)});
      residency_.copy_landed(b);  // released now if it was freed on the way
      notify();
    });
  });
}

void Simulation::run_op(const Op& op, std::uint32_t device_slot, std::uint32_t stream,
                        bool recompute) {
  const std::size_t tier = *platform_.devices[compute_devices_[device_slot]].operand_tier();
  residency_.run(op, exec::Site{device_slot, stream, tier}, recompute);
}

OpId Simulation::enter(const Op& op, bool recompute) {
  OpId& current = current_slot();
  const OpId caller = current;
  current = op.id;
  pin(op, 1);
  if (op_hooks_ && !recompute) run_hook(&RuntimeHooks::before_op, op.id);
  if (op_hooks_ && recompute) runtime_.before_recompute(*this, op.id);
  return caller;
}

void Simulation::pin(const Op& op, int by) {
  for (const auto* list : {&op.inputs, &op.updates, &op.outputs})
    for (BufferId b : *list) pins_[b] += by;
}

void Simulation::leave(const Op& op, bool recompute, OpId caller) {
  pin(op, -1);
  notify();
  if (op_hooks_ && !recompute) run_hook(&RuntimeHooks::after_op, op.id);
  if (op_hooks_ && recompute) runtime_.after_recompute(*this, op.id);
  current_slot() = recompute ? caller : op.id;
}

bool Simulation::allocate_workspace(const Op& op, const exec::Site& site, exec::Workspace& at) {
  // Workspace goes to the device's scratch tier (TPU VMEM/CMEM) when it fits there, else to
  // the compute tier.
  const auto& scratch = platform_.devices[compute_devices_[site.device]].scratch_tier;
  std::optional<Allocation> in_scratch;
  if (scratch)
    in_scratch = memory_.allocate_anonymous(*scratch, op.workspace_bytes, Category::workspace, now_s());
  if (in_scratch) {
    at = {*scratch, in_scratch->address, in_scratch->bytes};
    return true;
  }
  at.tier = site.tier;
  return allocate(site.tier, op.workspace_bytes, OomSite::of(op, site), [&] {
    auto a = memory_.allocate_anonymous(site.tier, op.workspace_bytes, Category::workspace, now_s());
    if (a) {
      at.address = a->address;
      at.bytes = a->bytes;
    }
    return a.has_value();
  });
}

void Simulation::release_workspace(const Op&, const exec::Workspace& at) {
  memory_.release_anonymous(at.tier, Allocation{at.address, at.bytes}, Category::workspace, now_s());
}

// An op's host time: its kind's entry, else the longest entry "*SUFFIX" its kind ends with
// ("*_backward": the kernels the autograd engine launches from C++), else the default.
double host_time(const HostOverhead& host, const std::string& kind) {
  if (auto it = host.per_kind_s.find(kind); it != host.per_kind_s.end()) return it->second;
  std::size_t longest = 0;
  double t = host.per_op_s;
  for (const auto& [pattern, s] : host.per_kind_s) {
    if (pattern.empty() || pattern.front() != '*' || pattern.size() - 1 <= longest) continue;
    const std::string_view suffix = std::string_view(pattern).substr(1);
    if (kind.size() >= suffix.size() && kind.compare(kind.size() - suffix.size(), suffix.size(), suffix) == 0) {
      longest = suffix.size();
      t = s;
    }
  }
  return t;
}

void Simulation::setup_host_clock() {
  for (std::size_t d : compute_devices_) host_clock_ |= platform_.devices[d].host.any();
  if (!host_clock_) return;
  host_at_.assign(compute_devices_.size(), 0.0);
  host_sum_at_.assign(compute_devices_.size(), 0.0);
  host_cursor_.assign(compute_devices_.size(), kNoOp);
  for (std::size_t slot = 0; slot < compute_devices_.size(); ++slot)
    host_at_[slot] = platform_.devices[compute_devices_[slot]].host.per_step_s;
  std::vector<double> sum(compute_devices_.size(), 0.0);
  issued_s_.assign(trace_.ops.size(), 0.0);
  sync_gate_.assign(trace_.ops.size(), kNoCall);
  call_of_.assign(trace_.ops.size(), kNoCall);
  ended_.assign(trace_.ops.size(), 0);
  issued_.assign(trace_.ops.size(), 0);
  // Per device: the call its last op belongs to (kNoCall: that op synchronizes nothing), and
  // the last call before that.
  std::vector<std::uint32_t> open(compute_devices_.size(), kNoCall), gate(compute_devices_.size(), kNoCall);
  for (const Op& op : trace_.ops) {
    if (op.device >= compute_devices_.size()) continue;
    const HostOverhead& host = platform_.devices[compute_devices_[op.device]].host;
    std::uint32_t& call = open[op.device];
    const bool syncs = host.syncs_after(op.kind);
    if (syncs && call != kNoCall) {
      // Issued in the call the op before it opened: no host time of its own.
      sync_ops_.push_back(op.id);
      call_of_[op.id] = call;
      sync_gate_[op.id] = gate[op.device];
      issued_s_[op.id] = sum[op.device];
      continue;
    }
    if (call != kNoCall) gate[op.device] = call;
    call = kNoCall;
    sync_gate_[op.id] = gate[op.device];
    if (syncs) {
      call = static_cast<std::uint32_t>(sync_from_.size());
      sync_from_.push_back(static_cast<std::uint32_t>(sync_ops_.size()));
      sync_ops_.push_back(op.id);
      call_of_[op.id] = call;
    }
    sum[op.device] += host_time(host, op.kind);
    issued_s_[op.id] = sum[op.device];
  }
  sync_from_.push_back(static_cast<std::uint32_t>(sync_ops_.size()));
}

bool Simulation::call_issued(std::uint32_t call) const {
  for (std::uint32_t i = sync_from_[call]; i < sync_from_[call + 1]; ++i)
    if (!issued_[sync_ops_[i]]) return false;
  return true;
}

void Simulation::wait_for_call(std::uint32_t call, std::uint32_t device) {
  while (!stopped_ && !call_ended(call)) wait_until([&] { return call_ended(call); }, device);
}

bool Simulation::call_ended(std::uint32_t call) const {
  for (std::uint32_t i = sync_from_[call]; i < sync_from_[call + 1]; ++i)
    if (!ended_[sync_ops_[i]]) return false;
  return true;
}

void Simulation::wait_for_host(const Op& op) {
  if (!host_clock_ || op.device >= host_at_.size()) return;
  // The host issues nothing after a synchronizing call before every op of it has ended.
  if (const std::uint32_t call = sync_gate_[op.id]; call != kNoCall) wait_for_call(call, op.device);
  issued_[op.id] = 1;
  OpId& cursor = host_cursor_[op.device];
  if (cursor == kNoOp || op.id > cursor) cursor = op.id;
  host_sleep_until(host_at_[op.device] + (issued_s_[op.id] - host_sum_at_[op.device]), op.id);
}

void Simulation::wait_for_host_recompute(const Op& op) {
  if (!host_clock_ || op.device >= host_at_.size()) return;
  // Issued right after the latest op the host has issued: once that op's synchronizing call
  // (if it is one) has ended, at the host's position there plus the re-run's own host time,
  // which every later op of the device waits for too. A call with an op not yet issued is not
  // waited for: the re-run remakes what that op reads.
  const OpId cursor = host_cursor_[op.device];
  if (cursor != kNoOp && call_of_[cursor] != kNoCall && call_issued(call_of_[cursor]))
    wait_for_call(call_of_[cursor], op.device);
  const HostOverhead& host = platform_.devices[compute_devices_[op.device]].host;
  host_at_[op.device] += host_time(host, op.kind);
  const double at = cursor == kNoOp ? host_sum_at_[op.device] : issued_s_[cursor];
  host_sleep_until(host_at_[op.device] + (at - host_sum_at_[op.device]), op.id);
}

void Simulation::host_sleep_until(double issued, OpId id) {
  const double now = now_s();
  if (!(issued > now)) return;
  if (!(issued <= kHorizonS)) past_horizon(issued, id);
  if (can_defer(issued)) {
    lane().deferred_s += issued - now;
  } else {
    flush();
    Lane& l = lane();
    l.until = issued;
    sg4::this_actor::sleep_until(issued);
    l.until = kActing;
  }
}

void Simulation::host_after(const Op& op) {
  if (!host_clock_ || op.device >= host_at_.size()) return;
  ended_[op.id] = 1;
  const DeviceSpec& d = platform_.devices[compute_devices_[op.device]];
  if (!d.host.syncs_after(op.kind)) return;
  // The host waited for the device to finish this op (torch.cuda.synchronize()); the ops of
  // one call share their issue time, so the last of them to end sets the host's clock.
  host_at_[op.device] = std::max(host_at_[op.device] + (issued_s_[op.id] - host_sum_at_[op.device]), now_s());
  host_sum_at_[op.device] = issued_s_[op.id];
}

void Simulation::execute(const Op& op, const exec::Site& site, bool recompute) {
  if (recompute)
    wait_for_host_recompute(op);
  else
    wait_for_host(op);
  if (collectives_->runs(op.id)) {
    const double t0 = collectives_->run(op, sg_, *this);
    emit({EventKind::comm, t0, now_s(), site.device, site.stream, op.id, kNoId, op.message_bytes, kNoId, kNoId});
    if (!recompute) host_after(op);
    return;
  }
  const double t0 = now_s();
  // Checked before SimGrid sees it: its solver does not come back from a time near 1e300.
  if (!(t0 + durations_[op.id] <= kHorizonS)) past_horizon(t0 + durations_[op.id], op.id);
  // A collective running on this device holds part of its SMs (CollectiveModel::sm_share).
  const double slowdown = collectives_->slowdown(op.device);
  // Deferred, or executed as one SimGrid activity with the stream's deferred time before it.
  lane().deferred_s += durations_[op.id] * slowdown;
  if (!can_defer(t0 + durations_[op.id] * slowdown)) flush();
  const double t1 = now_s();
  emit({recompute ? EventKind::recompute : EventKind::compute, t0, t1, site.device, site.stream,
        op.id, kNoId, 0, kNoId, kNoId});
  if (!recompute) host_after(op);
}

void Simulation::choose_sleeps() {
  // A stream computes if it runs an op that is not a collective run over the network. Where a
  // buffer can be dropped and remade (a plan's drop or recompute steps, a runtime policy),
  // any stream may recompute an input before its op (a collective's too): every stream counts.
  bool remakes = planned_.hooks != nullptr;
  for (const Step& step : plan_.steps)
    remakes |= step.kind == StepKind::drop || step.kind == StepKind::recompute;
  std::vector<std::uint32_t> computing(compute_devices_.size(), 0);
  for (const Stream& s : streams_) {
    const bool computes = remakes || std::any_of(s.steps.begin(), s.steps.end(), [&](const Step& step) {
                            return step.kind == StepKind::compute && !collectives_->runs(step.id);
                          });
    if (computes && s.device < computing.size()) ++computing[s.device];
  }
  sleeps_.assign(computing.size(), 0);
  for (std::size_t d = 0; d < computing.size(); ++d) sleeps_[d] = computing[d] <= 1;
}

bool Simulation::copies_possible() const {
  if (planned_.hooks || !plan_.placements.empty()) return true;
  for (const Step& step : plan_.steps)
    if (step.kind == StepKind::swap_in || step.kind == StepKind::swap_out) return true;
  // A buffer lives on the device of its producer, or of its first reader when the step
  // starts with it (exec::start_slots); a reader on another device copies it in.
  std::vector<std::uint32_t> home = exec::start_slots(trace_);
  for (const Buffer& b : trace_.buffers)
    if (b.producer != kNoOp) home[b.id] = trace_.ops[b.producer].device;
  for (const Op& op : trace_.ops)
    for (BufferId b : op.reads())
      if (home[b] != op.device) return true;
  return false;
}

std::vector<std::vector<std::size_t>> Simulation::wanted_routes(std::vector<bool>& runs) const {
  // The routes a run can take: between the tiers of each node where a device runs ops or
  // holds buffers (copies to its GPUs, host memory and NVMe), both ways between those
  // devices' tiers and any tier the plan moves or places a buffer in (a host named on another
  // node), and between ring neighbours and all-to-all peers of the groups. Not every pair of
  // the platform's tiers: a 16,384-GPU platform has 10^9 of them.
  const std::size_t n = platform_.tiers.size();
  std::vector<std::vector<std::size_t>> want(n);
  auto both = [&](std::size_t a, std::size_t b) {
    if (a == b) return;
    want[a].push_back(b);
    want[b].push_back(a);
  };
  runs.assign(platform_.devices.size(), false);
  for (const Op& op : trace_.ops)
    if (op.device < compute_devices_.size()) runs[compute_devices_[op.device]] = true;
  for (const Buffer& b : trace_.buffers)
    if (b.device < compute_devices_.size()) runs[compute_devices_[b.device]] = true;
  std::uint32_t nodes = 1;
  for (const DeviceSpec& d : platform_.devices) nodes = std::max(nodes, d.node + 1);
  std::vector<bool> node_runs(nodes, false);
  for (std::size_t d = 0; d < platform_.devices.size(); ++d)
    if (runs[d]) node_runs[platform_.devices[d].node] = true;
  std::vector<std::vector<std::size_t>> node_tiers(nodes);
  for (const DeviceSpec& d : platform_.devices)
    if (node_runs[d.node]) node_tiers[d.node].insert(node_tiers[d.node].end(), d.tiers.begin(), d.tiers.end());
  for (std::size_t d = 0; d < platform_.devices.size(); ++d) {
    if (!runs[d]) continue;
    const auto& local = node_tiers[platform_.devices[d].node];
    for (std::size_t t : platform_.devices[d].tiers)
      for (std::size_t u : local) both(t, u);
  }
  // Where each running device's compute tier swaps to (swap_tiers(), a runtime policy's
  // evictions): its own node's host, or one across the fabric that no plan step names.
  std::vector<std::size_t> computes;
  for (std::size_t d = 0; d < platform_.devices.size(); ++d)
    if (runs[d] && platform_.devices[d].compute_tier) computes.push_back(*platform_.devices[d].compute_tier);
  const auto offloads = nearest_offloads(platform_, computes);
  for (std::size_t k = 0; k < computes.size(); ++k)
    if (offloads[k]) both(computes[k], offloads[k]->tier);
  for (const auto& local : node_tiers)  // between the stores (NVMe to host memory)
    for (std::size_t a : local)
      for (std::size_t b : local)
        if (a != b && platform_.tiers[a].role == TierRole::offload && platform_.tiers[b].role == TierRole::offload)
          want[a].push_back(b);
  auto named = [&](BufferId buffer, std::size_t tier) {
    if (buffer >= trace_.buffers.size() || tier >= n || trace_.buffers[buffer].device >= compute_devices_.size())
      return;
    for (std::size_t t : platform_.devices[compute_devices_[trace_.buffers[buffer].device]].tiers) both(t, tier);
  };
  for (const Step& step : plan_.steps)
    if (step.kind == StepKind::swap_out || step.kind == StepKind::swap_in || step.kind == StepKind::evict)
      named(step.id, step.tier);
  for (const InitialPlacement& p : plan_.placements) named(p.buffer, p.tier);
  collectives_->add_wanted_routes(want);
  for (auto& to : want) {
    std::sort(to.begin(), to.end());
    to.erase(std::unique(to.begin(), to.end()), to.end());
  }
  return want;
}

void Simulation::count_route(std::size_t from, std::size_t to, std::uint64_t bytes) {
  for (const RouteElement& e : sg_.routes.find(from, to)->elements)
    if (e.kind == RouteElement::Kind::link) tally_->on_link_bytes(e.index, e.forward, bytes);
}

void Simulation::evict(BufferId b, std::size_t to) {
  // A clean copy (ZeRO-Infinity's parameters, read from NVMe and never written back): its
  // space here is released and it is held in `to` again, at once. One in flight is left be.
  const std::size_t from = memory_.placement(b).tier;
  if (residency_.in_flight(b) || from == to || from == Placement::kNowhere) return;
  memory_.release(b, now_s());
  allocate(to, trace_.buffers[b].bytes, here(OomSite::Kind::eviction, current_slot(), b, to),
           [&] { return memory_.allocate(b, to, now_s()); });
  notify();
}

void Simulation::run_hook(void (RuntimeHooks::*hook)(const RuntimeView&, OpId, std::vector<Action>&),
                          OpId op) {
  std::size_t k = action_lists_.size();
  if (spare_action_lists_.empty()) {
    action_lists_.emplace_back();
  } else {
    k = spare_action_lists_.back();
    spare_action_lists_.pop_back();
  }
  (runtime_.*hook)(*this, op, action_lists_[k]);
  for (std::size_t i = 0; i < action_lists_[k].size(); ++i) apply(action_lists_[k][i]);
  action_lists_[k].clear();
  spare_action_lists_.push_back(k);
}

void Simulation::apply(const Action& a) {
  switch (a.kind) {
    case StepKind::swap_out: start_copy(a.id, a.tier); break;
    case StepKind::swap_in: start_copy(a.id, a.tier, CopyCause::prefetch); break;
    case StepKind::drop: residency_.drop(a.id); break;
    case StepKind::compute:
    case StepKind::free:
    case StepKind::recompute:
    case StepKind::evict:
      throw PolicyError(fmt::format("policy {} asked at run time for a {} step; a runtime action "
                                    "is a swap_out, a swap_in or a drop",
                                    planned_.label, to_string(a.kind)));
  }
}

void Simulation::run_stream(const Stream& s) {
  run_steps(s);
  flush();  // the stream ends at its true time, also after an OOM
  stream_at_[static_cast<std::size_t>(&s - streams_.data())] = kNoOp;
  lanes_[static_cast<std::size_t>(&s - streams_.data())].done = true;
  ++streams_done_;
}

void Simulation::run_steps(const Stream& s) {
  for (const Step& step : s.steps) {
    if (stopped_) return;
    switch (step.kind) {
      case StepKind::compute:
        stream_at_[static_cast<std::size_t>(&s - streams_.data())] = step.id;
        run_op(trace_.ops[step.id], s.device, s.stream);
        break;
      case StepKind::free: residency_.free(step.id); break;
      case StepKind::swap_out:
      case StepKind::swap_in: start_copy(step.id, step.tier); break;
      case StepKind::drop: residency_.drop(step.id); break;
      case StepKind::evict: evict(step.id, step.tier); break;
      case StepKind::recompute: {
        const Op& op = trace_.ops[step.id];
        if (residency_.needs_recompute(op)) run_op(op, s.device, s.stream, true);
        break;
      }
    }
  }
}

Summary Simulation::run() {
  // SimGrid reads its options from argv; memsim sets them here so every run is the same.
  int argc = 1;
  char name[] = "memsim";
  char* argv[] = {name, nullptr};
  xbt_log_control_set("root.thres:warning");
  // SimGrid's engine installs a SIGINT handler that calls exit(), which is not safe in a
  // handler: a Ctrl-C that lands inside malloc deadlocks in the exit handlers' frees. What
  // SIGINT did before (memsim's cleanup of unfinished outputs, sim/core/files.cpp, which
  // only unlinks and then dies of the signal) is put back.
  struct sigaction sigint_before {};
  const bool saved_sigint = ::sigaction(SIGINT, nullptr, &sigint_before) == 0;
  std::optional<sg4::Engine> engine_holder;
  sg4::Engine& engine = engine_holder.emplace(&argc, argv);
  if (saved_sigint) ::sigaction(SIGINT, &sigint_before, nullptr);
  // CM02 with no cross-traffic and no TCP window bound: a copy of S bytes over a link of
  // bandwidth B takes exactly S/B + latency, and copies sharing a link share it fairly.
  engine.set_config("network/model:CM02");
  engine.set_config("network/crosstraffic:0");
  engine.set_config("network/TCP-gamma:0");
  // SimGrid 3.32's lazy bandwidth updates let a flow that starts after its links' latency,
  // while another flow shares some of its path, escape the limits of the links it does not
  // share (two GPUs copying in through different PCIe switches: one ran at host-memory
  // speed). Recomputing the sharing in full keeps every flow within its links.
  engine.set_config("network/optim:Full");
  // Each actor's stack is reserved whole (SimGrid's default is 8 MiB): a run of many ranks'
  // streams, or with a thousand copies in flight, reserved gigabytes of address space for a
  // few megabytes of use, and under a limit on it (ulimit -v) SimGrid aborted. The streams'
  // code is shallow (remaking is iterative, the policies' hooks loop) and a copy's more so:
  // every test passes with 32 KiB stacks; a stream's has eight times that. A stack is carved
  // from the heap, which runs in huge pages (sim/app/main.cpp), so a stack is faulted in
  // whole however little of it is used: at 1 MiB GPT-3 175B's 110 streams touched 85 MB more
  // (`make pipeline-bench`'s GPT-3 run: 653 -> 570 MiB peak, 0.1-0.3 s less system time).
  engine.set_config(fmt::format("contexts/stack-size:{}", kStreamStackBytes / 1024));
  collectives_.emplace(platform_, trace_, compute_devices_, accelerators_, kHorizonS);
  std::vector<bool> runs;
  const auto wanted = wanted_routes(runs);
  sg_ = build_sg_platform(platform_, &wanted, &runs);
  copies_foreseen_ = exact_ || copies_possible();
  tests_by_device_ = !copies_foreseen_;
  collectives_->plan_replay(sg_, copies_foreseen_);
  mutex_ = sg4::Mutex::create();
  changed_ = sg4::ConditionVariable::create();
  for (std::size_t d : compute_devices_)
    max_streams_ = std::max(max_streams_, static_cast<std::uint32_t>(platform_.devices[d].streams));
  for (const Op& op : trace_.ops)
    max_streams_ = std::max(max_streams_, op_stream(op) + 1);
  tally_.emplace(trace_, compute_devices_.size(), accelerators_, max_streams_);
  setup_host_clock();
  split_plan();
  choose_sleeps();
  residency_.set_several_streams(streams_.size() > 1);
  place_initial_buffers();
  lanes_.clear();
  lanes_.reserve(streams_.size());  // waiting_on_ points into it
  waiting_on_.assign(compute_devices_.size() + 1, {});
  for (const Stream& s : streams_) {
    Lane& l = lanes_.emplace_back();
    l.device = s.device;
    l.stream = s.stream;
  }
  pins_.assign(trace_.buffers.size(), 0);
  max_actors_ = actor_limit();
  if (streams_.size() >= max_actors_) throw InputError(too_many_actors(trace_.name, streams_.size(), 0, max_actors_, 0));
  for (const Stream& s : streams_) {
    const std::size_t device = compute_devices_[s.device];
    Lane* current = &lanes_[static_cast<std::size_t>(&s - streams_.data())];
    sg4::Actor::create(fmt::format("{}.stream{}", platform_.devices[device].name, s.stream),
                       sg_.device_hosts[device], [this, &s, current] {
                         current->actor = sg4::Actor::self();
                         current->actor->set_data(current);
                         guarded([&] { run_stream(s); });
                       });
  }
  stream_at_.assign(streams_.size(), kNoOp);
  engine.run();
  if (error_) std::rethrow_exception(error_);
  if (!stopped_ && streams_done_ < streams_.size()) {
    // Every stream left waits on another (SimGrid found no activity that could end): a
    // receive no send matches, a collective a member never reaches, a cycle of waits.
    std::string waiting;
    for (std::size_t i = 0; i < streams_.size() && waiting.size() < 600; ++i)
      if (stream_at_[i] != kNoOp)
        waiting += fmt::format("{}'{}' ({} stream {})", waiting.empty() ? "" : ", ", trace_.ops[stream_at_[i]].name,
                               platform_.devices[compute_devices_[streams_[i].device]].name, streams_[i].stream);
    throw InputError(fmt::format("{}: the step deadlocked at {}: {} of {} streams wait for each other; waiting: {}",
                                 trace_.name, format_seconds(now_s()), streams_.size() - streams_done_, streams_.size(),
                                 waiting.empty() ? "(no op)" : waiting));
  }

  summary_.iteration_time_s = sg4::Engine::get_clock();
  summary_.replayed_phases = collectives_->replayed_phases();
  // The accelerator stream that computed and recomputed longest speaks for the step (with
  // one stream: that stream); a host's offloaded work shows in the iteration time, not here.
  tally_->fill(summary_, platform_);
  // SimGrid's platform, the routes and the tally are done with: freed before the summary's
  // tiers are made (a 16,384-GPU platform's 20,480 of them, 6 MB).
  sg_ = SgPlatform();
  tally_.reset();
  engine_holder.reset();
  return_free_memory();
  summary_.workload = trace_.name;
  summary_.description = trace_.description;
  summary_.platform = platform_.name;
  summary_.policy = planned_.label;
  summary_.ops_total = trace_.ops.size();
  summary_.tiers.reserve(platform_.tiers.size());
  for (std::size_t t = 0; t < platform_.tiers.size(); ++t) {
    TierSummary& ts = summary_.tiers.emplace_back();
    ts.name = platform_.tiers[t].name;
    ts.role = to_string(platform_.tiers[t].role);
    memory_.report(t, ts.usage, ts.tile_peaks);
  }
  return std::move(summary_);  // run() is the simulation's last act: its tiers are not copied
}

}  // namespace

Summary simulate(const PlanningContext& ctx, const PlanResult& planned, Recorder& recorder, bool exact) {
  Simulation sim(ctx, planned, recorder, exact);
  return sim.run();
}

}  // namespace memsim
