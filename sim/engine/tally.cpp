#include "sim/engine/tally.h"

namespace memsim {

Tally::Tally(const Trace& trace, std::size_t devices, std::size_t accelerators, std::uint32_t streams)
    : trace_(trace), accelerators_(accelerators), streams_(streams), busy_(devices * streams) {}

void Tally::on_event(const Event& e) {
  const double d = e.end_s - e.start_s;
  switch (e.kind) {
    case EventKind::compute: {
      // An op's time is its own stream's, also when it runs where its reader does.
      const Op& op = trace_.ops[e.op];
      busy(op.device, op.stream).compute_s += d;
      ++ops_run_;
      break;
    }
    case EventKind::recompute: {
      const Op& op = trace_.ops[e.op];
      busy(op.device, op.stream).recompute_s += d;
      recompute_flops_ += op.flops;
      break;
    }
    case EventKind::stall: busy(e.device, e.lane).stall_s += d; break;
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
  for (std::size_t i = 0; i < accelerators_ * streams_; ++i)
    if (const Busy& b = busy_[i]; b.compute_s > s.compute_time_s ||
        (b.compute_s == s.compute_time_s && b.stall_s > s.stall_time_s)) {
      s.compute_time_s = b.compute_s;
      s.stall_time_s = b.stall_s;
      s.recompute_time_s = b.recompute_s;
    }
  for (std::size_t i = accelerators_ * streams_; i < busy_.size(); ++i)
    s.host_compute_time_s += busy_[i].compute_s;
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
