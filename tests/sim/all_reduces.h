#pragma once
// A trace of back-to-back all-reduces for the collective tests: one all-reduce per size on
// every rank of a group "g" of ranks 0..n-1, one after another, as nccl-tests runs them.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/workload/trace.h"

namespace memsim::test {

inline Trace all_reduces(const std::vector<std::uint64_t>& sizes, std::uint32_t n, bool persistent,
                         std::string name = "all-reduces") {
  Trace t;
  t.name = std::move(name);
  ProcessGroup g{"g", {}};
  for (std::uint32_t r = 0; r < n; ++r) g.ranks.push_back(r);
  t.groups = {g};
  for (std::size_t k = 0; k < sizes.size(); ++k)
    for (std::uint32_t d = 0; d < n; ++d) {
      const BufferId b =
          t.add_buffer("buf" + std::to_string(k) + "@" + std::to_string(d), sizes[k], Category::comm, persistent);
      t.buffers[b].device = d;
      Op op;
      op.name = "all_reduce" + std::to_string(k) + "@gpu" + std::to_string(d);
      op.kind = "all_reduce";
      op.phase = Phase::backward;
      op.device = d;
      op.updates = {b};
      op.message_bytes = sizes[k];
      op.group = "g";
      t.add_op(std::move(op));
    }
  return t;
}

}  // namespace memsim::test
