#pragma once
// trace.pftrace: the run in Perfetto's own binary format (a serialized perfetto.protos.Trace
// of TrackEvent packets, sim/report/perfetto_trace.proto), which ui.perfetto.dev loads faster
// and smaller than trace.json. It shows what trace.json shows (sim/report/trace_layout.h):
//
//   a process track per device      slice tracks per stream, communication stream and
//                                   copy engine (compute, recompute, comm, stalls, copies)
//   a process track per memory tier counter tracks (bytes): allocated, reserved (when it
//                                   ever differs), one per category that ever holds bytes;
//                                   instant tracks: evictions, the OOM
//
// One packet sequence; names, categories and argument keys are interned (defined once, in
// the packet that first uses them). Timestamps are the events' integer nanoseconds. A
// slice is a BEGIN and an END packet; a counter sample is one packet carrying every value
// that changed. Packets are in time order; the same run gives the same bytes.
#include <cstddef>
#include <string>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/report/recorder.h"
#include "sim/report/summary.h"
#include "sim/workload/trace.h"

namespace memsim {

class TextOut;

struct PerfettoTrace {
  std::string bytes;               // the file (perfetto_trace(); empty when streamed)
  std::size_t events_total = 0;    // slices, counters and instants the run produced
  std::size_t events_written = 0;  // at most max_events: the earliest ones (as trace.json)
  double written_until_s = 0;      // when truncated: the time of the last event written
  bool truncated() const { return events_written < events_total; }
};

/// Writes trace.pftrace into `out` as it goes, a mebibyte at a time. Keeps the same first
/// `max_events` events as chrome_trace_json.
PerfettoTrace write_perfetto_trace(TextOut& out, const std::vector<Event>& events,
                                   const SampleLog& samples, const Summary& summary,
                                   const Trace& trace, const PlatformSpec& platform,
                                   std::size_t max_events);

/// The same, held whole in `bytes`.
PerfettoTrace perfetto_trace(const std::vector<Event>& events,
                             const SampleLog& samples, const Summary& summary,
                             const Trace& trace, const PlatformSpec& platform,
                             std::size_t max_events);

}  // namespace memsim
