#include "sim/sweep/results.h"

#include <algorithm>

namespace memsim {
namespace {

constexpr const char* kFigures[] = {"iteration_time_s", "compute_time_s", "stall_time_s",
                                    "recompute_time_s", "transfer_time_s", "swap_out_bytes",
                                    "swap_in_bytes",    "recompute_flops",  "comm_time_s",
                                    "exposed_comm_time_s"};
// summary.json's throughput figures, columns of the same names.
constexpr const char* kThroughput[] = {"tokens_per_s", "samples_per_s", "mfu", "hfu", "gpu_hours_per_1e9_tokens"};

std::string number(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "";
  return j[key].dump();
}

}  // namespace

std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

ResultsTable::ResultsTable(const SweepSpec& spec, const std::vector<SweepPoint>& points)
    : spec_(spec) {
  for (const auto& p : points)
    for (const auto& t : p.run.compute_tiers)
      if (std::find(tiers_.begin(), tiers_.end(), t) == tiers_.end()) tiers_.push_back(t);
  header_ = "point_id,device,workload,policy";
  for (const auto& a : spec.axes) header_ += "," + csv_cell(a.key);
  header_ += ",status,error";
  for (const char* f : kFigures) header_ += std::string(",") + f;
  for (const char* f : kThroughput) header_ += std::string(",") + f;
  for (const auto& t : tiers_)
    header_ += "," + csv_cell(t + ".peak_allocated_bytes") + "," + csv_cell(t + ".peak_reserved_bytes");
  if (spec.fit) {
    header_ += ",max_" + spec.fit->axis;
    if (spec.fit->slowdown > 0) header_ += ",max_" + spec.fit->axis + "_within_slowdown";
  }
  header_ += "\n";
}

std::string ResultsTable::row(const SweepPoint& p, const RowResult& r) const {
  std::string out = p.run.id;
  out += "," + csv_cell(spec_.devices[p.device].name);
  out += "," + csv_cell(spec_.workloads[p.workload].name);
  out += "," + csv_cell(spec_.policies[p.policy].name);
  for (const auto& v : p.values) out += "," + (v ? csv_cell(*v) : std::string());
  std::string error = r.error;
  if (r.fit && !r.fit->error.empty() && r.status != "error") error = "fit: " + r.fit->error;
  out += "," + r.status + "," + csv_cell(error.substr(0, error.find('\n')));
  for (const char* f : kFigures) out += "," + number(r.summary, f);
  const bool rates = r.summary.is_object() && r.summary.contains("throughput");
  for (const char* f : kThroughput) out += "," + (rates ? number(r.summary["throughput"], f) : std::string());
  const nlohmann::json* tiers =
      r.summary.is_object() && r.summary.contains("tiers") ? &r.summary["tiers"] : nullptr;
  for (const auto& t : tiers_) {
    const bool has = tiers && tiers->contains(t);
    out += "," + (has ? number((*tiers)[t], "peak_allocated_bytes") : std::string());
    out += "," + (has ? number((*tiers)[t], "peak_reserved_bytes") : std::string());
  }
  if (spec_.fit) {
    const bool ok = r.fit && r.fit->error.empty();
    out += "," + (ok ? std::to_string(r.fit->max) : std::string());
    if (spec_.fit->slowdown > 0)
      out += "," + (ok && r.fit->max_within ? std::to_string(*r.fit->max_within) : std::string());
  }
  return out + "\n";
}

}  // namespace memsim
