#pragma once
// Calibration: fitting a device's per-op-kind efficiencies to measured op durations, so the
// roofline of the cost model (sim/engine/cost_model.h) reproduces them:
//
//   t = max(FLOPs / peak, bytes / bandwidth) / efficiency(kind) + launch_overhead
//
// is linear in 1/efficiency per kind and in the overhead, so a weighted least-squares fit
// (Eigen; residuals relative to each measured time) finds them all at once. Every other op
// of each kind is fitted; the rest are held out and predicted. Kinds with fewer than
// `min_samples` fitted ops share one `default` efficiency.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/workload/trace.h"

namespace memsim {

struct KindFit {
  double efficiency = 0;
  std::size_t samples = 0;  // fitted ops
};

struct Calibration {
  std::map<std::string, KindFit> kinds;  // "default" holds the kinds with too few samples
  double launch_overhead_s = 0;
  std::size_t fitted_ops = 0;
  std::size_t held_out_ops = 0;
  double fit_mean_abs_error = 0;       // per op, relative to its measured time
  double held_out_mean_abs_error = 0;  // the same over the held-out ops
  double held_out_total_error = 0;     // (predicted - measured) / measured of their summed time
};

/// Fits `device` (its peak rates, and its compute tier's bandwidth) to the ops of `trace`
/// that carry a measured duration. Throws InputError when there are too few, or when the
/// fit is singular.
Calibration calibrate(const Trace& trace, const PlatformSpec& platform, const std::string& device,
                      std::size_t min_samples = 3);

/// The platform document `platform_yaml` with `device`'s efficiency table and launch
/// overhead replaced by the fit, as YAML text.
std::string calibrated_platform_yaml(const std::string& platform_yaml, const std::string& device,
                                     const Calibration& fit);

}  // namespace memsim
