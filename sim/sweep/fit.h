#pragma once
// The largest batch (or sequence length, or any integer workload parameter) that runs
// without oom, by bisection over child runs — `memsim fit` and a sweep's `fit:` column.
//
// The search assumes what the field assumes: if a value fits, every smaller one fits. It
// runs `min`, then doubles until a run fails (oom, or a value the model refuses) or `max`
// is reached, then bisects between the last fit and the first failure: about
// 2 log2(answer) runs, each cached under the sweep's points/ by the id of its inputs.
//
// With a slowdown X, it also finds the largest value whose time per unit (iteration time
// divided by the value: per sample for batch, per token position for seq_len) stays within
// X times the baseline: the time per unit of the `none` policy at its own largest fitting
// value, the best that plain memory sharing reaches on that device. It bisects between
// min(that value, the policy's max), assumed within, and the policy's max; 0 when even the
// lower end is slower.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/sweep/resolve.h"
#include "sim/sweep/store.h"

namespace memsim {

enum class ProbeOutcome { fits, fails, error };

struct Search {
  std::int64_t largest = 0;     // the largest value that fits; 0 when `lo` does not
  std::int64_t first_fail = 0;  // the smallest failing value seen; 0 when none failed
  bool error = false;           // a probe was an error: the search stopped
};

/// The largest v in [lo, hi] with probe(v) == fits: probes lo, doubles up to hi until one
/// fails, then bisects.
Search search_largest(std::int64_t lo, std::int64_t hi,
                      const std::function<ProbeOutcome(std::int64_t)>& probe);
/// Bisects between `good` (fits) and `bad` (fails): the largest v in [good, bad) that fits.
Search bisect(std::int64_t good, std::int64_t bad,
              const std::function<ProbeOutcome(std::int64_t)>& probe);

struct FitOptions {
  std::string axis = "batch";
  std::int64_t min = 1, max = 1'000'000;
  double slowdown = 0;  // 0: no slowdown search
};

struct FitProbe {
  std::int64_t value = 0;
  std::string status;  // ok | oom | invalid (the inputs refuse the value) | error
  double iteration_time_s = 0;
  std::uint64_t peak_bytes = 0;  // the first compute tier's peak (for oom: up to the oom)
  std::string id;      // the run's point id
  std::string error;
};

struct FitResult {
  std::string axis;
  std::int64_t max = 0;         // largest value that runs without oom; 0: not even min
  std::int64_t first_fail = 0;  // smallest failing value found; 0: everything up to the limit fits
  std::string fail_status;      // of first_fail: oom | invalid
  std::string fail_error;       // for invalid: why the inputs refuse it
  double slowdown = 0;
  std::optional<std::int64_t> max_within;  // with a slowdown; 0: none within
  std::int64_t baseline_value = 0;         // the none policy's max
  double baseline_time_per_unit_s = 0;
  std::vector<FitProbe> probes;  // in the order they were run
  std::string error;             // a probe failed, or the inputs do not load: no answer

  nlohmann::json to_json() const;
  static FitResult from_json(const nlohmann::json& j);
};

/// The id a fit is stored under (fits/<id>.json): the base inputs with the axis left open,
/// and the options.
std::string fit_id(const RunRequest& base, const FitOptions& options, Resolver& resolver);

/// Fits `base` (the axis is set on top of its overrides), running points through `store`;
/// reuses a stored fit unless the store forces reruns, and stores the answer.
FitResult run_fit(const RunRequest& base, const FitOptions& options, Resolver& resolver,
                  PointStore& store);

}  // namespace memsim
