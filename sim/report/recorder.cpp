#include "sim/report/recorder.h"

namespace memsim {

std::string_view to_string(EventKind k) {
  switch (k) {
    case EventKind::compute: return "compute";
    case EventKind::recompute: return "recompute";
    case EventKind::swap_out: return "swap_out";
    case EventKind::swap_in: return "swap_in";
    case EventKind::stall: return "stall";
    case EventKind::comm: return "comm";
  }
  return "?";
}

void Recorder::on_memory_change(std::size_t tier, const TierUsage& usage, double now_s) {
  peak_live_.on_memory_change(tier, usage);
  if (!keep_samples_) return;
  MemorySample s;
  s.time_s = now_s;
  s.tier = static_cast<std::uint32_t>(tier);
  s.allocated_bytes = usage.allocated_bytes;
  s.reserved_bytes = usage.reserved_bytes;
  s.by_category = usage.by_category;
  samples_.push_back(s);
}

void Recorder::reserve(std::size_t events, std::size_t samples) {
  events_.reserve(events);
  if (keep_samples_) samples_.reserve(samples);
}

}  // namespace memsim
