#pragma once
// One simulation as `memsim run` is given it — a device, a workload, a policy and --set
// overrides — resolved in-process, without SimGrid: the text of each input after its
// overrides (whose hash is the run's id), whether the inputs load, and the platform's
// compute tiers. Sweeps and `memsim fit` run each request in a child `memsim run` process
// (SimGrid allows one simulation per process); this is everything they know before that.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "sim/inputs/inputs.h"

namespace memsim {

/// What `memsim run` is given for one simulation.
struct RunRequest {
  std::string device;    // a preset name or a path, as `memsim run` takes it
  std::string workload;  // likewise
  std::string policy;    // a policy name or a policy file
  std::vector<Override> overrides;  // applied in order

  /// The `memsim run` arguments after the executable (without --out).
  std::vector<std::string> run_args() const;
};

/// A request after resolution.
struct ResolvedRun {
  RunRequest request;
  /// 16 hex digits: a hash of the memsim version and the device, workload and policy texts
  /// after the overrides (comments and file names do not count). Stable across machines.
  std::string id;
  /// Non-empty when the inputs do not load: the message `memsim run` would print.
  std::string error;
  /// The platform's compute tiers ("gpu0.hbm"), in platform order (empty on error).
  std::vector<std::string> compute_tiers;
};

/// 64-bit FNV-1a of `text` as 16 lowercase hex digits.
std::string hash_hex(const std::string& text);

/// Resolves requests; remembers file texts and load results, so a sweep of many points
/// over a few inputs loads each distinct input once. Thread-safe.
class Resolver {
 public:
  /// Computes the id and checks that the inputs load (the same checks as `memsim run`).
  ResolvedRun resolve(const RunRequest& request);
  /// Only the resolved text the id hashes (no loading).
  std::string resolved_text(const RunRequest& request);

 private:
  struct Loaded {
    std::string error;
    std::vector<std::string> compute_tiers;
  };
  const std::string& raw_text(const std::string& arg, const std::string& folder);
  std::string device_text(const RunRequest& r);
  std::string workload_text(const RunRequest& r);
  std::string policy_text(const RunRequest& r);

  std::recursive_mutex mutex_;
  std::map<std::string, std::string> raw_;      // folder + arg -> file or preset text ("" if none)
  std::map<std::string, Loaded> loaded_;        // kind + arg + resolved text -> load outcome
};

}  // namespace memsim
