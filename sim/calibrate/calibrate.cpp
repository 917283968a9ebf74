#include "sim/calibrate/calibrate.h"

#include <cmath>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "sim/core/error.h"
#include "sim/workload/op_kinds.h"

namespace memsim {
namespace {

struct Sample {
  std::size_t column;  // the kind's column in the design matrix
  double x;            // roofline seconds at efficiency 1
  double t;            // measured seconds
};

}  // namespace

Calibration calibrate(const Trace& trace, const PlatformSpec& platform, const std::string& device,
                      std::size_t min_samples) {
  const auto d = platform.find_device(device);
  if (!d) throw InputError(fmt::format("{}: no device '{}'", platform.source, device));
  const DeviceSpec& dev = platform.devices[*d];
  if (!dev.compute_tier)
    throw InputError(fmt::format("{}: device '{}' has no compute tier to calibrate", platform.source, device));
  const double bandwidth = platform.tiers[*dev.compute_tier].bandwidth_Bps;

  // Seconds at efficiency 1 for each measured op, fitted (even positions) or held out.
  struct Measured {
    std::string kind;
    double x, t;
    bool fit;
  };
  std::vector<Measured> ops;
  std::map<std::string, std::size_t> seen;  // alternate within each kind, so every kind is in both halves
  for (const Op& op : trace.ops) {
    if (!op.measured_s || *op.measured_s <= 0) continue;
    const double peak = dev.peak_flops[static_cast<int>(op.dtype)];
    if (op.flops > 0 && peak <= 0)
      throw InputError(fmt::format("{}: op '{}' computes in {}, which device '{}' has no rate for",
                                   trace.name, op.name, to_string(op.dtype), device));
    const double x = std::max(op.flops > 0 ? op.flops / peak : 0.0, op.bytes_moved > 0 ? op.bytes_moved / bandwidth : 0.0);
    ops.push_back({op.kind, x, *op.measured_s, seen[op.kind]++ % 2 == 0});
  }
  std::map<std::string, std::size_t> count;
  for (const auto& m : ops)
    if (m.fit && m.x > 0) ++count[m.kind];
  // Columns: one per kind with enough samples, "default" for the rest, then the overhead.
  std::map<std::string, std::size_t> column;
  // A device file may name only known kinds; others are fitted as the default.
  auto own_column = [&](const std::string& kind, std::size_t n) { return n >= min_samples && is_known_op_kind(kind); };
  for (const auto& [kind, n] : count)
    if (own_column(kind, n)) column.emplace(kind, 0);
  bool needs_default = false;
  for (const auto& [kind, n] : count)
    if (!own_column(kind, n)) needs_default = true;
  std::size_t c = 0;
  for (auto& [kind, col] : column) col = c++;
  const std::size_t default_col = needs_default ? c++ : SIZE_MAX;
  const std::size_t overhead_col = c++;
  auto col_of = [&](const std::string& kind) {
    auto it = column.find(kind);
    return it != column.end() ? it->second : default_col;
  };

  std::vector<const Measured*> fit;
  for (const auto& m : ops)
    if (m.fit) fit.push_back(&m);
  if (fit.size() < c + 1)
    throw InputError(fmt::format("{}: {} ops with measured durations to fit {} unknowns; need more",
                                 trace.name, fit.size(), c));
  // Weighted least squares, each row divided by its measured time: relative residuals.
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(fit.size()), static_cast<Eigen::Index>(c));
  Eigen::VectorXd b(static_cast<Eigen::Index>(fit.size()));
  for (std::size_t i = 0; i < fit.size(); ++i) {
    const auto r = static_cast<Eigen::Index>(i);
    if (fit[i]->x > 0) A(r, static_cast<Eigen::Index>(col_of(fit[i]->kind))) = fit[i]->x / fit[i]->t;
    A(r, static_cast<Eigen::Index>(overhead_col)) = 1.0 / fit[i]->t;
    b(r) = 1.0;
  }
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(A);
  if (qr.rank() < static_cast<Eigen::Index>(c))
    throw InputError(fmt::format("{}: the measured ops do not determine every efficiency (rank {} of {})",
                                 trace.name, qr.rank(), c));
  const Eigen::VectorXd u = qr.solve(b);

  Calibration out;
  out.launch_overhead_s = u(static_cast<Eigen::Index>(overhead_col));
  auto efficiency = [&](std::size_t col) { return 1.0 / u(static_cast<Eigen::Index>(col)); };
  for (const auto& [kind, col] : column) out.kinds[kind] = {efficiency(col), count[kind]};
  if (needs_default) {
    std::size_t n = 0;
    for (const auto& [kind, k] : count)
      if (!own_column(kind, k)) n += k;
    out.kinds["default"] = {efficiency(default_col), n};
  }
  for (const auto& [kind, f] : out.kinds)
    if (!(f.efficiency > 0) || !std::isfinite(f.efficiency))
      throw InputError(fmt::format("{}: the fit gives kind '{}' no positive efficiency ({}); its ops' "
                                   "times do not grow with their work",
                                   trace.name, kind, f.efficiency));
    else if (f.efficiency > 1)
      throw InputError(fmt::format("{}: kind '{}' ran at {:.3g}x the roofline of device '{}': its peak "
                                   "rate or bandwidth is below what the trace measured",
                                   trace.name, kind, f.efficiency, device));

  auto predict = [&](const Measured& m) {
    return m.x * u(static_cast<Eigen::Index>(col_of(m.kind))) + out.launch_overhead_s;
  };
  double fit_err = 0, held_err = 0, held_pred = 0, held_real = 0;
  for (const auto& m : ops) {
    const double p = m.x > 0 ? predict(m) : out.launch_overhead_s;
    const double e = std::abs(p - m.t) / m.t;
    if (m.fit) {
      fit_err += e;
      ++out.fitted_ops;
    } else {
      held_err += e;
      held_pred += p;
      held_real += m.t;
      ++out.held_out_ops;
    }
  }
  out.fit_mean_abs_error = out.fitted_ops ? fit_err / static_cast<double>(out.fitted_ops) : 0;
  out.held_out_mean_abs_error = out.held_out_ops ? held_err / static_cast<double>(out.held_out_ops) : 0;
  out.held_out_total_error = held_real > 0 ? (held_pred - held_real) / held_real : 0;
  return out;
}

std::string calibrated_platform_yaml(const std::string& platform_yaml, const std::string& device,
                                     const Calibration& fit) {
  YAML::Node root = YAML::Load(platform_yaml);
  YAML::Node dev = root["devices"][device];
  YAML::Node eff(YAML::NodeType::Map);
  eff.SetStyle(YAML::EmitterStyle::Flow);
  if (auto it = fit.kinds.find("default"); it != fit.kinds.end())
    eff["default"] = fmt::format("{:.4g}", it->second.efficiency);
  for (const auto& [kind, f] : fit.kinds)
    if (kind != "default") eff[kind] = fmt::format("{:.4g}", f.efficiency);
  dev["efficiency"] = eff;
  dev["launch_overhead"] = fmt::format("{:.4g}us", fit.launch_overhead_s * 1e6);
  YAML::Emitter e;
  e << root;
  return std::string(e.c_str()) + "\n";
}

}  // namespace memsim
