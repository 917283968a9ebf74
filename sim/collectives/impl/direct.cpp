#include "sim/collectives/collectives.h"

namespace memsim {
namespace {

// Every flow at once, straight to its peer, one latency-bound step: an all-to-all sends S/n
// from every rank to every other (NCCL's, as grouped sends and receives); scatter and gather
// S/n between rank 0 and each other rank; send/recv the whole tensor from the group's first
// rank to its second; a ring exchange the whole tensor from every rank to the next one in
// the group's order (TransformerEngine's ring attention: batched isend to the next rank and
// irecv from the previous one), all at once.
std::vector<CollectivePhase> direct_phases(std::string_view kind, std::uint64_t bytes, const GroupTopology& group) {
  const std::uint32_t n = group.size();
  if (n < 2) return {};
  CollectivePhase p;
  p.ranks = n;
  p.steps = 1;
  const std::uint64_t chunk = (bytes + n - 1) / n;  // whole chunks, rounded up
  if (kind == "all_to_all") {
    for (std::uint32_t a = 0; a < n; ++a)
      for (std::uint32_t b = 0; b < n; ++b)
        if (a != b) p.flows.push_back({a, b, chunk});
  } else if (kind == "ring_exchange") {
    for (std::uint32_t r = 0; r < n; ++r) p.flows.push_back({r, (r + 1) % n, bytes});
  } else if (kind == "scatter" || kind == "gather") {
    for (std::uint32_t r = 1; r < n; ++r)
      p.flows.push_back(kind == "scatter" ? Flow{0, r, chunk} : Flow{r, 0, chunk});
  } else {
    p.flows.push_back({0, 1, bytes});  // send, recv
  }
  return {p};
}

}  // namespace

CollectiveAlgorithm direct_algorithm() {
  return {"direct",
          "every flow at once straight to its peer, one step: all-to-all, scatter, gather, "
          "send/recv, ring exchange (their default)",
          {"all_to_all", "scatter", "gather", "send", "recv", "ring_exchange"},
          {},
          direct_phases};
}

}  // namespace memsim
