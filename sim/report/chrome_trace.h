#pragma once
// trace.json (`memsim run --trace-format json`): the run in Chrome trace event format, for
// chrome://tracing, speedscope and Perfetto. What it shows is trace.pftrace's
// (sim/report/trace_layout.h):
//
//   a process per device      threads: stream0.. (compute, recompute, stalls as `X` slices),
//                             copy_out / copy_in (one thread per busy copy engine)
//   a process per memory tier `C` counters: allocated bytes by category (stacked in
//                             chrome://tracing), allocated, reserved (when it ever differs);
//                             `i` instants: evictions (a swap out of a compute tier)
//   global instants           the OOM, when the run ended with one
//
// ts/dur are microseconds, printed to the nanosecond from integer nanoseconds, so a slice
// that ends when the next one starts touches it without overlap. Events are in time order;
// the same run gives the same bytes.
#include <cstddef>
#include <string>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/report/recorder.h"
#include "sim/report/summary.h"
#include "sim/workload/trace.h"

namespace memsim {

inline constexpr std::size_t kDefaultMaxTraceEvents = 1'000'000;

struct ChromeTrace {
  std::string json;
  std::size_t events_total = 0;    // slices, counters and instants the run produced
  std::size_t events_written = 0;  // at most max_events: the earliest ones
  double written_until_s = 0;      // when truncated: the time of the last event written
  bool truncated() const { return events_written < events_total; }
};

/// Builds trace.json. Keeps the first `max_events` events in time order (metadata is not
/// counted); `otherData` records how many were left out.
ChromeTrace chrome_trace_json(const std::vector<Event>& events,
                              const SampleLog& samples, const Summary& summary,
                              const Trace& trace, const PlatformSpec& platform,
                              std::size_t max_events = kDefaultMaxTraceEvents);

}  // namespace memsim
