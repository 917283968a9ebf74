#include "sim/calibrate/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "sim/core/error.h"
#include "sim/platform/bounds.h"
#include "sim/workload/op_kinds.h"

namespace memsim {
namespace {

// Regime assignments tried before giving up on a stable one; in practice two or three do.
constexpr int kMaxIterations = 50;

enum class Regime : std::uint8_t { compute, memory, none };  // none: no FLOPs and no bytes

struct Measured {
  std::string kind;
  double compute_s;  // FLOPs / peak: the compute term at efficiency 1
  double memory_s;   // bytes / bandwidth: the memory term at efficiency 1
  double t;          // measured seconds
  bool fit;          // fitted, or held out

  double x(Regime r) const { return r == Regime::compute ? compute_s : memory_s; }
};

double roofline_s(const Measured& m, const DeviceSpec& d) {
  return std::max(m.compute_s / d.efficiency_for(m.kind),
                  m.memory_s / d.memory_efficiency_for(m.kind)) +
         d.launch_overhead_s;
}

Regime bound_by(const Measured& m, const DeviceSpec& d) {
  if (m.compute_s <= 0 && m.memory_s <= 0) return Regime::none;
  return m.compute_s / d.efficiency_for(m.kind) > m.memory_s / d.memory_efficiency_for(m.kind)
             ? Regime::compute
             : Regime::memory;
}

struct Context {
  const Trace& trace;
  std::size_t min_samples;
  Residuals residuals;
};

// Lawson and Hanson's active-set method: the x >= 0 that minimises |A x - b|.
Eigen::VectorXd nnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b) {
  const Eigen::Index n = A.cols();
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  std::vector<bool> passive(static_cast<std::size_t>(n), false);
  const double tol = 1e-12 * std::max(1.0, A.norm() * b.norm());
  for (int outer = 0; outer < 3 * static_cast<int>(n) + 10; ++outer) {
    const Eigen::VectorXd w = A.transpose() * (b - A * x);
    Eigen::Index best = -1;
    for (Eigen::Index j = 0; j < n; ++j)
      if (!passive[static_cast<std::size_t>(j)] && w(j) > tol && (best < 0 || w(j) > w(best))) best = j;
    if (best < 0) break;
    passive[static_cast<std::size_t>(best)] = true;
    for (int inner = 0; inner < 3 * static_cast<int>(n) + 10; ++inner) {
      std::vector<Eigen::Index> cols;
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<std::size_t>(j)]) cols.push_back(j);
      Eigen::MatrixXd Ap(A.rows(), static_cast<Eigen::Index>(cols.size()));
      for (std::size_t k = 0; k < cols.size(); ++k) Ap.col(static_cast<Eigen::Index>(k)) = A.col(cols[k]);
      const Eigen::VectorXd sp = Ap.colPivHouseholderQr().solve(b);
      Eigen::VectorXd s = Eigen::VectorXd::Zero(n);
      for (std::size_t k = 0; k < cols.size(); ++k) s(cols[k]) = sp(static_cast<Eigen::Index>(k));
      double alpha = 1;
      for (Eigen::Index j : cols)
        if (s(j) <= 0) alpha = std::min(alpha, x(j) / (x(j) - s(j)));
      if (alpha >= 1) {
        x = s;
        break;
      }
      x += alpha * (s - x);
      for (Eigen::Index j : cols)
        if (x(j) <= tol) {
          x(j) = 0;
          passive[static_cast<std::size_t>(j)] = false;
        }
    }
  }
  return x;
}

// The weighted least-squares fit of one regime assignment of the fitted ops. Columns: per
// regime, one per kind with enough samples there and a `default` for the rest; then the
// overhead. Each row holds its op's term at efficiency 1 in its kind's column of its regime.
Calibration fit_assignment(const Context& cx, const std::vector<const Measured*>& ops,
                           const std::vector<Regime>& regime) {
  std::map<std::string, std::size_t> count[2];  // per regime, per kind
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (regime[i] != Regime::none) ++count[static_cast<int>(regime[i])][ops[i]->kind];
  // A device file may name only known kinds; others are fitted as the default.
  auto own_column = [&](const std::string& kind, std::size_t n) {
    return n >= cx.min_samples && is_known_op_kind(kind);
  };
  std::map<std::string, std::size_t> column[2];
  std::size_t default_col[2] = {SIZE_MAX, SIZE_MAX};
  std::size_t c = 0;
  for (int r = 0; r < 2; ++r) {
    for (const auto& [kind, n] : count[r])
      if (own_column(kind, n)) column[r].emplace(kind, c++);
    for (const auto& [kind, n] : count[r])
      if (!own_column(kind, n)) default_col[r] = c;
    if (default_col[r] != SIZE_MAX) ++c;
  }
  const std::size_t overhead_col = c++;
  auto col_of = [&](int r, const std::string& kind) {
    auto it = column[r].find(kind);
    return it != column[r].end() ? it->second : default_col[r];
  };

  if (ops.size() < c + 1)
    throw InputError(fmt::format("{}: {} ops with measured durations to fit {} unknowns; need more",
                                 cx.trace.name, ops.size(), c));
  // Relative residuals: each row divided by its measured time.
  const bool relative = cx.residuals == Residuals::relative;
  const auto rows = static_cast<Eigen::Index>(ops.size());
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(rows, static_cast<Eigen::Index>(c));
  Eigen::VectorXd b(rows);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto row = static_cast<Eigen::Index>(i);
    const Measured& m = *ops[i];
    const double w = relative ? 1.0 / m.t : 1.0;
    if (regime[i] != Regime::none) {
      const int r = static_cast<int>(regime[i]);
      A(row, static_cast<Eigen::Index>(col_of(r, m.kind))) = m.x(regime[i]) * w;
    }
    A(row, static_cast<Eigen::Index>(overhead_col)) = w;
    b(row) = m.t * w;
  }
  // Columns scaled to unit norm, so that the rank test does not take a column of short ops
  // (in seconds, microseconds) for a zero one; the solution is scaled back.
  Eigen::VectorXd scale = A.colwise().norm().transpose();
  for (Eigen::Index j = 0; j < scale.size(); ++j)
    if (scale(j) > 0) A.col(j) /= scale(j);
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(A);
  if (qr.rank() < static_cast<Eigen::Index>(c))
    throw InputError(fmt::format("{}: the measured ops do not determine every efficiency (rank {} of {})",
                                 cx.trace.name, qr.rank(), c));
  Eigen::VectorXd u;  // inverse efficiencies, then the overhead
  if (relative) {
    u = qr.solve(b);
    for (Eigen::Index j = 0; j < scale.size(); ++j) u(j) /= scale(j);
  } else {
    // Bounds: each inverse efficiency u_j = 1 + v_j with v_j >= 0, the overhead >= 0.
    Eigen::VectorXd shifted = b;
    for (Eigen::Index j = 0; j < static_cast<Eigen::Index>(overhead_col); ++j) shifted -= A.col(j) * scale(j);
    u = nnls(A, shifted);
    for (Eigen::Index j = 0; j < scale.size(); ++j) u(j) /= scale(j);
    for (Eigen::Index j = 0; j < static_cast<Eigen::Index>(overhead_col); ++j) u(j) += 1;
  }

  Calibration out;
  out.launch_overhead_s = u(static_cast<Eigen::Index>(overhead_col));
  if (!relative) {
    auto note = [&](int r, const std::string& kind, std::size_t col) {
      if (u(static_cast<Eigen::Index>(col)) <= 1 + 1e-12)
        out.at_roofline.push_back(fmt::format("{}:{}", r == 0 ? "compute" : "memory", kind));
    };
    for (int r = 0; r < 2; ++r) {
      for (const auto& [kind, col] : column[r]) note(r, kind, col);
      if (default_col[r] != SIZE_MAX) note(r, "default", default_col[r]);
    }
  }
  auto efficiency = [&](std::size_t col) { return 1.0 / u(static_cast<Eigen::Index>(col)); };
  for (int r = 0; r < 2; ++r) {
    auto& table = r == static_cast<int>(Regime::compute) ? out.compute : out.memory;
    for (const auto& [kind, col] : column[r]) table[kind] = {efficiency(col), count[r][kind]};
    if (default_col[r] != SIZE_MAX) {
      std::size_t n = 0;
      for (const auto& [kind, k] : count[r])
        if (!own_column(kind, k)) n += k;
      table["default"] = {efficiency(default_col[r]), n};
    }
  }
  return out;
}

void check_efficiencies(const Context& cx, const std::string& device, const Calibration& fit) {
  for (int r = 0; r < 2; ++r) {
    const bool compute = r == 0;
    for (const auto& [kind, f] : compute ? fit.compute : fit.memory) {
      const char* term = compute ? "compute" : "memory";
      if (!(f.efficiency > 0) || !std::isfinite(f.efficiency))
        throw InputError(fmt::format("{}: the fit gives the {}-bound ops of kind '{}' no positive "
                                     "efficiency ({}); their times do not grow with their {}",
                                     cx.trace.name, term, kind, f.efficiency,
                                     compute ? "FLOPs" : "bytes"));
      if (f.efficiency > 1)
        throw InputError(fmt::format("{}: the {}-bound ops of kind '{}' ran at {:.3g}x the roofline of "
                                     "device '{}': its {} is below what the trace measured",
                                     cx.trace.name, term, kind, f.efficiency, device,
                                     compute ? "peak rate" : "bandwidth"));
    }
  }
}

// What the fit would write must be a device the platform loader reads back (bounds.h):
// checked as written, to the four digits calibrated_platform_yaml keeps.
void check_device_bounds(const Context& cx, const std::string& device, const Calibration& fit) {
  auto as_written = [](double v) { return std::stod(fmt::format("{:.4g}", v)); };
  if (const double us = as_written(fit.launch_overhead_s * 1e6); !is_launch_overhead(us * 1e-6))
    throw InputError(fmt::format("{}: the fit gives device '{}' a launch overhead of {:.4g}us; a device file's "
                                 "launch_overhead is {}: the measured times are not of ops a roofline with one "
                                 "overhead can time",
                                 cx.trace.name, device, us, launch_overhead_range()));
  for (int r = 0; r < 2; ++r) {
    const bool compute = r == 0;
    for (const auto& [kind, f] : compute ? fit.compute : fit.memory)
      if (const double e = as_written(f.efficiency); !is_device_efficiency(e))
        throw InputError(fmt::format("{}: the fit gives the {}-bound ops of kind '{}' an efficiency of {:.4g}; a "
                                     "device file's {} is {}",
                                     cx.trace.name, compute ? "compute" : "memory", kind, e,
                                     compute ? "efficiency" : "memory_efficiency", kEfficiencyRange));
  }
}

}  // namespace

Calibration calibrate(const Trace& trace, const PlatformSpec& platform, const std::string& device,
                      std::size_t min_samples, Residuals residuals) {
  const auto d = platform.find_device(device);
  if (!d) throw InputError(fmt::format("{}: no device '{}'", platform.source, device));
  const DeviceSpec& dev = platform.devices[*d];
  if (!dev.compute_tier)
    throw InputError(fmt::format("{}: device '{}' has no compute tier to calibrate", platform.source, device));
  const double bandwidth = platform.tiers[*dev.compute_tier].bandwidth_Bps;
  const Context cx{trace, min_samples, residuals};

  // Both roofline terms at efficiency 1 for each measured op, fitted (even positions within
  // its kind, so every kind is in both halves) or held out.
  std::vector<Measured> ops;
  std::map<std::string, std::size_t> seen;
  for (const Op& op : trace.ops) {
    if (!op.measured_s || *op.measured_s <= 0) continue;
    const double peak = dev.peak_flops[static_cast<int>(op.dtype)];
    if (op.flops > 0 && peak <= 0)
      throw InputError(fmt::format("{}: op '{}' computes in {}, which device '{}' has no rate for",
                                   trace.name, op.name, to_string(op.dtype), device));
    ops.push_back({op.kind, op.flops > 0 ? op.flops / peak : 0.0,
                   op.bytes_moved > 0 ? op.bytes_moved / bandwidth : 0.0, *op.measured_s,
                   seen[op.kind]++ % 2 == 0});
  }
  std::vector<const Measured*> fitted;
  for (const auto& m : ops)
    if (m.fit) fitted.push_back(&m);

  auto assign = [&](const DeviceSpec& at) {
    std::vector<Regime> r;
    r.reserve(fitted.size());
    for (const Measured* m : fitted) r.push_back(bound_by(*m, at));
    return r;
  };
  auto mean_error = [&](const DeviceSpec& at) {
    double e = 0;
    for (const Measured* m : fitted)
      e += std::abs(roofline_s(*m, at) - m->t) / (residuals == Residuals::relative ? m->t : 1.0);
    return fitted.empty() ? 0.0 : e / static_cast<double>(fitted.size());
  };

  // Fit, reassign under the fit, repeat until no op changes regime. Should the assignments
  // cycle instead, the fit with the least error under the max() roofline is kept.
  DeviceSpec unit = dev;  // the roofline at efficiency 1
  unit.default_efficiency = 1;
  unit.efficiency.clear();
  unit.default_memory_efficiency.reset();
  unit.memory_efficiency.clear();
  std::vector<Regime> regime = assign(unit);
  Calibration out;
  double best_error = std::numeric_limits<double>::infinity();
  int tried = 0;
  while (tried < kMaxIterations) {
    ++tried;
    Calibration fit = fit_assignment(cx, fitted, regime);
    const DeviceSpec at = calibrated_device(dev, fit);
    std::vector<Regime> next = assign(at);
    fit.converged = next == regime;
    const double error = mean_error(at);
    if (fit.converged || error < best_error) {
      best_error = error;
      out = std::move(fit);
    }
    if (out.converged) break;
    regime = std::move(next);
  }
  out.iterations = tried;
  check_efficiencies(cx, device, out);
  check_device_bounds(cx, device, out);

  const DeviceSpec at = calibrated_device(dev, out);
  double fit_err = 0, held_err = 0, held_pred = 0, held_real = 0;
  double fit_pred = 0, fit_real = 0, fit_abs = 0, off_real = 0;
  std::vector<double> fit_errors;
  for (const auto& m : ops) {
    const double p = roofline_s(m, at);
    const double e = std::abs(p - m.t) / m.t;
    if (m.fit) {
      fit_err += e;
      fit_errors.push_back(e);
      fit_pred += p;
      fit_real += m.t;
      fit_abs += std::abs(p - m.t);
      if (e > 1) {
        ++out.fit_ops_off_double;
        off_real += m.t;
      }
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
  if (!fit_errors.empty()) {
    std::sort(fit_errors.begin(), fit_errors.end());
    const std::size_t n = fit_errors.size();
    out.fit_median_abs_error = n % 2 ? fit_errors[n / 2] : (fit_errors[n / 2 - 1] + fit_errors[n / 2]) / 2;
    out.fit_time_weighted_error = fit_abs / fit_real;
    out.fit_total_error = (fit_pred - fit_real) / fit_real;
    out.fit_mean_measured_s = fit_real / static_cast<double>(n);
  }
  if (out.fit_ops_off_double) {
    out.fit_ops_off_double_time_share = off_real / fit_real;
    out.fit_ops_off_double_mean_s = off_real / static_cast<double>(out.fit_ops_off_double);
  }
  return out;
}

DeviceSpec calibrated_device(const DeviceSpec& device, const Calibration& fit) {
  DeviceSpec d = device;
  d.launch_overhead_s = fit.launch_overhead_s;
  if (!fit.compute.empty()) {
    d.efficiency.clear();
    for (const auto& [kind, f] : fit.compute)
      if (kind == "default")
        d.default_efficiency = f.efficiency;
      else
        d.efficiency[kind] = f.efficiency;
  }
  if (!fit.memory.empty()) {
    d.memory_efficiency.clear();
    for (const auto& [kind, f] : fit.memory)
      if (kind == "default")
        d.default_memory_efficiency = f.efficiency;
      else
        d.memory_efficiency[kind] = f.efficiency;
  }
  return d;
}

namespace {

// A fitted table as a flow map, `default` first; without a fitted default, the old one's.
YAML::Node efficiency_table(const std::map<std::string, KindFit>& fit, const YAML::Node& old) {
  YAML::Node table(YAML::NodeType::Map);
  table.SetStyle(YAML::EmitterStyle::Flow);
  if (auto it = fit.find("default"); it != fit.end())
    table["default"] = fmt::format("{:.4g}", it->second.efficiency);
  else if (old && old.IsMap() && old["default"] && old["default"].IsScalar())
    table["default"] = old["default"].Scalar();
  for (const auto& [kind, f] : fit)
    if (kind != "default") table[kind] = fmt::format("{:.4g}", f.efficiency);
  return table;
}

}  // namespace

std::string calibrated_platform_yaml(const std::string& platform_yaml, const std::string& device,
                                     const Calibration& fit) {
  YAML::Node root = YAML::Load(platform_yaml);
  YAML::Node dev = root["devices"][device];
  dev["launch_overhead"] = fmt::format("{:.4g}us", fit.launch_overhead_s * 1e6);
  YAML::Node compute = fit.compute.empty() ? dev["efficiency"] : efficiency_table(fit.compute, dev["efficiency"]);
  YAML::Node memory = fit.memory.empty() ? dev["memory_efficiency"]
                                         : efficiency_table(fit.memory, dev["memory_efficiency"]);
  // The two tables side by side, where the first of them was (else before the tiers).
  YAML::Node out(YAML::NodeType::Map);
  bool placed = false;
  auto place = [&] {
    if (placed) return;
    placed = true;
    if (compute) out["efficiency"] = compute;
    if (memory) out["memory_efficiency"] = memory;
  };
  for (const auto& entry : dev) {
    const std::string key = entry.first.Scalar();
    if (key == "efficiency" || key == "memory_efficiency") {
      place();
      continue;
    }
    if (key == "tiers") place();
    out[key] = entry.second;
  }
  place();
  root["devices"][device] = out;
  YAML::Emitter e;
  e << root;
  return std::string(e.c_str()) + "\n";
}

}  // namespace memsim
