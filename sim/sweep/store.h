#pragma once
// Where sweep and fit results live, and how a point runs: as a child `memsim run` process
// (SimGrid allows one simulation per process) writing its full output to
//
//   OUT/points/<id>/   point.json (what ran and the command), summary.json (and the other
//                      files the sweep's `outputs:` names); error.json when the run failed;
//                      stderr.txt
//   OUT/fits/<id>.json one max-batch search
//
// A point is finished when its summary.json exists: `memsim run` writes it last, by rename,
// so a killed run leaves no finished-looking point. Failed points (error.json) run again
// on the next sweep. Every file here is written to a unique temporary name and renamed.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/sweep/resolve.h"

namespace memsim {

struct PointResult {
  std::string status;       // ok | oom | error | interrupted
  std::string error;        // for error: one line
  nlohmann::json summary;   // for ok and oom: summary.json
  bool ran = false;         // run by this process (false: found on disk)
  double wall_s = 0;        // of the child process, when it ran
};

class PointStore {
 public:
  /// `memsim` is the executable to run points with; `force` reruns finished points (each
  /// once per PointStore).
  PointStore(std::string out_dir, std::string memsim, bool force);
  /// What each point writes besides point.json (memsim run --outputs); default summary.
  void set_outputs(std::string outputs) { outputs_ = std::move(outputs); }

  const std::string& out_dir() const { return out_dir_; }
  bool force() const { return force_; }
  std::string point_dir(const std::string& id) const;

  /// The result of `run` (whose inputs resolved): the stored one, or a fresh run. Safe to
  /// call from several threads; concurrent calls for one id run it once.
  PointResult get(const ResolvedRun& run);
  /// Called after each get() with what it returns, one call at a time (progress lines).
  void on_result(std::function<void(const ResolvedRun&, const PointResult&)> callback) {
    on_result_ = std::move(callback);
  }
  /// A stored result (finished or failed) without running anything.
  std::optional<PointResult> stored(const std::string& id) const;

  /// Fit results by id.
  std::optional<nlohmann::json> stored_fit(const std::string& id) const;
  void store_fit(const std::string& id, const nlohmann::json& fit);

  /// Stops: running children get `signal`, and get() runs nothing new ("interrupted").
  void interrupt(int signal);
  bool interrupted() const { return stop_; }

  /// Wall seconds spent in child processes so far, and how many ran.
  double child_seconds() const;
  std::size_t children_run() const;

 private:
  PointResult run_child(const ResolvedRun& run);

  std::string out_dir_, memsim_;
  std::string outputs_ = "summary";
  bool force_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::set<std::string> in_flight_;
  std::map<std::string, PointResult> done_;  // results obtained by this store
  std::set<int> running_pids_;
  std::function<void(const ResolvedRun&, const PointResult&)> on_result_;
  double child_seconds_ = 0;
  std::size_t children_run_ = 0;
};

}  // namespace memsim
