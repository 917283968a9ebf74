#include "sim/report/events_csv.h"

namespace memsim {

void write_events_csv(TextOut& out, const std::vector<AllocationChange>& changes, const Trace& trace,
                      const PlatformSpec& platform) {
  out.put("time_s,event,buffer,category,tier,address,bytes\n");
  for (const AllocationChange& c : changes) {
    out.put(c.time_s).put(',').put(c.allocated ? "alloc" : "free").put(',');
    if (c.buffer != AllocationChange::kNoBuffer) out.put_csv(trace.buffers[c.buffer].name);
    out.put(',').put(to_string(c.category)).put(',').put(platform.tiers[c.tier].name).put(',');
    out.put(c.allocation.address).put(',').put(c.allocation.bytes).put('\n');
  }
}

}  // namespace memsim
