#include "sim/exec/residency.h"


namespace memsim::exec {

std::vector<std::uint32_t> start_slots(const Trace& trace) {
  std::vector<std::uint32_t> slot(trace.buffers.size(), kNoSlot);
  for (const Op& op : trace.ops)
    for (BufferId b : op.reads())
      if (slot[b] == kNoSlot) slot[b] = op.device;
  for (const Buffer& b : trace.buffers)
    if (b.producer != kNoOp)
      slot[b.id] = kNoSlot;
    else if (slot[b.id] == kNoSlot)
      slot[b.id] = b.device;
  return slot;
}

}  // namespace memsim::exec
