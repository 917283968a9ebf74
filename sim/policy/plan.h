#pragma once
// A Plan is the trace with memory operations inserted: what each stream does, in order.
// Planning passes (static policies) write it; the engine runs it. Compute steps run an op;
// the others act on a buffer. A step runs on the stream of the most recent compute step
// before it (device 0, stream 0 for steps before any compute). Placements put buffers that
// are resident at the start somewhere other than their first user's memory.
#include <cstdint>
#include <vector>

#include "sim/workload/trace.h"

namespace memsim {

enum class StepKind : std::uint8_t {
  compute,   // run op `id`: inputs resident, outputs and workspace allocated first
  free,      // release buffer `id` wherever it lives
  swap_out,  // start copying buffer `id` to tier `tier`; its old space is freed on arrival
  swap_in,   // start copying buffer `id` to tier `tier` (a prefetch); a reader waits for it
  drop,      // release buffer `id` before its last use; a later reader recomputes it
  recompute, // run op `id` again now, to remake its dropped outputs ahead of their reader
  evict,     // buffer `id` is unchanged since it came from tier `tier`, which still holds it:
             // release it where it is, no copy; a later reader brings it back from there
};
std::string_view to_string(StepKind k);

struct Step {
  StepKind kind = StepKind::compute;
  std::uint32_t id = 0;     // op id for compute, buffer id otherwise
  std::uint32_t tier = 0;   // destination tier of a swap
};

/// Where a buffer resident at the start of the iteration lives then, when not in the
/// operand tier of its first user's device (optimizer state kept on NVMe).
struct InitialPlacement {
  BufferId buffer = 0;
  std::uint32_t tier = 0;
};

struct Plan {
  std::vector<Step> steps;
  std::vector<InitialPlacement> placements;
};

/// Every op in issue order, each buffer freed right after its last use (memory sharing by
/// liveness); persistent buffers are never freed.
Plan plan_free_at_last_use(const Trace& trace, const Liveness& liveness);

}  // namespace memsim
