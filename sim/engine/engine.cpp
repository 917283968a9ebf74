#include "sim/engine/engine.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include "sim/core/error.h"
#include "sim/cost/cost_model.h"
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

  static OomSite of(const Op& op) { return {Kind::op, op.id, op.device, op.stream, 0, 0}; }
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

// The engine drives the residency machine (sim/exec/residency.h) with simulated time: it is
// the machine's Memory, with allocators, copy engines and SimGrid's clock.
class Simulation final : public RuntimeView, private exec::Memory {
 public:
  Simulation(const PlanningContext& ctx, const PlanResult& planned, Recorder& recorder)
      : platform_(ctx.platform),
        trace_(ctx.trace),
        planned_(planned),
        runtime_(planned.hooks ? *planned.hooks : no_hooks_),
        recorder_(recorder),
        liveness_(ctx.liveness),
        memory_(ctx.platform, ctx.trace, ctx.tier_caps),
        durations_(ctx.durations),
        compute_devices_(ctx.platform.op_devices()),
        accelerators_(ctx.platform.compute_devices().size()),
        op_hooks_(runtime_.has_op_hooks()),
        plan_(planned.plan),
        residency_(ctx.trace, *this, planned.label),
        leaving_(ctx.platform.tiers.size(), 0),
        arriving_(ctx.platform.tiers.size(), 0) {
    memory_.set_listener(&recorder_);
    recorder_.reserve(ctx.trace.ops.size() + 16, 2 * ctx.trace.ops.size() + ctx.trace.buffers.size());
  }

  Summary run();

  // RuntimeView
  // Never earlier than a time already handed out: executing deferred time as one SimGrid
  // activity can land a rounding error short of the sum it stands for.
  double now_s() const override {
    latest_s_ = std::max(latest_s_, sg4::Engine::get_clock() + deferred_s_);
    return latest_s_;
  }
  const Trace& trace() const override { return trace_; }
  const Liveness& liveness() const override { return liveness_; }
  const PlatformSpec& platform() const override { return platform_; }
  const MemoryState& memory() const override { return memory_; }
  OpId current_op() const override { return current_op_; }
  bool in_flight(BufferId b) const override { return residency_.in_flight(b); }
  bool dropped(BufferId b) const override { return residency_.dropped(b); }

 private:
  struct Stream {
    std::uint32_t device;  // index into compute_devices_
    std::uint32_t stream;
    std::vector<Step> steps;
  };

  void split_plan();
  void place_initial_buffers();
  void run_stream(const Stream& s);
  void evict(BufferId b, std::size_t to);
  void apply(const Action& a);
  void run_hook(void (RuntimeHooks::*hook)(const RuntimeView&, OpId, std::vector<Action>&), OpId op);
  void run_steps(const Stream& s);
  void run_op(const Op& op, std::uint32_t device_slot, std::uint32_t stream,
              bool recompute = false);

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
    record_stall(since_s, OomSite::of(reader), b, trace_.buffers[b].bytes, tier);
  }
  bool allocate(BufferId b, const exec::Site& site, const Op& op) override {
    // The clock is read inside: allocate() may wait for memory and retry later.
    return allocate(site.tier, trace_.buffers[b].bytes, OomSite::of(op),
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
                const std::function<bool()>& attempt, CopyCause cause = CopyCause::policy);
  void start_copy(BufferId b, std::size_t to, CopyCause cause = CopyCause::policy);
  void wait_for_change() override;
  void notify();
  void report_oom(std::size_t tier, std::uint64_t bytes, const OomSite& site);
  std::uint32_t copy_owner(std::size_t from, std::size_t to, int& direction) const;
  void guarded(const std::function<void()>& body);
  /// Every event goes to the recorder and to the tally (the summary's time accounting).
  void emit(const Event& e) {
    recorder_.record(e);
    tally_->on_event(e);
  }
  void record_stall(double t0, const OomSite& site, BufferId b, std::uint64_t bytes, std::size_t tier);
  bool can_defer() const { return streams_.size() == 1 && copies_in_flight_ == 0; }
  void flush();

  const PlatformSpec& platform_;
  const Trace& trace_;
  const PlanResult& planned_;
  RuntimeHooks no_hooks_;  // for a static policy
  RuntimeHooks& runtime_;
  Recorder& recorder_;
  const Liveness& liveness_;
  MemoryState memory_;
  const std::vector<double>& durations_;
  std::vector<std::size_t> compute_devices_;  // the devices ops name (op_devices): hosts last
  std::size_t accelerators_ = 0;              // how many of them are compute devices
  bool op_hooks_ = false;
  const Plan& plan_;
  exec::Residency<Simulation> residency_;
  std::vector<Stream> streams_;

  SgPlatform sg_;  // hosts, routes and copy engines in SimGrid
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr changed_;
  int waiters_ = 0;

  OpId current_op_ = 0;
  // Fast path: while one stream runs alone (no other stream, no copy in flight) nothing can
  // observe the clock between its ops, so their durations are summed and executed as one
  // SimGrid activity when something could (a copy, a wait, the end). now_s() includes the
  // deferred time, so every event and memory change carries its exact simulated time.
  double deferred_s_ = 0;
  mutable double latest_s_ = 0;  // the latest time now_s() returned
  int copies_in_flight_ = 0;
  std::vector<int> leaving_;   // per tier: copies out of it under way
  std::vector<int> arriving_;  // per tier: copies into it under way
  bool stopped_ = false;
  std::exception_ptr error_;
  std::optional<Tally> tally_;
  std::vector<Action> hook_actions_;
  std::uint32_t max_streams_ = 1;
  Summary summary_;
};

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
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> index;
  auto stream_of = [&](std::uint32_t device, std::uint32_t stream) -> Stream& {
    auto [it, fresh] = index.try_emplace({device, stream}, streams_.size());
    if (fresh) streams_.push_back({device, stream, {}});
    return streams_[it->second];
  };
  Stream* current = &stream_of(0, 0);
  for (const Step& step : plan_.steps) {
    if (step.kind == StepKind::compute) {
      const Op& op = trace_.ops.at(step.id);
      current = &stream_of(op.device, op.stream);  // taken anew: streams_ may have grown
    }
    current->steps.push_back(step);
  }
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
  if (deferred_s_ <= 0) return;
  const double d = deferred_s_;
  deferred_s_ = 0;  // while it executes, others see SimGrid's own clock
  sg4::this_actor::execute(d * kHostSpeed);
}

void Simulation::notify() {
  if (waiters_ > 0) changed_->notify_all();
}

void Simulation::wait_for_change() {
  flush();
  std::unique_lock lock(*mutex_);
  ++waiters_;
  changed_->wait(lock);
  --waiters_;
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
                          const std::function<bool()>& attempt, CopyCause cause) {
  // The reader of a demand copy records its whole wait itself.
  auto stall = [&](double t0) {
    if (cause != CopyCause::demand && now_s() > t0) record_stall(t0, site, kNoId, bytes, tier);
  };
  std::vector<Action> actions;
  while (!stopped_) {
    if (attempt()) return true;
    actions.clear();
    runtime_.on_alloc_failure(*this, AllocationFailure{tier, bytes, site.op}, actions);
    if (actions.empty()) {
      if (cause == CopyCause::prefetch) return false;
      // Space held by copies leaving this tier is free once they land, and copies arriving
      // in it (prefetches for later ops) can be evicted once they have landed: wait for
      // them before calling it an OOM.
      if (leaving_[tier] > 0 || arriving_[tier] > 0) {
        const double t0 = now_s();
        while ((leaving_[tier] > 0 || arriving_[tier] > 0) && !stopped_) wait_for_change();
        stall(t0);
        continue;
      }
      report_oom(tier, bytes, site);
      return false;
    }
    for (const Action& a : actions) apply(a);
    const double t0 = now_s();
    for (const Action& a : actions)
      while (residency_.in_flight(a.id) && !stopped_) wait_for_change();
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
  flush();
  if (from == Placement::kNowhere)
    throw PolicyError(fmt::format("policy {} moves buffer '{}', which is in no tier",
                                 planned_.label, buf.name));
  if (!sg_.routed[from][to])
    throw InputError(fmt::format("platform '{}' has no link from {} to {} (needed to move '{}')",
                                 platform_.name, platform_.tiers[from].name,
                                 platform_.tiers[to].name, buf.name));
  Allocation address;
  if (!allocate(to, buf.bytes, OomSite{OomSite::Kind::copy, current_op_, 0, 0, b, to}, [&] {
        auto a = memory_.reserve_move(b, to, now_s());
        if (a) address = *a;
        return a.has_value();
      }, cause))
    return;
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
  sg4::Actor::create("copy", sg_.device_hosts[owner], [this, b, from, to, address, owner, direction,
                                                    to_compute] {
    guarded([&] {
      auto slot = sg_.copy_slots[2 * owner + direction];
      slot->acquire();
      const double t0 = now_s();
      const std::uint64_t bytes = trace_.buffers[b].bytes;
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
  const OpId caller = current_op_;
  current_op_ = op.id;
  if (op_hooks_ && !recompute) run_hook(&RuntimeHooks::before_op, op.id);
  if (op_hooks_ && recompute) runtime_.before_recompute(*this, op.id);
  return caller;
}

void Simulation::leave(const Op& op, bool recompute, OpId caller) {
  notify();
  if (op_hooks_ && !recompute) run_hook(&RuntimeHooks::after_op, op.id);
  if (op_hooks_ && recompute) runtime_.after_recompute(*this, op.id);
  current_op_ = recompute ? caller : op.id;
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
  return allocate(site.tier, op.workspace_bytes, OomSite::of(op), [&] {
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

void Simulation::execute(const Op& op, const exec::Site& site, bool recompute) {
  const double t0 = now_s();
  if (can_defer())
    deferred_s_ += durations_[op.id];
  else
    sg4::this_actor::execute(durations_[op.id] * kHostSpeed);
  const double t1 = now_s();
  emit({recompute ? EventKind::recompute : EventKind::compute, t0, t1, site.device, site.stream,
        op.id, kNoId, 0, kNoId, kNoId});
}

void Simulation::evict(BufferId b, std::size_t to) {
  // A clean copy (ZeRO-Infinity's parameters, read from NVMe and never written back): its
  // space here is released and it is held in `to` again, at once. One in flight is left be.
  const std::size_t from = memory_.placement(b).tier;
  if (residency_.in_flight(b) || from == to || from == Placement::kNowhere) return;
  memory_.release(b, now_s());
  allocate(to, trace_.buffers[b].bytes, OomSite{OomSite::Kind::eviction, current_op_, 0, 0, b, to},
           [&] { return memory_.allocate(b, to, now_s()); });
  notify();
}

void Simulation::run_hook(void (RuntimeHooks::*hook)(const RuntimeView&, OpId, std::vector<Action>&),
                          OpId op) {
  hook_actions_.clear();
  (runtime_.*hook)(*this, op, hook_actions_);
  for (const Action& a : hook_actions_) apply(a);
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
}

void Simulation::run_steps(const Stream& s) {
  for (const Step& step : s.steps) {
    if (stopped_) return;
    switch (step.kind) {
      case StepKind::compute: run_op(trace_.ops[step.id], s.device, s.stream); break;
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
  sg4::Engine engine(&argc, argv);
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
  sg_ = build_sg_platform(platform_);
  mutex_ = sg4::Mutex::create();
  changed_ = sg4::ConditionVariable::create();
  for (std::size_t d : compute_devices_)
    max_streams_ = std::max(max_streams_, static_cast<std::uint32_t>(platform_.devices[d].streams));
  tally_.emplace(trace_, compute_devices_.size(), accelerators_, max_streams_);
  split_plan();
  residency_.set_several_streams(streams_.size() > 1);
  place_initial_buffers();
  for (const Stream& s : streams_) {
    const std::size_t device = compute_devices_[s.device];
    sg4::Actor::create(fmt::format("{}.stream{}", platform_.devices[device].name, s.stream),
                       sg_.device_hosts[device], [this, &s] { guarded([&] { run_stream(s); }); });
  }
  engine.run();
  if (error_) std::rethrow_exception(error_);

  summary_.iteration_time_s = sg4::Engine::get_clock();
  // The accelerator stream that computed longest speaks for the step (with one stream: that
  // stream); a host's offloaded work shows in the iteration time, not here.
  tally_->fill(summary_, platform_, summary_.iteration_time_s);
  summary_.workload = trace_.name;
  summary_.description = trace_.description;
  summary_.platform = platform_.name;
  summary_.policy = planned_.label;
  summary_.ops_total = trace_.ops.size();
  for (std::size_t t = 0; t < platform_.tiers.size(); ++t)
    summary_.tiers.push_back({platform_.tiers[t].name, std::string(to_string(platform_.tiers[t].role)),
                              memory_.usage(t), memory_.allocator(t).tile_peaks()});
  return summary_;
}

}  // namespace

Summary simulate(const PlanningContext& ctx, const PlanResult& planned, Recorder& recorder) {
  Simulation sim(ctx, planned, recorder);
  return sim.run();
}

}  // namespace memsim
