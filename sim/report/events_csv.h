#pragma once
// events.csv (`memsim run --events`): every allocation and release, with the allocator's
// address, in the order they happened.
#include <string>
#include <vector>

#include "sim/core/text_out.h"
#include "sim/memory/memory_state.h"
#include "sim/platform/platform.h"
#include "sim/workload/trace.h"

namespace memsim {

/// `time_s,event,buffer,category,tier,address,bytes`: event alloc | free, bytes as the
/// allocator rounded them, buffer empty for anonymous space (op workspace). Row i is the
/// change behind memory.csv's row i, so replaying the rows of a tier gives its allocated
/// curve exactly.
void write_events_csv(TextOut& out, const std::vector<AllocationChange>& changes, const Trace& trace,
                      const PlatformSpec& platform);

}  // namespace memsim
