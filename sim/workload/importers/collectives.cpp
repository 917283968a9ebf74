#include "sim/workload/importers/collectives.h"

#include <algorithm>
#include <array>

namespace memsim {

std::string collective_kind(std::string_view name) {
  // The bare collective: namespace, leading underscores, in-place and variant suffixes off.
  for (std::string_view prefix : {"c10d::", "nccl:", "gloo:", "c10d_functional::", "_c10d_functional::"})
    if (name.substr(0, prefix.size()) == prefix) name.remove_prefix(prefix.size());
  std::string n;
  for (char c : name)
    if (c != '_') n += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  auto starts = [&](std::string_view p) { return n.compare(0, p.size(), p) == 0; };
  if (starts("allreduce")) return "all_reduce";
  if (starts("allgather")) return "all_gather";
  if (starts("reducescatter")) return "reduce_scatter";
  if (starts("alltoall")) return "all_to_all";
  if (starts("broadcast")) return "broadcast";
  if (starts("reduce")) return "reduce";
  if (starts("gather")) return "gather";
  if (starts("scatter")) return "scatter";
  if (starts("barrier")) return "barrier";
  if (starts("send") || starts("isend")) return "send";
  if (starts("recv") || starts("irecv") || starts("recvanysource")) return "recv";
  if (starts("wait")) return "wait";
  return "";
}

std::string chakra_collective_kind(std::int64_t t) {
  static const std::array<const char*, 10> kinds{"all_reduce", "reduce", "all_gather", "gather",
                                                 "scatter", "broadcast", "all_to_all",
                                                 "reduce_scatter", "reduce_scatter", "barrier"};
  return t >= 0 && t < static_cast<std::int64_t>(kinds.size()) ? kinds[static_cast<std::size_t>(t)] : "";
}

}  // namespace memsim
