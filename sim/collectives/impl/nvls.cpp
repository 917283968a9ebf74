#include "sim/collectives/collectives.h"

namespace memsim {
namespace {

// NVLink SHARP (NCCL's NVLS): the NVSwitch reduces. Each GPU writes its S bytes to the
// switch once, which adds them as they pass, and reads the sum back once: every GPU's link
// carries S up and S down, one latency-bound step. As flows: S from each rank to the next
// (any pairing that loads every link once each way gives the same time), over routes that
// cross the switch. Needs every rank linked to one switch marked `reduces: true`.
std::vector<CollectivePhase> nvls_phases(std::string_view, std::uint64_t bytes, const GroupTopology& group) {
  const std::uint32_t n = group.size();
  if (n < 2) return {};
  CollectivePhase p;
  p.ranks = n;
  p.steps = 1;
  for (std::uint32_t r = 0; r < n; ++r) p.flows.push_back({r, (r + 1) % n, bytes});
  return {p};
}

}  // namespace

CollectiveAlgorithm nvls_algorithm() {
  return {"nvls",
          "NVLink SHARP all-reduce: a switch marked reduces: true adds; each GPU sends S once and "
          "receives S once, one step",
          {"all_reduce"},
          [](std::string_view, const GroupTopology& group) { return group.reducing_switch; },
          nvls_phases};
}

}  // namespace memsim
