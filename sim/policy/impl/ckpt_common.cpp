#include "sim/policy/impl/ckpt_common.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/exec/replay.h"
#include "sim/workload/analysis.h"

namespace memsim::ckpt {
namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

enum class EntryKind : std::uint8_t {
  original,   // the op's own run: a compute step
  recompute,  // a recompute step
  lazy,       // remade by the engine when `target` reads it: no step, reads placed there
};

struct Entry {
  OpId op;
  EntryKind kind;
};

// Lays a schedule out as plan steps, running it on the residency machine in zero time
// (sim/exec/replay.h) to know what is resident after each step: the machine applies the
// engine's rules (remakes, re-runs of only what was dropped); the lowering decides where
// the frees and drops go.
class ScheduleLayout {
 public:
  ScheduleLayout(const Trace& trace, const std::vector<double>& durations)
      : t_(trace), durations_(durations), updaters_(updaters(trace)) {}

  Lowered run(const Schedule& schedule);

 private:
  void build_entries(const Schedule& schedule);
  void index_reads();
  void release_touched(std::size_t at, exec::Replayer& machine);
  std::size_t next_after(const std::vector<std::size_t>& positions, std::size_t at) const {
    auto it = std::upper_bound(positions.begin(), positions.end(), at);
    return it == positions.end() ? kNone : *it;
  }

  const Trace& t_;
  const std::vector<double>& durations_;
  Updaters updaters_;
  std::vector<Entry> entries_;                  // effective order
  std::vector<std::vector<std::size_t>> reads_;  // per buffer: entry indices reading it
  std::vector<std::vector<std::size_t>> made_;   // per buffer: entries remaking it
  std::vector<BufferId> touched_;
  Lowered out_;
};

void ScheduleLayout::build_entries(const Schedule& schedule) {
  // The sequence as the policy wrote it.
  std::vector<Entry> seq;
  seq.reserve(t_.ops.size());
  for (const Op& op : t_.ops) {
    for (OpId r : schedule.before[op.id]) {
      if (r >= op.id || t_.ops[r].phase != Phase::forward)
        throw std::logic_error(fmt::format("schedule recomputes '{}' before '{}': only an earlier "
                                           "forward op can run again",
                                           t_.ops[r].name, op.name));
      if (t_.ops[r].outputs.empty()) continue;  // in-place updates replay with their buffer
      bool updated = false;
      for (BufferId o : t_.ops[r].outputs) updated |= !updaters_[o].empty();
      seq.push_back({r, updated ? EntryKind::lazy : EntryKind::recompute});
    }
    seq.push_back({op.id, EntryKind::original});
  }
  // A lazy entry runs when its first reader after it needs one of its outputs: walking
  // backwards, anchor[b] is the first step that consumes b from here on.
  const std::size_t n = seq.size();
  std::vector<std::size_t> anchor(t_.buffers.size(), kNone), target(n, kNone);
  for (std::size_t q = n; q-- > 0;) {
    const Op& op = t_.ops[seq[q].op];
    if (seq[q].kind != EntryKind::lazy) {
      target[q] = q;
      for (BufferId b : op.reads()) anchor[b] = q;
      continue;
    }
    std::size_t at = kNone;
    for (BufferId o : op.outputs) at = std::min(at, anchor[o]);
    if (at == kNone) continue;  // nothing reads it again: not remade at all
    target[q] = at;
    const OpId reader = t_.ops[seq[at].op].id;
    auto pull = [&](const Op& o) {
      for (BufferId b : o.reads()) anchor[b] = std::min(anchor[b], at);
    };
    pull(op);
    for (BufferId o : op.outputs)
      for (OpId u : updaters_[o])
        if (u < reader) pull(t_.ops[u]);
  }
  // Effective order: lazy entries (and the in-place updates the engine replays with them)
  // just before their target.
  std::vector<std::vector<std::size_t>> lazy_at(n);
  for (std::size_t q = 0; q < n; ++q)
    if (seq[q].kind == EntryKind::lazy && target[q] != kNone) lazy_at[target[q]].push_back(q);
  entries_.reserve(n);
  for (std::size_t q = 0; q < n; ++q) {
    if (seq[q].kind == EntryKind::lazy) continue;
    for (std::size_t l : lazy_at[q]) {
      const Op& op = t_.ops[seq[l].op];
      entries_.push_back({op.id, EntryKind::lazy});
      std::vector<OpId> replay;
      for (BufferId o : op.outputs)
        for (OpId u : updaters_[o])
          if (u < seq[q].op) replay.push_back(u);
      std::sort(replay.begin(), replay.end());
      replay.erase(std::unique(replay.begin(), replay.end()), replay.end());
      for (OpId u : replay) entries_.push_back({u, EntryKind::lazy});
    }
    entries_.push_back(seq[q]);
  }
}

void ScheduleLayout::index_reads() {
  reads_.assign(t_.buffers.size(), {});
  made_.assign(t_.buffers.size(), {});
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Op& op = t_.ops[entries_[i].op];
    for (BufferId b : op.reads())
      if (reads_[b].empty() || reads_[b].back() != i) reads_[b].push_back(i);
    if (entries_[i].kind != EntryKind::original)
      for (BufferId o : op.outputs) made_[o].push_back(i);
  }
}

void ScheduleLayout::release_touched(std::size_t at, exec::Replayer& machine) {
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  for (BufferId b : touched_) {
    const Buffer& buf = t_.buffers[b];
    if (!machine.resident(b) || buf.persistent) continue;
    const std::size_t next = next_after(reads_[b], at);
    StepKind kind;
    if (next == kNone) {
      kind = StepKind::free;
    } else if (buf.producer != kNoOp && next_after(made_[b], at) < next) {
      kind = StepKind::drop;
    } else {
      continue;
    }
    out_.plan.steps.push_back({kind, b, 0});
    machine.step(out_.plan.steps.back());
  }
  touched_.clear();
}

Lowered ScheduleLayout::run(const Schedule& schedule) {
  // The schedules recompute within one forward and one backward pass per device. A step of
  // several (gradient accumulation, a pipeline's micro-batches) is refused, not misplanned.
  std::map<std::uint32_t, OpId> last_backward;
  for (const Op& op : t_.ops) {
    if (op.phase == Phase::backward) last_backward[op.device] = op.id;
    if (op.phase != Phase::forward) continue;
    if (auto it = last_backward.find(op.device); it != last_backward.end())
      throw InputError(fmt::format(
          "this recomputation schedule plans one forward and one backward pass per device, and the step runs "
          "several (micro-batches): forward op '{}' comes after backward op '{}'. Recompute inside the model "
          "instead (workload.attention_impl: selective), or run one micro-batch",
          op.name, t_.ops[it->second].name));
  }
  build_entries(schedule);
  index_reads();
  exec::Replayer machine(t_, durations_, "(planned schedule)");
  machine.start();
  machine.record_touched(&touched_);
  // Never read: the engine's `none` frees it after the first op; so do we.
  std::vector<BufferId> unread;
  for (const Buffer& b : t_.buffers)
    if (b.producer == kNoOp && !b.persistent && reads_[b.id].empty()) unread.push_back(b.id);

  out_.plan.steps.reserve(entries_.size() + 2 * t_.buffers.size());
  bool first = true;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.kind == EntryKind::lazy) continue;
    machine.set_mark(i);
    const Op& op = t_.ops[e.op];
    if (e.kind == EntryKind::recompute) {
      if (!machine.needs_recompute(op)) continue;
      out_.plan.steps.push_back({StepKind::recompute, op.id, 0});
    } else {
      out_.plan.steps.push_back({StepKind::compute, op.id, 0});
    }
    machine.step(out_.plan.steps.back());
    if (e.kind == EntryKind::original && first) {
      touched_.insert(touched_.end(), unread.begin(), unread.end());
      first = false;
    }
    release_touched(i, machine);
  }
  const exec::Replayed r = machine.result();
  out_.peak_bytes = r.peak_bytes;
  out_.recompute_ops = r.recompute_ops;
  out_.recompute_s = r.recompute_s;
  // The peak's op: the first op run for the first time from the peak's entry on.
  const auto& marks = machine.peak_marks();
  out_.peak_op.assign(out_.peak_bytes.size(), kNoOp);
  for (std::size_t d = 0; d < marks.size() && d < out_.peak_op.size(); ++d)
    for (std::size_t i = marks[d]; i < entries_.size(); ++i)
      if (entries_[i].kind == EntryKind::original) {
        out_.peak_op[d] = entries_[i].op;
        break;
      }
  return std::move(out_);
}

}  // namespace

std::uint64_t Lowered::max_peak() const {
  std::uint64_t m = 0;
  for (auto p : peak_bytes) m = std::max(m, p);
  return m;
}

Lowered lower(const Trace& trace, const Schedule& schedule, const std::vector<double>& durations) {
  return ScheduleLayout(trace, durations).run(schedule);
}

Lowered replay(const Trace& trace, const Plan& plan, const std::vector<double>& durations) {
  const exec::Replayed r = exec::replay(trace, plan, durations);
  Lowered out;
  out.plan = plan;
  out.peak_bytes = r.peak_bytes;
  out.recompute_ops = r.recompute_ops;
  out.recompute_s = r.recompute_s;
  return out;
}

std::uint32_t device_count(const Trace& trace) {
  std::uint32_t n = 1;
  for (const Op& op : trace.ops) n = std::max(n, op.device + 1);
  return n;
}

void add_chain_schedule(const Stages& stages, const std::vector<schedule::ChainStep>& actions,
                        Schedule& out) {
  using schedule::ChainAction;
  const std::size_t n = stages.count();
  std::size_t i = 0;
  for (; i < actions.size() && actions[i].action == ChainAction::advance; ++i)
    if (actions[i].step != i + 1)
      throw std::logic_error("chain schedule: the first sweep does not advance through the stages in order");
  if (i != n) throw std::logic_error("chain schedule: the first sweep does not reach the last stage");
  std::vector<OpId> pending;
  for (; i < actions.size(); ++i) {
    const auto& a = actions[i];
    if (a.action == ChainAction::advance) {
      const auto ops = stages.ops(a.step);
      pending.insert(pending.end(), ops.begin(), ops.end());
    } else if (const OpId at = stages.group_first[a.step]; at != kNoOp) {
      auto& list = out.before[at];
      list.insert(list.end(), pending.begin(), pending.end());
      pending.clear();
    }
  }
}

bool fits(const Lowered& l, const std::vector<std::uint64_t>& caps) {
  for (std::size_t d = 0; d < l.peak_bytes.size(); ++d)
    if (d < caps.size() && l.peak_bytes[d] > caps[d]) return false;
  return true;
}

Fitted fit_slots(const Trace& trace, std::uint32_t lo, std::uint32_t hi, std::uint32_t start,
                 const std::function<Schedule(std::uint32_t)>& make,
                 const std::vector<std::uint64_t>& caps, const std::vector<double>& durations) {
  auto attempt = [&](std::uint32_t s) {
    Fitted f;
    f.slots = s;
    f.lowered = lower(trace, make(s), durations);
    f.fits = fits(f.lowered, caps);
    return f;
  };
  start = std::clamp(start, lo, hi);
  // Gallop away from `start` until the answer is bracketed: few slots make long schedules,
  // so the search never goes much below the answer.
  Fitted f = attempt(start);
  std::optional<Fitted> good;
  std::uint32_t bad = hi + 1;  // the least slot count known not to fit
  if (f.fits) {
    good = std::move(f);
    for (std::uint64_t step = 1; good->slots < hi; step *= 2) {
      const auto s = static_cast<std::uint32_t>(std::min<std::uint64_t>(hi, good->slots + step));
      Fitted g = attempt(s);
      if (!g.fits) {
        bad = s;
        break;
      }
      good = std::move(g);
    }
  } else {
    bad = start;
    Fitted least = std::move(f);
    for (std::uint64_t step = 1; bad > lo; step *= 2) {
      // Never below half the last count that failed (the fewest slots are the slowest).
      const std::uint64_t down = std::max<std::uint64_t>(1, std::min<std::uint64_t>(step, bad / 2));
      const auto s = static_cast<std::uint32_t>(bad > lo + down ? bad - down : lo);
      Fitted g = attempt(s);
      if (g.fits) {
        good = std::move(g);
        break;
      }
      bad = s;
      least = std::move(g);
    }
    if (!good) return least;  // nothing fits: the fewest slots, the least memory
  }
  while (bad - good->slots > 1) {
    const std::uint32_t mid = good->slots + (bad - good->slots) / 2;
    Fitted g = attempt(mid);
    if (g.fits)
      good = std::move(g);
    else
      bad = mid;
  }
  return std::move(*good);
}


// ---------------------------------------------------------------------------------------
// Stages of a chain-shaped forward

namespace {

struct Cuts {
  std::vector<std::size_t> begin;  // stage starts, then the tail start
};

// Greedy cuts over forward positions [0, end): a cut at k is taken when everything that
// crosses it (made before k, read at or after k, before `end`) was made since the last cut.
// `buffers`: the device's, in increasing order (the others are made by none of its ops).
Cuts greedy_cuts(const std::vector<std::size_t>& made_at, const std::vector<std::vector<std::size_t>>& read_at,
                 const std::vector<BufferId>& buffers, std::size_t end) {
  // For each buffer: [made + 1, last read before end] is where it crosses.
  struct Span {
    std::size_t from, to, made;
  };
  std::vector<Span> spans;
  for (BufferId b : buffers) {
    if (made_at[b] == kNone || made_at[b] >= end) continue;
    const auto& r = read_at[b];
    auto it = std::lower_bound(r.begin(), r.end(), end);
    if (it == r.begin()) continue;
    const std::size_t last = *(it - 1);
    if (last <= made_at[b]) continue;
    spans.push_back({made_at[b] + 1, last, made_at[b]});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.from < b.from; });
  using Item = std::pair<std::size_t, std::size_t>;  // (made, to)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> open;
  Cuts c;
  c.begin.push_back(0);
  std::size_t next = 0, prev = 0;
  for (std::size_t k = 1; k < end; ++k) {
    while (next < spans.size() && spans[next].from <= k) {
      open.push({spans[next].made, spans[next].to});
      ++next;
    }
    while (!open.empty() && open.top().second < k) open.pop();
    // Expired spans deeper in the heap do not matter: only the minimum is compared, and a
    // live minimum is exact once the expired ones above it are gone.
    if (open.empty() || open.top().first >= prev) {
      c.begin.push_back(k);
      prev = k;
    }
  }
  c.begin.push_back(end);
  return c;
}

// What find_stages marks per buffer: sized to the trace once for all devices, and cleared
// after each over that device's buffers only.
struct StageMarks {
  std::vector<std::size_t> made_at;
  std::vector<std::vector<std::size_t>> read_at;
  std::vector<std::uint8_t> read_back, in_state;
  std::vector<std::uint32_t> stage_of;
  explicit StageMarks(const Trace& trace)
      : made_at(trace.buffers.size(), kNone),
        read_at(trace.buffers.size()),
        read_back(trace.buffers.size(), 0),
        in_state(trace.buffers.size(), 0),
        stage_of(trace.buffers.size(), 0) {}
  void clear(const std::vector<BufferId>& buffers) {
    for (BufferId b : buffers) {
      made_at[b] = kNone;
      std::vector<std::size_t>().swap(read_at[b]);
      read_back[b] = in_state[b] = 0;
      stage_of[b] = 0;
    }
  }
};

Stages device_stages(const Trace& trace, const DeviceOps& ops, std::uint32_t device, const std::string& policy,
                     StageMarks& marks) {
  Stages st;
  st.device = device;
  if (device < ops.forward.size()) st.forward = ops.forward[device];
  static const std::vector<OpId> kNoOps;
  const std::vector<OpId>& later = device < ops.later.size() ? ops.later[device] : kNoOps;
  const std::vector<BufferId> buffers = ops.buffers(trace, device);
  struct Clear {
    StageMarks& marks;
    const std::vector<BufferId>& buffers;
    ~Clear() { marks.clear(buffers); }
  } clear_after{marks, buffers};
  auto& [made_at, read_at, read_back, in_state, stage_of] = marks;
  const std::size_t f = st.forward.size();
  const std::string where = fmt::format("{}: {} needs a chain-shaped trace", trace.name, policy);
  if (f < 2) throw InputError(fmt::format("{}, and its forward has {} op(s)", where, f));

  for (std::size_t q = 0; q < f; ++q)
    for (BufferId b : trace.ops[st.forward[q]].outputs)
      if (!trace.buffers[b].persistent) made_at[b] = q;
  for (std::size_t q = 0; q < f; ++q) {
    const Op& op = trace.ops[st.forward[q]];
    for (BufferId b : op.reads())
      if (made_at[b] != kNone && made_at[b] < q && (read_at[b].empty() || read_at[b].back() != q))
        read_at[b].push_back(q);
  }
  // The tail: a few ops at the end (the loss, a stack of every step's output) that may read
  // anything. Take the one leaving the most stages; a later start wins a tie.
  Cuts best;
  const std::size_t lowest = f > 64 ? f - 64 : 1;
  for (std::size_t end = f; end >= lowest; --end) {
    Cuts c = greedy_cuts(made_at, read_at, buffers, end);
    if (c.begin.size() > best.begin.size()) best = std::move(c);
  }
  st.begin = std::move(best.begin);
  // Stages at the end whose outputs no backward op reads (the loss) join the tail: keeping
  // their inputs is free, re-running them to remake those inputs would not be.
  for (OpId o : later)
    for (BufferId b : trace.ops[o].reads()) read_back[b] = 1;
  while (st.count() > 1) {
    bool read = false;
    for (std::size_t q = st.begin[st.count() - 1]; q < st.begin.back() && !read; ++q)
      for (BufferId b : trace.ops[st.forward[q]].outputs) read |= read_back[b] && made_at[b] != kNone;
    if (read) break;
    st.begin.pop_back();
  }
  if (st.count() < 2)
    throw InputError(fmt::format("{}: no point of its forward is crossed only by what the op "
                                 "before it made (every forward op there is its own stage in a "
                                 "chain); use checkpoint-sqrt or checkmate",
                                 where));

  // Check the backward against the stages; where it interleaves stages or reads far back
  // (the two branches of a residual block cut in two), merge the stages it spans and check
  // again.
  std::string first_violation;
  for (;;) {
    const std::size_t stages = st.count();
    if (stages < 2)
      throw InputError(fmt::format("{}: {}; one stage is left once the stages it spans are merged",
                                   where, first_violation));
    // Stage of each buffer the stages made (0: none): the stage that wrote it last, for an
    // in-place update (a residual add, a ReLU) makes the version later ops read. The state
    // x_s: what stage s wrote last that forward ops after it read (the tail included).
    for (BufferId b : buffers) stage_of[b] = in_state[b] = 0;
    st.state_bytes.assign(stages + 1, 0);
    st.internal_bytes.assign(stages + 1, 0);
    // (state_bytes: everything stage s writes that is read after it, in-place updates of
    // what an earlier stage made included.)
    std::vector<BufferId> written;
    for (std::size_t s = 1; s <= stages; ++s) {
      written.clear();
      for (std::size_t q = st.begin[s - 1]; q < st.begin[s]; ++q) {
        const Op& op = trace.ops[st.forward[q]];
        for (const auto* list : {&op.outputs, &op.updates})
          for (BufferId b : *list)
            if (made_at[b] != kNone) {
              stage_of[b] = static_cast<std::uint32_t>(s);
              written.push_back(b);
            }
      }
      std::sort(written.begin(), written.end());
      written.erase(std::unique(written.begin(), written.end()), written.end());
      for (BufferId b : written)
        if (!read_at[b].empty() && read_at[b].back() >= st.begin[s]) st.state_bytes[s] += trace.buffers[b].bytes;
    }
    for (BufferId b : buffers) {
      const std::uint32_t s = stage_of[b];
      if (s > 0 && !read_at[b].empty() && read_at[b].back() >= st.begin[s]) in_state[b] = 1;
    }

    // Backward groups, in issue order G_T .. G_1.
    st.group_first.assign(stages + 1, kNoOp);
    st.reads_state_only = true;
    std::vector<std::vector<BufferId>> group_reads(stages + 1);
    std::uint32_t last_need = std::numeric_limits<std::uint32_t>::max();
    OpId last_op = kNoOp;
    std::uint32_t merge_lo = 0, merge_hi = 0;
    std::string violation;
    for (OpId o : later) {
      const Op& op = trace.ops[o];
      std::uint32_t need = 0;
      for (BufferId b : op.reads()) need = std::max(need, stage_of[b]);
      if (need == 0) continue;
      if (need > last_need) {
        violation = fmt::format("backward op '{}' needs what forward stage {} made after '{}' "
                                "needed stage {} (the backward must walk the stages back in order)",
                                op.name, need, trace.ops[last_op].name, last_need);
        merge_lo = last_need;
        merge_hi = need;
        break;
      }
      for (BufferId b : op.reads()) {
        const std::uint32_t s = stage_of[b];
        if (s == 0 || !violation.empty()) continue;
        if (s != need && !(s + 1 == need && in_state[b])) {
          violation = fmt::format("backward op '{}' reads '{}' (made in forward stage {} by "
                                  "'{}') together with what stage {} made; a chain's backward "
                                  "reads only its own stage and the state before it",
                                  op.name, trace.buffers[b].name, s,
                                  trace.ops[trace.buffers[b].producer].name, need);
          merge_lo = s;
          merge_hi = need;
          continue;
        }
        group_reads[need].push_back(b);
        // The last stage's backward runs right after the forward, with all it made at hand.
        if (need < stages && ((s == need && !in_state[b]) || s + 1 == need))
          st.reads_state_only = false;
      }
      if (!violation.empty()) break;
      if (st.group_first[need] == kNoOp) st.group_first[need] = op.id;
      last_need = need;
      last_op = op.id;
    }
    if (!violation.empty()) {
      if (first_violation.empty()) first_violation = violation;
      // Stages merge_lo..merge_hi become one: drop the boundaries between them.
      st.begin.erase(st.begin.begin() + merge_lo, st.begin.begin() + merge_hi);
      continue;
    }
    for (std::size_t s = 1; s <= stages; ++s) {
      auto& r = group_reads[s];
      for (std::size_t q = st.begin[s - 1]; q < st.begin[s]; ++q)
        for (BufferId b : trace.ops[st.forward[q]].outputs)
          if (in_state[b] && stage_of[b] == s) r.push_back(b);
      std::sort(r.begin(), r.end());
      r.erase(std::unique(r.begin(), r.end()), r.end());
      for (BufferId b : r) st.internal_bytes[s] += trace.buffers[b].bytes;
    }
    return st;
  }
}


}  // namespace

DeviceOps::DeviceOps(const Trace& trace) {
  const std::uint32_t devices = device_count(trace);
  forward.resize(devices);
  later.resize(devices);
  for (const Op& op : trace.ops) (op.phase == Phase::forward ? forward : later)[op.device].push_back(op.id);
}

std::vector<BufferId> DeviceOps::buffers(const Trace& trace, std::uint32_t device) const {
  std::vector<BufferId> out;
  if (device >= forward.size()) return out;
  for (const auto* ops : {&forward[device], &later[device]})
    for (OpId o : *ops) {
      const Op& op = trace.ops[o];
      for (const auto* list : {&op.inputs, &op.outputs, &op.updates}) out.insert(out.end(), list->begin(), list->end());
    }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Stages find_stages(const Trace& trace, std::uint32_t device, const std::string& policy) {
  StageMarks marks(trace);
  return device_stages(trace, DeviceOps(trace), device, policy, marks);
}

std::vector<Stages> find_stages(const Trace& trace, const std::string& policy) {
  const DeviceOps ops(trace);
  StageMarks marks(trace);
  std::vector<Stages> out;
  for (std::uint32_t d = 0; d < ops.forward.size(); ++d) out.push_back(device_stages(trace, ops, d, policy, marks));
  return out;
}

}  // namespace memsim::ckpt
