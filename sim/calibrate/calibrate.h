#pragma once
// Calibration: fitting a device's per-op-kind efficiencies to measured op durations, so the
// roofline of the cost model (sim/cost/cost_model.h) reproduces them:
//
//   t = max(FLOPs / (peak x e_compute(kind)), bytes / (bandwidth x e_memory(kind)))
//       + launch_overhead
//
// Once each op is assigned to the term that bounds it, t is linear in 1/e_compute or
// 1/e_memory of its kind and in the overhead, so a weighted least-squares fit (Eigen;
// residuals relative to each measured time, or in seconds under bounds) finds them all. The assignment starts
// from the roofline at efficiency 1 and is redone under each fit until it no longer changes.
// Every other op of each kind is fitted; the rest are held out and predicted. Kinds with
// fewer than `min_samples` fitted ops in a regime share that regime's `default` efficiency.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/workload/trace.h"

namespace memsim {

struct KindFit {
  double efficiency = 0;
  std::size_t samples = 0;  // fitted ops bound by this term
};

struct Calibration {
  /// Per op kind: the fraction of peak FLOP/s its compute-bound ops reach (the device's
  /// `efficiency`) and of bandwidth its memory-bound ops reach (`memory_efficiency`).
  /// "default" holds the kinds with too few samples. A table is empty when no fitted op was
  /// bound by its term: the device's table is then left as it was.
  std::map<std::string, KindFit> compute;
  std::map<std::string, KindFit> memory;
  double launch_overhead_s = 0;
  /// Absolute residuals: "compute:kind" or "memory:kind" whose efficiency the bounds held at 1.
  std::vector<std::string> at_roofline;
  int iterations = 0;      // fits solved, one per regime assignment
  bool converged = false;  // the last fit left every op in the regime it was fitted in
  std::size_t fitted_ops = 0;
  std::size_t held_out_ops = 0;
  double fit_mean_abs_error = 0;       // per op, relative to its measured time
  double held_out_mean_abs_error = 0;  // the same over the held-out ops
  double held_out_total_error = 0;     // (predicted - measured) / measured of their summed time
  /// Why a mean per op can be large while the step's time is close: the fitted ops' median
  /// error, their error weighted by measured time (sum |predicted - measured| / sum
  /// measured), and the ops off by more than 100% (how many, their share of the measured
  /// time, their mean measured time: usually the shortest ops, mostly launch overhead).
  double fit_median_abs_error = 0;
  double fit_time_weighted_error = 0;
  double fit_total_error = 0;          // (predicted - measured) / measured, summed over fitted ops
  std::size_t fit_ops_off_double = 0;
  double fit_ops_off_double_time_share = 0;
  double fit_ops_off_double_mean_s = 0;
  double fit_mean_measured_s = 0;
};

/// What the least squares weighs (absolute by default: it predicts a step's time far better
/// on the shipped captures, docs/fidelity.md).
///  - relative: each op's error relative to its measured time; every op counts alike, and an
///    efficiency outside (0, 1] is an error (the device's rates are below what was measured).
///  - absolute: the error in seconds, so long ops count more (what the step's total time
///    needs), with the efficiencies held in (0, 1] and the overhead at 0 or more (bounded
///    least squares, Lawson and Hanson's NNLS): a kind too short to pin down its slope, its
///    time mostly overhead, stops at the roofline (listed in Calibration::at_roofline).
enum class Residuals : std::uint8_t { relative, absolute };

/// Fits `device` (its peak rates, and its compute tier's bandwidth) to the ops of `trace`
/// that carry a measured duration. Throws InputError when there are too few, when the fit is
/// singular, or (relative residuals) when it gives an efficiency that is not in (0, 1].
Calibration calibrate(const Trace& trace, const PlatformSpec& platform, const std::string& device,
                      std::size_t min_samples = 3, Residuals residuals = Residuals::absolute);

/// `device` with the fit's launch overhead and efficiency tables, each table replacing the
/// device's own where the fit has one; a table without a fitted `default` keeps the device's.
DeviceSpec calibrated_device(const DeviceSpec& device, const Calibration& fit);

/// The platform document `platform_yaml` with `device` changed as calibrated_device does,
/// as YAML text.
std::string calibrated_platform_yaml(const std::string& platform_yaml, const std::string& device,
                                     const Calibration& fit);

}  // namespace memsim
