#pragma once
// Calibration from measured step times: the parameters of a platform (any value a --set KEY
// names: a host's per-op time, an efficiency, a collective's latency) chosen so that memsim's
// predicted iteration times come closest to the measured ones, by mean absolute relative
// error.
//
// Each measured row is a run: a workload (file or preset), --set overrides (its batch, its
// parallel layout) and the measured iteration time. One evaluation runs every fitted row as
// `memsim run PLATFORM WORKLOAD --set ... --json` in a process of its own (SimGrid runs once
// per process), `jobs` at a time; the search is Nelder-Mead over the parameters' ranges
// scaled to [0, 1], from their middles, for at most `evaluations` evaluations. The same rows
// and ranges give the same fit on any machine. Rows left out of the fit are predicted with
// the chosen parameters and reported apart: a held-out check.
//
// The CSV: a header with `workload`, `set` (space-separated KEY=VALUE, may be empty) and
// `iteration_ms` (or `iteration_s`); other columns are kept for the report.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/platform/platform.h"

namespace memsim {

struct StepRow {
  std::size_t line = 0;  // in the CSV, from 1 (the header)
  std::string workload;
  std::vector<std::string> sets;
  double measured_s = 0;
};

std::vector<StepRow> read_step_rows(const std::string& path);

/// A parameter to fit, from "KEY=LO:HI" ("gpu*.host_overhead.per_op.default=10us:200us"):
/// a KEY whose first part is a glob names that key of every compute device it matches
/// ("gpu*": gpu0 ... gpu7; expand_device_glob, as --set does), and a last part "{a,b}" each of a and b
/// (gpu*.host_overhead.per_op.{send,recv}). LO and HI share a unit suffix, kept for the
/// value written.
struct FitParam {
  std::string key;
  std::vector<std::string> keys;  // expanded over the devices
  double lo = 0, hi = 0;
  std::string unit;
  double value = 0;  // in the unit
  std::string text() const;  // "42.5us"
};

FitParam parse_fit_param(const std::string& spec, const PlatformSpec& platform);

struct StepFitOptions {
  std::string memsim;       // the binary that runs each row
  std::string platform;     // the PLATFORM argument of each run
  std::size_t jobs = 1;
  std::size_t evaluations = 60;
  std::vector<std::size_t> fit_rows;  // indices into the rows; empty: all of them
  std::string work_dir;     // each run's output folder goes under it
};

struct StepFit {
  std::vector<FitParam> params;  // with the chosen values
  std::vector<std::optional<double>> predicted_s;  // per row (all of them, fitted or not)
  std::vector<bool> fitted;                        // per row
  std::size_t evaluations = 0;
  double fit_mean_abs_error = 0, fit_max_abs_error = 0;
  double held_out_mean_abs_error = 0, held_out_max_abs_error = 0;
  std::size_t held_out = 0;
};

/// `progress`: called after each evaluation with its number and mean absolute error.
StepFit fit_step_times(const std::vector<StepRow>& rows, std::vector<FitParam> params,
                       const StepFitOptions& options,
                       const std::function<void(std::size_t, double, const std::vector<FitParam>&)>& progress);

/// The platform's YAML text with each parameter's value set at its keys.
std::string platform_yaml_with(const std::string& platform_yaml, const std::vector<FitParam>& params);

}  // namespace memsim
