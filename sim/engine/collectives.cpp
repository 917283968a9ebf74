#include "sim/engine/collectives.h"

#include <array>

namespace memsim {

bool is_communication_kind(std::string_view kind) {
  static constexpr std::array<std::string_view, 11> kKinds{
      "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
      "gather",     "scatter",    "barrier",        "send",       "recv"};
  for (std::string_view k : kKinds)
    if (k == kind) return true;
  return false;
}

CollectivePattern collective_pattern(std::string_view kind, std::uint64_t bytes, std::uint32_t n) {
  CollectivePattern p;
  if (n < 2) return p;
  // A chunk is S/n rounded up: every rank moves whole chunks.
  const std::uint64_t chunk = (bytes + n - 1) / n;
  auto ring = [&](std::uint32_t steps) {
    for (std::uint32_t r = 0; r < n; ++r) p.flows.push_back({r, (r + 1) % n, steps * chunk});
    p.steps = steps;
  };
  if (kind == "all_reduce" || kind == "barrier") {
    ring(2 * (n - 1));  // a barrier is an all-reduce of nothing: latency only
  } else if (kind == "all_gather" || kind == "reduce_scatter") {
    ring(n - 1);
  } else if (kind == "broadcast" || kind == "reduce") {
    // Down (broadcast from rank 0) or up (reduce to rank 0) a chain, pipelined in chunks:
    // every link of the chain carries S once.
    for (std::uint32_t r = 0; r + 1 < n; ++r)
      p.flows.push_back(kind == "broadcast" ? Flow{r, r + 1, bytes} : Flow{r + 1, r, bytes});
    p.steps = n - 1;
  } else if (kind == "scatter" || kind == "gather") {
    for (std::uint32_t r = 1; r < n; ++r)
      p.flows.push_back(kind == "scatter" ? Flow{0, r, chunk} : Flow{r, 0, chunk});
    p.steps = 1;
  } else if (kind == "all_to_all") {
    for (std::uint32_t a = 0; a < n; ++a)
      for (std::uint32_t b = 0; b < n; ++b)
        if (a != b) p.flows.push_back({a, b, chunk});
    p.steps = 1;
  } else if (kind == "send" || kind == "recv") {
    // Point to point: the group's first rank sends to its second.
    p.flows.push_back({0, 1, bytes});
    p.steps = 1;
  }
  return p;
}

}  // namespace memsim
