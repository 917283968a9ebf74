#include "sim/exec/replay.h"

#include <algorithm>
#include <limits>

namespace memsim::exec {
namespace {

constexpr std::uint32_t kNowhere = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint32_t kAway = kNowhere - 1;  // in a tier that is not a compute tier

std::uint32_t device_count(const Trace& trace) {
  std::uint32_t n = 1;
  for (const Op& op : trace.ops) n = std::max(n, op.device + 1);
  return n;
}

}  // namespace

// Tiers are device slots here: the compute tier of device d is "tier" d.
class Replayer::ZeroTime final : public Memory {
 public:
  ZeroTime(const Trace& trace, const std::vector<double>& durations)
      : trace_(trace),
        durations_(durations),
        where_(trace.buffers.size(), kNowhere),
        live_(device_count(trace), 0),
        peak_(live_.size(), 0),
        marks_(live_.size(), kNoMark) {}

  static constexpr std::size_t kNoMark = std::numeric_limits<std::size_t>::max();

  bool resident(BufferId b, std::size_t tier) const override { return where_[b] == tier; }
  bool placed(BufferId b) const override { return where_[b] != kNowhere; }
  void copy_in(BufferId b, std::size_t tier) override { take(b, static_cast<std::uint32_t>(tier)); }
  bool allocate(BufferId b, const Site& site, const Op&) override {
    take(b, site.device);
    return true;
  }
  bool allocate_workspace(const Op& op, const Site& site, Workspace&) override {
    raise(site.device, live_[site.device] + op.workspace_bytes, total_ + op.workspace_bytes);
    return true;
  }
  void release_workspace(const Op&, const Workspace&) override {}
  // In zero time nothing runs meanwhile: an op that would wait runs after what it waits for.
  void wait_until(Condition, std::uint32_t) override {
    throw PolicyError("a plan runs an op before an op it waits for (waits_for); in one stream "
                      "of issue order nothing else would run meanwhile");
  }
  void execute(const Op& op, const Site&, bool recompute) override {
    if (recompute) {
      ++recompute_ops_;
      if (!durations_.empty()) recompute_s_ += durations_[op.id];
    }
    if (observer_) observer_(op, live_);
  }
  void release(BufferId b) override {
    const std::uint32_t w = where_[b];
    if (w == kNowhere) return;
    if (w != kAway) {
      live_[w] -= trace_.buffers[b].bytes;
      total_ -= trace_.buffers[b].bytes;
    }
    where_[b] = kNowhere;
  }

  /// b into device d's compute tier (from nowhere, or from elsewhere).
  void take(BufferId b, std::uint32_t d) {
    if (where_[b] == d) return;
    where_[b] = d;
    live_[d] += trace_.buffers[b].bytes;
    total_ += trace_.buffers[b].bytes;
    raise(d, live_[d], total_);
    if (touched_) touched_->push_back(b);
  }
  /// b out of the compute tiers, held elsewhere.
  void send_away(BufferId b) {
    if (where_[b] == kNowhere || where_[b] == kAway) return;
    release(b);
    where_[b] = kAway;
  }

  void raise(std::uint32_t d, std::uint64_t device_bytes, std::uint64_t total_bytes) {
    if (device_bytes > peak_[d]) {
      peak_[d] = device_bytes;
      marks_[d] = mark_;
    }
    total_peak_ = std::max(total_peak_, total_bytes);
  }

  const Trace& trace_;
  const std::vector<double>& durations_;
  std::vector<std::uint32_t> where_;
  std::vector<std::uint64_t> live_, peak_;
  std::vector<std::size_t> marks_;
  std::uint64_t total_ = 0, total_peak_ = 0;
  std::uint64_t recompute_ops_ = 0;
  double recompute_s_ = 0;
  std::size_t mark_ = kNoMark;
  std::vector<BufferId>* touched_ = nullptr;
  OpObserver observer_;
};

std::uint64_t Replayed::max_peak() const {
  std::uint64_t m = 0;
  for (auto p : peak_bytes) m = std::max(m, p);
  return m;
}

Replayer::Replayer(const Trace& trace, const std::vector<double>& durations, std::string who)
    : memory_(std::make_unique<ZeroTime>(trace, durations)),
      residency_(std::make_unique<Residency<ZeroTime>>(trace, *memory_, std::move(who))),
      trace_(trace) {}

Replayer::~Replayer() = default;

void Replayer::start(const std::vector<InitialPlacement>& placements) {
  const auto slots = start_slots(trace_);
  std::vector<std::uint8_t> elsewhere(trace_.buffers.size(), 0);
  for (const InitialPlacement& p : placements)
    if (p.buffer < elsewhere.size()) elsewhere[p.buffer] = 1;
  for (const Buffer& b : trace_.buffers) {
    if (b.producer != kNoOp) continue;
    residency_->present_at_start(b.id);
    if (elsewhere[b.id])
      memory_->where_[b.id] = kAway;
    else if (slots[b.id] < memory_->live_.size())
      memory_->take(b.id, slots[b.id]);
  }
}

void Replayer::step(const Step& s) {
  switch (s.kind) {
    case StepKind::compute: {
      const Op& op = trace_.ops[s.id];
      device_ = op.device;
      residency_->run(op, Site{op.device, op.stream, op.device});
      break;
    }
    case StepKind::recompute: {
      const Op& op = trace_.ops[s.id];
      if (residency_->needs_recompute(op)) residency_->run(op, Site{device_, 0, device_}, true);
      break;
    }
    case StepKind::free: residency_->free(s.id); break;
    case StepKind::drop: residency_->drop(s.id); break;
    case StepKind::swap_out:
    case StepKind::evict: memory_->send_away(s.id); break;
    case StepKind::swap_in: {
      // Into the compute tier of the device that holds it: where it was made or first read.
      if (home_.empty()) {
        home_.assign(trace_.buffers.size(), kNowhere);
        for (const Op& op : trace_.ops)
          for (const auto* list : {&op.outputs, &op.inputs, &op.updates})
            for (BufferId b : *list)
              if (home_[b] == kNowhere) home_[b] = op.device;
        for (const Buffer& b : trace_.buffers)
          if (home_[b.id] == kNowhere) home_[b.id] = b.device;
      }
      const std::uint32_t d = home_[s.id];
      if (memory_->placed(s.id) && d < memory_->live_.size()) memory_->take(s.id, d);
      break;
    }
  }
}

bool Replayer::needs_recompute(const Op& op) const { return residency_->needs_recompute(op); }

bool Replayer::resident(BufferId b) const {
  const std::uint32_t w = memory_->where_[b];
  return w != kNowhere && w != kAway;
}

void Replayer::record_touched(std::vector<BufferId>* touched) {
  memory_->touched_ = touched;
  residency_->record_reads(touched);
}
void Replayer::set_mark(std::size_t mark) { memory_->mark_ = mark; }
const std::vector<std::size_t>& Replayer::peak_marks() const { return memory_->marks_; }
void Replayer::observe(OpObserver observer) { memory_->observer_ = std::move(observer); }

Replayed Replayer::result() const {
  Replayed r;
  r.peak_bytes = memory_->peak_;
  r.total_peak_bytes = memory_->total_peak_;
  r.recompute_ops = memory_->recompute_ops_;
  r.recompute_s = memory_->recompute_s_;
  return r;
}

Replayed replay(const Trace& trace, const Plan& plan, const std::vector<double>& durations,
                const OpObserver& observer) {
  Replayer r(trace, durations, "(replay)");
  if (observer) r.observe(observer);
  r.start(plan.placements);
  for (const Step& s : plan.steps) r.step(s);
  return r.result();
}

std::uint64_t baseline_peak_bytes(const Trace& trace) {
  return replay(trace, plan_free_at_last_use(trace, compute_liveness(trace))).total_peak_bytes;
}

std::uint64_t keep_all_peak_bytes(const Trace& trace) {
  Plan plan;
  plan.steps.reserve(trace.ops.size());
  for (const Op& op : trace.ops) plan.steps.push_back({StepKind::compute, op.id, 0});
  return replay(trace, plan).total_peak_bytes;
}

}  // namespace memsim::exec
