#include "sim/engine/tally.h"

#include <algorithm>

#include "sim/collectives/collectives.h"
#include "sim/workload/recomputed_ops.h"

namespace memsim {

Tally::Tally(const Trace& trace, std::size_t devices, std::size_t accelerators, std::uint32_t streams)
    : trace_(trace), accelerators_(accelerators), streams_(streams),
      model_flops_(accelerators, 0.0), hardware_flops_(accelerators, 0.0), rerun_(trace.ops.size(), 0) {
  // Per device, up to the last that runs an op: the others have no events (a symmetric run
  // on 16,384 GPUs runs one rank's ops), and their totals are zero.
  std::size_t used = 0;
  for (const Op& op : trace.ops) {
    if (!communicates_ && is_communication_kind(op.kind)) communicates_ = true;
    rerun_[op.id] = is_recomputed_op(op.name);
    used = std::max<std::size_t>(used, op.device + 1);
  }
  used = std::min(used, devices);
  busy_.resize(used * streams);
  if (communicates_) {
    computing_.resize(used);
    communicating_.resize(used);
    passes_.resize(used);
    collecting_.resize(used);
  }
}

void Tally::on_link_bytes(std::size_t link, bool forward, std::uint64_t bytes) {
  link_bytes_[link][forward ? 0 : 1] += bytes;
}

namespace {

// Sorted, merged intervals.
std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> v) {
  if (!std::is_sorted(v.begin(), v.end())) std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second)
      out.back().second = std::max(out.back().second, iv.second);
    else
      out.push_back(iv);
  }
  return out;
}

double length(const std::vector<std::pair<double, double>>& v) {
  double sum = 0;
  for (const auto& [a, b] : v) sum += b - a;
  return sum;
}

// The length of a's intervals that no interval of b covers (both merged).
double uncovered(const std::vector<std::pair<double, double>>& a,
                 const std::vector<std::pair<double, double>>& b) {
  double sum = 0;
  std::size_t j = 0;
  for (auto [lo, hi] : a) {
    while (j < b.size() && b[j].second <= lo) ++j;
    double at = lo;
    for (std::size_t k = j; k < b.size() && b[k].first < hi; ++k) {
      if (b[k].first > at) sum += b[k].first - at;
      at = std::max(at, b[k].second);
    }
    if (hi > at) sum += hi - at;
  }
  return sum;
}

}  // namespace

namespace {

// Appends [a, b) to intervals that merged() will merge: one that starts within the last
// is joined to it (the union, and so merged(), is the same), so a stream's back-to-back
// ops keep one interval, not one each (a million-op step).
void add_interval(std::vector<std::pair<double, double>>& v, double a, double b) {
  if (!v.empty() && a >= v.back().first && a <= v.back().second)
    v.back().second = std::max(v.back().second, b);
  else
    v.emplace_back(a, b);
}

}  // namespace

void Tally::on_event(const Event& e) {
  const double d = e.end_s - e.start_s;
  switch (e.kind) {
    case EventKind::compute: {
      // An op's time is its own stream's, also when it runs where its reader does.
      const Op& op = trace_.ops[e.op];
      Busy& b = busy(op.device, op.stream);
      if (rerun_[op.id]) {  // the workload's own recomputation: recompute time, as a policy's
        b.recompute_s += d;
        recompute_flops_ += op.flops;
      } else {
        b.compute_s += d;
      }
      if (op.device < accelerators_ && op.phase != Phase::optimizer) {
        hardware_flops_[op.device] += op.flops;
        if (!rerun_[op.id]) model_flops_[op.device] += op.flops;
      }
      add_interval(b.work, e.start_s, e.end_s);
      ++ops_run_;
      if (communicates_) {
        add_interval(computing_[op.device], e.start_s, e.end_s);
        if (op.phase != Phase::optimizer) {
          add_interval(passes_[op.device], e.start_s, e.end_s);
          passes_end_s_ = std::max(passes_end_s_, e.end_s);
        }
      }
      break;
    }
    case EventKind::recompute: {
      const Op& op = trace_.ops[e.op];
      Busy& b = busy(op.device, op.stream);
      b.recompute_s += d;
      add_interval(b.work, e.start_s, e.end_s);
      recompute_flops_ += op.flops;
      if (op.device < accelerators_) hardware_flops_[op.device] += op.flops;
      if (communicates_) {
        add_interval(computing_[op.device], e.start_s, e.end_s);
        add_interval(passes_[op.device], e.start_s, e.end_s);
        passes_end_s_ = std::max(passes_end_s_, e.end_s);
      }
      break;
    }
    case EventKind::comm: {
      const Op& op = trace_.ops[e.op];
      add_interval(communicating_[op.device], e.start_s, e.end_s);
      // A receive's time is mostly waiting for the stage before: a pipeline's bubble, not
      // the network's.
      if (op.kind != "send" && op.kind != "recv") add_interval(collecting_[op.device], e.start_s, e.end_s);
      ++ops_run_;
      if (op.device == 0) {
        auto& [count, bytes] = collectives_[op.kind];
        ++count;
        bytes += op.message_bytes;
      }
      break;
    }
    case EventKind::stall: {
      Busy& b = busy(e.device, e.lane);
      b.stall_s += d;
      add_interval(b.stalls, e.start_s, e.end_s);
      break;
    }
    case EventKind::swap_in:
    case EventKind::swap_out: {
      (e.kind == EventKind::swap_in ? swap_in_bytes_ : swap_out_bytes_) += e.bytes;
      transfer_time_s_ += d;
      auto& pair = traffic_[{e.src_tier, e.dst_tier}];
      pair.first += e.bytes;
      ++pair.second;
      break;
    }
  }
}

void Tally::fill(Summary& s, const PlatformSpec& platform) const {
  // The stream that worked longest (computed or recomputed) speaks for the step.
  const Busy* speaker = nullptr;
  std::size_t speaker_device = 0;
  double most = 0;
  for (std::size_t i = 0; i < std::min(accelerators_ * streams_, busy_.size()); ++i)
    if (const Busy& b = busy_[i]; b.compute_s + b.recompute_s > most ||
        (b.compute_s + b.recompute_s == most && b.stall_s > s.stall_time_s)) {
      most = b.compute_s + b.recompute_s;
      s.compute_time_s = b.compute_s;
      s.stall_time_s = b.stall_s;
      s.recompute_time_s = b.recompute_s;
      speaker = &b;
      speaker_device = i / streams_;
    }
  // A stream's stalls may overlap (a step of a runtime policy's replicas waits for several
  // copies at once, each recorded): the time it stalled is their union, not their sum.
  if (speaker) s.stall_time_s = length(merged(speaker->stalls));
  std::vector<std::pair<double, double>> host;
  for (std::size_t i = accelerators_ * streams_; i < busy_.size(); ++i) {
    s.host_compute_time_s += busy_[i].compute_s;
    host.insert(host.end(), busy_[i].work.begin(), busy_[i].work.end());
  }
  for (const auto& [tiers, moved] : traffic_)
    s.traffic.push_back({platform.tiers[tiers.first].name, platform.tiers[tiers.second].name,
                         moved.first, moved.second});
  double speaker_exposed_comm = 0;
  if (communicates_)
    for (std::size_t d = 0; d < accelerators_; ++d) {
      if (d >= passes_.size()) {  // ran nothing
        s.device_compute_s.push_back(0);
        s.device_exposed_comm_s.push_back(0);
        continue;
      }
      s.device_compute_s.push_back(length(merged(passes_[d])));
      // Communication this device waited for before the flush (not hidden by its compute).
      std::vector<std::pair<double, double>> before;
      for (auto [a, b] : collecting_[d])
        if (a < passes_end_s_) before.emplace_back(a, std::min(b, passes_end_s_));
      const auto computing = merged(computing_[d]);  // sorted once, used twice
      s.device_exposed_comm_s.push_back(uncovered(merged(before), computing));
      const auto comm = merged(communicating_[d]);
      const double busy_s = length(comm);
      const double exposed = uncovered(comm, computing);
      if (busy_s > s.comm_time_s || (busy_s == s.comm_time_s && exposed > s.exposed_comm_time_s)) {
        s.comm_time_s = busy_s;
        s.exposed_comm_time_s = exposed;
      }
      // The iteration line is one device's: with a pipeline the rank that communicated
      // longest is not the stream that speaks for the step, and its exposed communication
      // added to that stream's compute would make the line longer than the iteration.
      // Nor may it count again the time that stream stalled (waiting on memory while a
      // collective ran).
      if (speaker && d == speaker_device) {
        std::vector<std::pair<double, double>> hiding = computing_[d];
        hiding.insert(hiding.end(), speaker->stalls.begin(), speaker->stalls.end());
        speaker_exposed_comm = uncovered(comm, merged(hiding));
      }
    }
  if (communicates_ && speaker) s.exposed_comm_time_s = speaker_exposed_comm;
  // The rest of the step on the stream that speaks: exposed communication, host compute it
  // waited through (outside its own work, stalls and communication), then idle (waiting for
  // a copy or another device without a stall, or done before the end).
  const double rest = s.iteration_time_s - s.compute_time_s - s.stall_time_s - s.recompute_time_s -
                      s.exposed_comm_time_s;
  if (speaker && rest > 1e-9 * s.iteration_time_s) {  // not a rounding error of the sum
    std::vector<std::pair<double, double>> waited = speaker->work;
    waited.insert(waited.end(), speaker->stalls.begin(), speaker->stalls.end());
    if (communicates_)
      waited.insert(waited.end(), communicating_[speaker_device].begin(), communicating_[speaker_device].end());
    s.exposed_host_time_s = std::min(rest, uncovered(merged(host), merged(waited)));
    s.idle_time_s = rest - s.exposed_host_time_s;
  }
  s.passes_end_s = passes_end_s_;
  for (const auto& [kind, sent] : collectives_) s.collectives.push_back({kind, sent.first, sent.second});
  std::vector<std::pair<std::size_t, std::array<std::uint64_t, 2>>> carried(link_bytes_.begin(), link_bytes_.end());
  std::sort(carried.begin(), carried.end());  // in the platform's order
  for (const auto& [l, bytes] : carried) {
    const auto [fwd, bwd] = bytes;
    if (l >= platform.links.size() || (fwd == 0 && bwd == 0)) continue;
    const LinkSpec& spec = platform.links[l];
    LinkSummary ls{spec.name, spec.bandwidth_Bps, spec.full_duplex, fwd, bwd, 0};
    const double carried = spec.full_duplex ? static_cast<double>(std::max(fwd, bwd))
                                            : static_cast<double>(fwd + bwd);
    if (s.iteration_time_s > 0) ls.utilisation = carried / (spec.bandwidth_Bps * s.iteration_time_s);
    s.links.push_back(std::move(ls));
  }
  s.swap_in_bytes = swap_in_bytes_;
  s.swap_out_bytes = swap_out_bytes_;
  s.transfer_time_s = transfer_time_s_;
  s.recompute_flops = recompute_flops_;
  s.device_model_flops = model_flops_;
  s.device_hardware_flops = hardware_flops_;
  s.ops_run = ops_run_;
}

}  // namespace memsim
