#include "sim/engine/engine.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include "sim/core/error.h"
#include "sim/cost/cost_model.h"
#include "sim/platform/routes.h"

namespace sg4 = simgrid::s4u;

namespace memsim {
namespace {

// Device hosts run 1e9 "flops" per simulated second: an op of duration d executes d x 1e9,
// which SimGrid resolves to within a few ULPs of d.
constexpr double kHostSpeed = 1e9;
constexpr std::size_t kOomLiveBuffers = 10;

class Simulation final : public RuntimeView {
 public:
  Simulation(const PlatformSpec& platform, const Trace& trace, Policy& policy, Recorder& recorder)
      : platform_(platform),
        trace_(trace),
        policy_(policy),
        recorder_(recorder),
        liveness_(compute_liveness(trace)),
        memory_(platform, trace),
        durations_(op_durations(trace, platform)),
        compute_devices_(platform.op_devices()),
        accelerators_(platform.compute_devices().size()),
        ready_(trace.buffers.size(), 0),
        in_flight_(trace.buffers.size(), 0),
        free_on_arrival_(trace.buffers.size(), 0),
        dropped_(trace.buffers.size(), 0),
        updaters_(trace.buffers.size()),
        op_done_(trace.ops.size(), 0),
        leaving_(platform.tiers.size(), 0),
        arriving_(platform.tiers.size(), 0) {
    for (const Op& op : trace.ops)
      for (BufferId b : op.updates) updaters_[b].push_back(op.id);
    memory_.set_listener(&recorder_);
    hooks_ = policy_.has_op_hooks();
    plan_ = policy_.plan(trace_, liveness_, platform_);
    recorder_.reserve(trace.ops.size() + 16, 2 * trace.ops.size() + trace.buffers.size());
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
  bool in_flight(BufferId b) const override { return in_flight_[b] != 0; }
  bool dropped(BufferId b) const override { return dropped_[b] != 0; }

 private:
  struct Stream {
    std::uint32_t device;  // index into compute_devices_
    std::uint32_t stream;
    std::vector<Step> steps;
  };

  void build_platform();
  void split_plan();
  void place_initial_buffers();
  void run_stream(const Stream& s);
  std::vector<OpId> remake_ops(BufferId b, OpId reader) const;
  void remake(BufferId b, const Op& reader);
  void drop(BufferId b);
  void evict(BufferId b, std::size_t to);
  void apply(const Action& a);
  void run_hook(void (Policy::*hook)(const RuntimeView&, OpId, std::vector<Action>&), OpId op);
  void run_steps(const Stream& s);
  void run_op(const Op& op, std::uint32_t device_slot, std::uint32_t stream,
              bool recompute = false);
  bool ensure_resident(BufferId b, std::size_t tier, const Op& op);
  bool update_pending(BufferId b, const Op& op) const;
  /// Why a copy starts: a plan step or an eviction; a policy's prefetch, given up (no OOM)
  /// when the policy finds no room for it; a reader that needs it now, which records the
  /// whole wait as its stall (so making room is not counted a second time).
  enum class CopyCause : std::uint8_t { policy, prefetch, demand };
  bool allocate(std::size_t tier, std::uint64_t bytes, const Op& op,
                const std::function<bool()>& attempt, CopyCause cause = CopyCause::policy);
  void start_copy(BufferId b, std::size_t to, CopyCause cause = CopyCause::policy);
  void release(BufferId b);
  void wait_for_change();
  void notify();
  void report_oom(std::size_t tier, std::uint64_t bytes, const Op& op);
  std::uint32_t copy_owner(std::size_t from, std::size_t to, int& direction) const;
  void guarded(const std::function<void()>& body);
  struct Busy {
    double compute_s = 0;
    double stall_s = 0;
    double recompute_s = 0;
  };
  /// Time accounting of the stream an op runs on.
  Busy& busy(const Op& op) { return busy_[op.device * max_streams_ + op.stream]; }
  void record_stall(double t0, const Op& op, BufferId b, std::uint64_t bytes, std::size_t tier);
  bool can_defer() const { return streams_.size() == 1 && copies_in_flight_ == 0; }
  void flush();

  const PlatformSpec& platform_;
  const Trace& trace_;
  Policy& policy_;
  Recorder& recorder_;
  Liveness liveness_;
  MemoryState memory_;
  std::vector<double> durations_;
  std::vector<std::size_t> compute_devices_;  // the devices ops name (op_devices): hosts last
  std::size_t accelerators_ = 0;              // how many of them are compute devices
  Plan plan_;
  std::vector<Stream> streams_;

  std::vector<sg4::Host*> device_hosts_;  // by platform device index
  std::vector<sg4::Host*> tier_hosts_;    // by tier index
  std::vector<std::vector<bool>> routed_;  // tier x tier
  std::vector<sg4::SemaphorePtr> copy_slots_;  // device x {out, in}
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr changed_;
  int waiters_ = 0;

  std::vector<std::uint8_t> ready_;      // produced (or resident at start)
  std::vector<std::uint8_t> in_flight_;  // a copy of it is under way
  std::vector<std::uint8_t> free_on_arrival_;
  std::vector<std::uint8_t> dropped_;           // released before its last use
  std::vector<std::vector<OpId>> updaters_;     // per buffer: ops that update it in place
  std::vector<std::uint8_t> op_done_;           // ran (not counting recomputations)
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
  std::vector<Busy> busy_;  // per (compute device, stream)
  bool hooks_ = false;
  std::vector<Action> hook_actions_;
  std::map<std::pair<std::size_t, std::size_t>, std::pair<std::uint64_t, std::uint64_t>>
      traffic_;  // (from, to) tier -> (bytes, copies)
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

void Simulation::build_platform() {
  auto* zone = sg4::create_full_zone(platform_.name.empty() ? "platform" : platform_.name);
  for (const auto& d : platform_.devices) device_hosts_.push_back(zone->create_host(d.name, kHostSpeed));
  for (const auto& t : platform_.tiers) tier_hosts_.push_back(zone->create_host(t.name, 1.0));

  // Links, and each tier's own memory as a shared resource: a copy reads its source and
  // writes its destination at no more than their bandwidths, and copies into one host memory
  // share it. Routes (platform/routes.h) say which of them each copy crosses.
  std::vector<sg4::Link*> links;
  for (const auto& l : platform_.links) {
    sg4::Link* link = l.full_duplex ? zone->create_split_duplex_link(l.name, l.bandwidth_Bps)
                                    : zone->create_link(l.name, l.bandwidth_Bps);
    link->set_latency(l.latency_s);
    links.push_back(link);
  }
  std::vector<sg4::Link*> memory_port;
  for (const auto& t : platform_.tiers) {
    auto* port = zone->create_link(t.name + ".memory", t.bandwidth_Bps);
    port->set_latency(t.latency_s);
    memory_port.push_back(port);
  }
  const std::size_t n_tiers = platform_.tiers.size();
  routed_.assign(n_tiers, std::vector<bool>(n_tiers, false));
  const RouteTable routes = compute_routes(platform_);
  for (std::size_t src = 0; src < n_tiers; ++src)
    for (std::size_t dst = 0; dst < n_tiers; ++dst) {
      if (!routes[src][dst]) continue;
      std::vector<sg4::LinkInRoute> route;
      for (const RouteElement& e : routes[src][dst]->elements) {
        if (e.kind == RouteElement::Kind::tier) {
          route.emplace_back(memory_port[e.index]);
        } else if (platform_.links[e.index].full_duplex) {
          route.emplace_back(links[e.index], e.forward ? sg4::LinkInRoute::Direction::UP
                                                       : sg4::LinkInRoute::Direction::DOWN);
        } else {
          route.emplace_back(links[e.index]);
        }
      }
      zone->add_route(tier_hosts_[src]->get_netpoint(), tier_hosts_[dst]->get_netpoint(), nullptr,
                      nullptr, route, false);
      routed_[src][dst] = true;
    }
  zone->seal();
  for (const auto& d : platform_.devices)
    for (int dir = 0; dir < 2; ++dir) copy_slots_.push_back(sg4::Semaphore::create(d.copy_engines));
  mutex_ = sg4::Mutex::create();
  changed_ = sg4::ConditionVariable::create();
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
  // their first user (ops name devices by compute-device index), else of their own device.
  std::vector<std::size_t> home(trace_.buffers.size(), SIZE_MAX);
  for (const Op& op : trace_.ops) {
    std::size_t tier = *platform_.devices[compute_devices_[op.device]].operand_tier();
    for (const auto* list : {&op.inputs, &op.updates})
      for (BufferId b : *list)
        if (home[b] == SIZE_MAX) home[b] = tier;
  }
  // A plan may place some elsewhere (optimizer state kept in host memory or on NVMe).
  for (const InitialPlacement& p : plan_.placements) {
    if (p.buffer >= trace_.buffers.size() || p.tier >= platform_.tiers.size())
      throw InputError(fmt::format("policy {} places buffer {} in tier {}: no such buffer or tier",
                                   policy_.label(), p.buffer, p.tier));
    if (trace_.buffers[p.buffer].producer != kNoOp)
      throw InputError(fmt::format("policy {} places buffer '{}' at the start, but op '{}' makes it",
                                   policy_.label(), trace_.buffers[p.buffer].name,
                                   trace_.ops[trace_.buffers[p.buffer].producer].name));
    home[p.buffer] = p.tier;
  }
  for (const Buffer& b : trace_.buffers) {
    if (b.producer != kNoOp) continue;
    ready_[b.id] = 1;
    if (b.device >= compute_devices_.size())
      throw InputError(fmt::format("{}: buffer '{}' belongs to compute device {}, but platform '{}' "
                                   "has {} compute device(s)",
                                   trace_.name, b.name, b.device, platform_.name,
                                   compute_devices_.size()));
    const std::size_t tier = home[b.id] != SIZE_MAX
                                 ? home[b.id]
                                 : *platform_.devices[compute_devices_[b.device]].operand_tier();
    if (!memory_.allocate(b.id, tier, 0.0)) {
      Op none;
      none.name = "(start of iteration: resident buffers)";
      none.id = 0;
      report_oom(tier, b.bytes, none);
      return;
    }
  }
}

void Simulation::record_stall(double t0, const Op& op, BufferId b, std::uint64_t bytes,
                              std::size_t tier) {
  busy(op).stall_s += now_s() - t0;
  recorder_.record({EventKind::stall, t0, now_s(), op.device, op.stream, op.id, b, bytes, kNoId,
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

void Simulation::report_oom(std::size_t tier, std::uint64_t bytes, const Op& op) {
  if (stopped_) return;
  stopped_ = true;
  OomReport r;
  r.op = op.name;
  r.op_id = op.id;
  r.tier = platform_.tiers[tier].name;
  r.requested_bytes = bytes;
  r.allocated_bytes = memory_.usage(tier).allocated_bytes;
  r.capacity_bytes = memory_.usage(tier).capacity_bytes;
  r.largest_free_block = memory_.largest_free_block(tier);
  r.reason = memory_.failure_reason(tier, bytes);
  if (std::string why = policy_.oom_reason(); !why.empty())
    r.reason = r.reason.empty() ? why : r.reason + "; " + why;
  for (BufferId b : memory_.largest_resident(tier, kOomLiveBuffers))
    r.largest_live.push_back({trace_.buffers[b].name, trace_.buffers[b].category, trace_.buffers[b].bytes});
  summary_.status = "oom";
  summary_.oom = std::move(r);
  notify();
}

bool Simulation::allocate(std::size_t tier, std::uint64_t bytes, const Op& op,
                          const std::function<bool()>& attempt, CopyCause cause) {
  // The reader of a demand copy records its whole wait itself.
  auto stall = [&](double t0) {
    if (cause != CopyCause::demand && now_s() > t0) record_stall(t0, op, kNoId, bytes, tier);
  };
  std::vector<Action> actions;
  while (!stopped_) {
    if (attempt()) return true;
    actions.clear();
    policy_.on_alloc_failure(*this, AllocationFailure{tier, bytes, op.id}, actions);
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
      report_oom(tier, bytes, op);
      return false;
    }
    for (const Action& a : actions) apply(a);
    const double t0 = now_s();
    for (const Action& a : actions)
      while (in_flight_[a.buffer] && !stopped_) wait_for_change();
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
  if (in_flight_[b] || from == to) return;
  flush();
  if (from == Placement::kNowhere)
    throw InputError(fmt::format("policy {} moves buffer '{}', which is in no tier",
                                 policy_.label(), buf.name));
  if (!routed_[from][to])
    throw InputError(fmt::format("platform '{}' has no link from {} to {} (needed to move '{}')",
                                 platform_.name, platform_.tiers[from].name,
                                 platform_.tiers[to].name, buf.name));
  Op for_what;
  for_what.name = fmt::format("(copy of {} to {})", buf.name, platform_.tiers[to].name);
  for_what.id = current_op_;
  Allocation address;
  if (!allocate(to, buf.bytes, for_what, [&] {
        auto a = memory_.reserve_move(b, to, now_s());
        if (a) address = *a;
        return a.has_value();
      }, cause))
    return;
  in_flight_[b] = 1;
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
  sg4::Actor::create("copy", device_hosts_[owner], [this, b, from, to, address, owner, direction,
                                                    to_compute] {
    guarded([&] {
      auto slot = copy_slots_[2 * owner + direction];
      slot->acquire();
      const double t0 = now_s();
      const std::uint64_t bytes = trace_.buffers[b].bytes;
      sg4::Comm::sendto(tier_hosts_[from], tier_hosts_[to], bytes);
      const double t1 = now_s();
      slot->release();
      memory_.finish_move(b, to, address, t1);
      in_flight_[b] = 0;
      --copies_in_flight_;
      --leaving_[from];
      --arriving_[to];
      if (to_compute)
        summary_.swap_in_bytes += bytes;
      else
        summary_.swap_out_bytes += bytes;
      summary_.transfer_time_s += t1 - t0;
      auto& pair = traffic_[{from, to}];
      pair.first += bytes;
      ++pair.second;
      recorder_.record({to_compute ? EventKind::swap_in : EventKind::swap_out, t0, t1, owner,
                        static_cast<std::uint32_t>(direction), kNoOp, b, bytes,
                        static_cast<std::uint32_t>(from), static_cast<std::uint32_t>(to)});
      if (free_on_arrival_[b]) {
        free_on_arrival_[b] = 0;
        memory_.release(b, t1);
      }
      notify();
    });
  });
}

void Simulation::release(BufferId b) {
  if (in_flight_[b])
    free_on_arrival_[b] = 1;
  else
    memory_.release(b, now_s());
}

// An op reads what the in-place updates issued before it wrote: with several streams, one
// may still be under way elsewhere (a gradient accumulated on the GPU, read by a step on the
// host). Updaters are in issue order and few per buffer.
bool Simulation::update_pending(BufferId b, const Op& op) const {
  for (OpId u : updaters_[b]) {
    if (u >= op.id) break;
    if (!op_done_[u]) return true;
  }
  return false;
}

bool Simulation::ensure_resident(BufferId b, std::size_t tier, const Op& op) {
  const bool several = streams_.size() > 1;
  if (ready_[b] && !in_flight_[b] && memory_.resident(b, tier) && !(several && update_pending(b, op)))
    return true;  // the usual case
  double t0 = now_s();
  bool memory_wait = false;
  while (!stopped_) {
    if (several && update_pending(b, op)) {
      wait_for_change();
      t0 = now_s();  // waiting for another stream's work is a dependency, not a memory stall
    } else if (!ready_[b] || in_flight_[b]) {
      const bool produced = ready_[b] != 0;
      memory_wait |= in_flight_[b] != 0;
      wait_for_change();
      if (!produced) t0 = now_s();
    } else if (!memory_.resident(b, tier)) {
      if (memory_.placement(b).tier == Placement::kNowhere) {
        if (!dropped_[b])
          throw InputError(fmt::format("op '{}' reads buffer '{}', which was freed before its last use",
                                       op.name, trace_.buffers[b].name));
        remake(b, op);  // recompute time, not stall
        continue;
      }
      start_copy(b, tier, CopyCause::demand);  // the reader stalls for the whole copy
      memory_wait = true;
    } else {
      break;
    }
  }
  if (memory_wait && now_s() > t0) record_stall(t0, op, b, trace_.buffers[b].bytes, tier);
  return !stopped_;
}

void Simulation::run_op(const Op& op, std::uint32_t device_slot, std::uint32_t stream,
                        bool recompute) {
  const OpId caller = current_op_;
  current_op_ = op.id;
  if (hooks_ && !recompute) run_hook(&Policy::before_op, op.id);
  if (hooks_ && recompute) policy_.before_recompute(*this, op.id);
  const std::size_t tier = *platform_.devices[compute_devices_[device_slot]].operand_tier();
  for (const auto* list : {&op.inputs, &op.updates})
    for (BufferId b : *list)
      if (!ensure_resident(b, tier, op)) return;
  for (BufferId b : op.outputs) {
    // A recomputation remakes only what was dropped; the op's other outputs are alive or
    // already dead.
    if (recompute && !dropped_[b]) continue;
    // The clock is read inside: allocate() may wait for memory and retry later.
    if (!allocate(tier, trace_.buffers[b].bytes, op, [&] { return memory_.allocate(b, tier, now_s()); }))
      return;
  }
  // Workspace goes to the device's scratch tier (TPU VMEM/CMEM) when it fits there, else to
  // the compute tier.
  Allocation workspace_address;
  std::size_t workspace_tier = tier;
  if (op.workspace_bytes > 0) {
    const auto& scratch = platform_.devices[compute_devices_[device_slot]].scratch_tier;
    std::optional<Allocation> in_scratch;
    if (scratch)
      in_scratch = memory_.allocate_anonymous(*scratch, op.workspace_bytes, Category::workspace, now_s());
    if (in_scratch) {
      workspace_address = *in_scratch;
      workspace_tier = *scratch;
    } else if (!allocate(tier, op.workspace_bytes, op, [&] {
                 auto a = memory_.allocate_anonymous(tier, op.workspace_bytes, Category::workspace, now_s());
                 if (a) workspace_address = *a;
                 return a.has_value();
               })) {
      return;
    }
  }
  const double t0 = now_s();
  if (can_defer())
    deferred_s_ += durations_[op.id];
  else
    sg4::this_actor::execute(durations_[op.id] * kHostSpeed);
  const double t1 = now_s();
  if (recompute) {
    busy(op).recompute_s += t1 - t0;
    summary_.recompute_flops += op.flops;
  } else {
    busy(op).compute_s += t1 - t0;
    ++summary_.ops_run;
    op_done_[op.id] = 1;
  }
  recorder_.record({recompute ? EventKind::recompute : EventKind::compute, t0, t1, device_slot,
                    stream, op.id, kNoId, 0, kNoId, kNoId});
  if (op.workspace_bytes > 0)
    memory_.release_anonymous(workspace_tier, workspace_address, Category::workspace, t1);
  for (BufferId b : op.outputs) {
    ready_[b] = 1;
    dropped_[b] = 0;
  }
  notify();
  if (hooks_ && !recompute) run_hook(&Policy::after_op, op.id);
  if (hooks_ && recompute) policy_.after_recompute(*this, op.id);
  current_op_ = recompute ? caller : op.id;
}

std::vector<OpId> Simulation::remake_ops(BufferId b, OpId reader) const {
  // The producer, then the in-place updates the reader saw (an in-place ReLU after a BN).
  std::vector<OpId> ops{trace_.buffers[b].producer};
  for (OpId u : updaters_[b])
    if (u < reader) ops.push_back(u);
  return ops;
}

void Simulation::remake(BufferId b, const Op& reader) {
  // Iterative: walk down to a dropped buffer whose remaking needs nothing dropped, remake
  // it, and come back up. Depth is bounded by memory, not by the actor's stack.
  std::vector<std::pair<BufferId, OpId>> path{{b, reader.id}};
  while (!path.empty() && !stopped_) {
    const auto [cur, before] = path.back();
    if (!dropped_[cur]) {
      path.pop_back();
      continue;
    }
    if (trace_.buffers[cur].producer == kNoOp)
      throw InputError(fmt::format("policy {} dropped '{}', which has no producer to recompute it from",
                                   policy_.label(), trace_.buffers[cur].name));
    const auto ops = remake_ops(cur, before);
    std::optional<std::pair<BufferId, OpId>> missing;
    for (OpId p : ops) {
      for (const auto* list : {&trace_.ops[p].inputs, &trace_.ops[p].updates})
        for (BufferId in : *list)
          if (in != cur && dropped_[in] && !missing) missing = {{in, p}};
      if (missing) break;
    }
    if (missing) {
      path.push_back(*missing);
      continue;
    }
    for (OpId p : ops) {
      run_op(trace_.ops[p], reader.device, reader.stream, true);
      if (stopped_) return;
    }
    path.pop_back();
  }
}

void Simulation::drop(BufferId b) {
  if (trace_.buffers[b].producer == kNoOp)
    throw InputError(fmt::format("policy {} drops '{}', which has no producer to recompute it from",
                                 policy_.label(), trace_.buffers[b].name));
  dropped_[b] = 1;
  release(b);
}

void Simulation::evict(BufferId b, std::size_t to) {
  // A clean copy (ZeRO-Infinity's parameters, read from NVMe and never written back): its
  // space here is released and it is held in `to` again, at once. One in flight is left be.
  const std::size_t from = memory_.placement(b).tier;
  if (in_flight_[b] || from == to || from == Placement::kNowhere) return;
  memory_.release(b, now_s());
  Op for_what;
  for_what.name = fmt::format("(evicting {} to {})", trace_.buffers[b].name, platform_.tiers[to].name);
  for_what.id = current_op_;
  allocate(to, trace_.buffers[b].bytes, for_what, [&] { return memory_.allocate(b, to, now_s()); });
  notify();
}

void Simulation::run_hook(void (Policy::*hook)(const RuntimeView&, OpId, std::vector<Action>&),
                          OpId op) {
  hook_actions_.clear();
  (policy_.*hook)(*this, op, hook_actions_);
  for (const Action& a : hook_actions_) apply(a);
}

void Simulation::apply(const Action& a) {
  switch (a.kind) {
    case Action::Kind::swap_out: start_copy(a.buffer, a.to_tier); break;
    case Action::Kind::swap_in: start_copy(a.buffer, a.to_tier, CopyCause::prefetch); break;
    case Action::Kind::drop: drop(a.buffer); break;
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
      case StepKind::free:
        dropped_[step.id] = 0;  // dead now: a later re-run of its producer must not remake it
        release(step.id);
        break;
      case StepKind::swap_out:
      case StepKind::swap_in: start_copy(step.id, step.tier); break;
      case StepKind::drop: drop(step.id); break;
      case StepKind::evict: evict(step.id, step.tier); break;
      case StepKind::recompute: {
        const Op& op = trace_.ops[step.id];
        bool needed = false;
        for (BufferId b : op.outputs) needed |= dropped_[b] != 0;
        if (needed) run_op(op, s.device, s.stream, true);
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
  build_platform();
  for (std::size_t d : compute_devices_)
    max_streams_ = std::max(max_streams_, static_cast<std::uint32_t>(platform_.devices[d].streams));
  busy_.assign(compute_devices_.size() * max_streams_, Busy{});
  split_plan();
  place_initial_buffers();
  for (const Stream& s : streams_) {
    const std::size_t device = compute_devices_[s.device];
    sg4::Actor::create(fmt::format("{}.stream{}", platform_.devices[device].name, s.stream),
                       device_hosts_[device], [this, &s] { guarded([&] { run_stream(s); }); });
  }
  engine.run();
  if (error_) std::rethrow_exception(error_);

  summary_.iteration_time_s = sg4::Engine::get_clock();
  // The accelerator stream that computed longest speaks for the step (with one stream: that
  // stream); a host's offloaded work shows in the iteration time, not here.
  for (std::size_t i = 0; i < accelerators_ * max_streams_; ++i)
    if (const Busy& b = busy_[i]; b.compute_s > summary_.compute_time_s ||
        (b.compute_s == summary_.compute_time_s && b.stall_s > summary_.stall_time_s)) {
      summary_.compute_time_s = b.compute_s;
      summary_.stall_time_s = b.stall_s;
      summary_.recompute_time_s = b.recompute_s;
    }
  for (const auto& [tiers, moved] : traffic_)
    summary_.traffic.push_back({platform_.tiers[tiers.first].name, platform_.tiers[tiers.second].name,
                                moved.first, moved.second});
  for (std::size_t i = accelerators_ * max_streams_; i < busy_.size(); ++i)
    summary_.host_compute_time_s += busy_[i].compute_s;
  summary_.workload = trace_.name;
  summary_.description = trace_.description;
  summary_.platform = platform_.name;
  summary_.policy = policy_.label();
  summary_.ops_total = trace_.ops.size();
  for (std::size_t t = 0; t < platform_.tiers.size(); ++t)
    summary_.tiers.push_back({platform_.tiers[t].name, std::string(to_string(platform_.tiers[t].role)),
                              memory_.usage(t), memory_.allocator(t).tile_peaks()});
  return summary_;
}

}  // namespace

Summary simulate(const PlatformSpec& platform, const Trace& trace, Policy& policy,
                 Recorder& recorder) {
  Simulation sim(platform, trace, policy, recorder);
  return sim.run();
}

}  // namespace memsim
