#pragma once
// results.csv: one row per point, in the sweep's point order, so the same points give the
// same bytes however they were run (one machine, shards, a resumed run). Columns:
//
//   point_id, device, workload, policy, <each axis, named by its key>, status, error,
//   iteration_time_s, compute_time_s, stall_time_s, recompute_time_s, transfer_time_s,
//   swap_out_bytes, swap_in_bytes, recompute_flops, comm_time_s, exposed_comm_time_s,
//   tokens_per_s, samples_per_s, mfu, hfu, gpu_hours_per_1e9_tokens   (summary.json throughput)
//   <tier>.peak_allocated_bytes, <tier>.peak_reserved_bytes   (each compute tier)
//   [max_<axis>, max_<axis>_within_slowdown]                  (with fit:)
//
// Cells a point does not have (an axis that does not apply, a tier its platform lacks, the
// figures of a failed point) are empty.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/sweep/fit.h"
#include "sim/sweep/sweep.h"

namespace memsim {

/// What a point came to.
struct RowResult {
  std::string status;        // ok | oom | error
  std::string error;
  nlohmann::json summary;    // ok and oom: summary.json
  std::optional<FitResult> fit;
};

class ResultsTable {
 public:
  ResultsTable(const SweepSpec& spec, const std::vector<SweepPoint>& points);
  /// The header line, with its newline.
  const std::string& header() const { return header_; }
  /// One row, with its newline.
  std::string row(const SweepPoint& point, const RowResult& result) const;

 private:
  const SweepSpec& spec_;
  std::vector<std::string> tiers_;
  std::string header_;
};

/// A CSV cell: quoted when it holds a comma, a quote or a line break.
std::string csv_cell(const std::string& text);

}  // namespace memsim
