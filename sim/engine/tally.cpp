#include "sim/engine/tally.h"

#include <algorithm>

namespace memsim {

Tally::Tally(const Trace& trace, std::size_t devices, std::size_t accelerators, std::uint32_t streams)
    : trace_(trace), accelerators_(accelerators), streams_(streams), busy_(devices * streams) {}

void Tally::on_event(const Event& e) {
  const double d = e.end_s - e.start_s;
  switch (e.kind) {
    case EventKind::compute: {
      // An op's time is its own stream's, also when it runs where its reader does.
      const Op& op = trace_.ops[e.op];
      Busy& b = busy(op.device, op.stream);
      b.compute_s += d;
      b.work.emplace_back(e.start_s, e.end_s);
      ++ops_run_;
      break;
    }
    case EventKind::recompute: {
      const Op& op = trace_.ops[e.op];
      Busy& b = busy(op.device, op.stream);
      b.recompute_s += d;
      b.work.emplace_back(e.start_s, e.end_s);
      recompute_flops_ += op.flops;
      break;
    }
    case EventKind::stall: {
      Busy& b = busy(e.device, e.lane);
      b.stall_s += d;
      b.stalls.emplace_back(e.start_s, e.end_s);
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

namespace {

using Spans = std::vector<std::pair<double, double>>;

// The union of `spans`, sorted and without overlaps.
Spans merged(Spans spans) {
  std::sort(spans.begin(), spans.end());
  Spans out;
  for (const auto& [a, b] : spans) {
    if (b <= a) continue;
    if (!out.empty() && a <= out.back().second)
      out.back().second = std::max(out.back().second, b);
    else
      out.emplace_back(a, b);
  }
  return out;
}

// How long `spans` (merged) cover outside `busy` (merged) within [0, end].
double outside(const Spans& spans, const Spans& busy, double end) {
  double total = 0;
  std::size_t k = 0;
  for (auto [a, b] : spans) {
    b = std::min(b, end);
    double at = a;
    while (k < busy.size() && busy[k].second <= at) ++k;
    for (std::size_t j = k; j < busy.size() && busy[j].first < b && at < b; ++j) {
      if (busy[j].first > at) total += busy[j].first - at;
      at = std::max(at, busy[j].second);
    }
    if (at < b) total += b - at;
  }
  return total;
}

}  // namespace

void Tally::fill(Summary& s, const PlatformSpec& platform, double iteration_time_s) const {
  const Busy* speaker = nullptr;
  for (std::size_t i = 0; i < accelerators_ * streams_; ++i)
    if (const Busy& b = busy_[i]; b.compute_s > s.compute_time_s ||
        (b.compute_s == s.compute_time_s && b.stall_s > s.stall_time_s)) {
      s.compute_time_s = b.compute_s;
      s.stall_time_s = b.stall_s;
      s.recompute_time_s = b.recompute_s;
      speaker = &b;
    }
  Spans host;
  for (std::size_t i = accelerators_ * streams_; i < busy_.size(); ++i) {
    s.host_compute_time_s += busy_[i].compute_s;
    host.insert(host.end(), busy_[i].work.begin(), busy_[i].work.end());
  }
  // The rest of the step on the stream that speaks: host compute it waited through, then
  // idle (waiting for a copy or another device without a stall, or done before the end).
  const double rest = iteration_time_s - s.compute_time_s - s.stall_time_s - s.recompute_time_s;
  if (speaker && rest > 1e-9 * iteration_time_s) {  // not a rounding error of the sum
    Spans busy = speaker->work;
    busy.insert(busy.end(), speaker->stalls.begin(), speaker->stalls.end());
    s.exposed_host_time_s = std::min(rest, outside(merged(host), merged(busy), iteration_time_s));
    s.idle_time_s = rest - s.exposed_host_time_s;
  }
  for (const auto& [tiers, moved] : traffic_)
    s.traffic.push_back({platform.tiers[tiers.first].name, platform.tiers[tiers.second].name,
                         moved.first, moved.second});
  s.swap_in_bytes = swap_in_bytes_;
  s.swap_out_bytes = swap_out_bytes_;
  s.transfer_time_s = transfer_time_s_;
  s.recompute_flops = recompute_flops_;
  s.ops_run = ops_run_;
}

}  // namespace memsim
