#include "sim/calibrate/steps.h"

#include <spawn.h>
#include <sys/wait.h>
#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/files.h"

extern char** environ;

namespace memsim {
namespace {

namespace fs = std::filesystem;

// One CSV record: fields split at commas outside double quotes ("" is a quote).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

// "42.5us" -> {42.5, "us"}; nullopt when it does not start with a number.
std::optional<std::pair<double, std::string>> number_and_unit(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v)) return std::nullopt;
  return std::make_pair(v, trim(std::string(end)));
}

// Runs argv with stdout and stderr into files; its exit status.
int run_process(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw InputError(fmt::format("calibrate: cannot start {}: {}", argv[0], std::strerror(rc)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw InputError(fmt::format("calibrate: waiting for {}: {}", argv[0], std::strerror(errno)));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double relative_error(double predicted, double measured) { return std::abs(predicted - measured) / measured; }

}  // namespace

std::vector<StepRow> read_step_rows(const std::string& path) {
  const std::string text = read_input_file(path);
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line))
    throw InputError(fmt::format("{}:1: expected a header (workload,set,iteration_ms), found an empty file", path));
  const auto header = csv_fields(line);
  auto column = [&](const std::string& name) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (trim(header[i]) == name) return i;
    return std::nullopt;
  };
  const auto workload = column("workload"), sets = column("set");
  const auto ms = column("iteration_ms"), s = column("iteration_s");
  if (!workload || !(ms || s))
    throw InputError(fmt::format("{}:1: expected the columns workload, set (optional) and iteration_ms or "
                                 "iteration_s, found '{}'",
                                 path, line));
  std::vector<StepRow> rows;
  std::size_t number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (trim(line).empty()) continue;
    const auto f = csv_fields(line);
    const std::size_t time_col = ms ? *ms : *s;
    if (f.size() <= std::max({*workload, time_col, sets.value_or(0)}))
      throw InputError(fmt::format("{}:{}: expected {} fields as the header has, found {}", path, number,
                                   header.size(), f.size()));
    StepRow r;
    r.line = number;
    r.workload = trim(f[*workload]);
    if (r.workload.empty()) throw InputError(fmt::format("{}:{}: column workload: expected a workload, found nothing", path, number));
    if (sets) {
      std::istringstream words(f[*sets]);
      for (std::string w; words >> w;) {
        if (w.find('=') == std::string::npos || w.front() == '=')
          throw InputError(fmt::format("{}:{}: column set: expected KEY=VALUE words, found '{}'", path, number, w));
        r.sets.push_back(w);
      }
    }
    const auto t = number_and_unit(trim(f[time_col]));
    if (!t || !t->second.empty() || !(t->first > 0))
      throw InputError(fmt::format("{}:{}: column {}: expected a time above 0, found '{}'", path, number,
                                   ms ? "iteration_ms" : "iteration_s", f[time_col]));
    r.measured_s = ms ? t->first / 1e3 : t->first;
    rows.push_back(std::move(r));
  }
  if (rows.empty()) throw InputError(fmt::format("{}: expected at least one measured row, found none", path));
  return rows;
}

std::string FitParam::text() const { return fmt::format("{:.4g}{}", value, unit); }

FitParam parse_fit_param(const std::string& spec, const PlatformSpec& platform) {
  const auto eq = spec.find('=');
  const auto colon = spec.find(':', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || eq == 0 || colon == std::string::npos)
    throw UsageError(fmt::format("--fit expects KEY=LO:HI (gpu*.host_overhead.per_op.default=10us:200us), got '{}'", spec));
  FitParam p;
  p.key = spec.substr(0, eq);
  const auto lo = number_and_unit(spec.substr(eq + 1, colon - eq - 1));
  const auto hi = number_and_unit(spec.substr(colon + 1));
  if (!lo || !hi || lo->second != hi->second || !(lo->first < hi->first))
    throw UsageError(fmt::format("--fit {}: expected LO:HI, two numbers with the same unit and LO below HI, got '{}'",
                                 p.key, spec.substr(eq + 1)));
  p.lo = lo->first;
  p.hi = hi->first;
  p.unit = lo->second;
  p.value = (p.lo + p.hi) / 2;
  // A last part "{a,b}" sets the parameter at each of those keys (several op kinds at once).
  std::vector<std::string> keys{p.key};
  if (const auto brace = p.key.find('{'); brace != std::string::npos) {
    const auto close = p.key.find('}', brace);
    if (close == std::string::npos || close + 1 != p.key.size())
      throw UsageError(fmt::format("--fit {}: a '{{a,b}}' list must close the key", p.key));
    keys.clear();
    std::istringstream names(p.key.substr(brace + 1, close - brace - 1));
    for (std::string name; std::getline(names, name, ',');)
      if (!name.empty()) keys.push_back(p.key.substr(0, brace) + name);
  }
  std::vector<std::string> compute;
  for (std::size_t d : platform.compute_devices()) compute.push_back(platform.devices[d].name);
  for (const auto& key : keys) {
    const auto expanded = expand_device_glob(key, compute);
    if (expanded.empty())
      throw UsageError(fmt::format("--fit {}: no compute device of platform '{}' matches {}", p.key, platform.name,
                                   key.substr(0, key.find('.'))));
    p.keys.insert(p.keys.end(), expanded.begin(), expanded.end());
  }
  return p;
}

StepFit fit_step_times(const std::vector<StepRow>& rows, std::vector<FitParam> params, const StepFitOptions& options,
                       const std::function<void(std::size_t, double, const std::vector<FitParam>&)>& progress) {
  StepFit fit;
  fit.fitted.assign(rows.size(), options.fit_rows.empty());
  for (std::size_t i : options.fit_rows) fit.fitted.at(i) = true;
  fs::create_directories(options.work_dir);

  // Every row of `which` run with the parameters' current values, `jobs` at a time.
  auto predict = [&](const std::vector<FitParam>& ps, const std::vector<std::size_t>& which) {
    std::vector<std::optional<double>> out(which.size());
    std::vector<std::string> failures(which.size());
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      for (std::size_t k; (k = next.fetch_add(1)) < which.size();) {
        const StepRow& r = rows[which[k]];
        const std::string base = (fs::path(options.work_dir) / fmt::format("row{}", r.line)).string();
        std::vector<std::string> argv{options.memsim, "run", options.platform, r.workload, "--json", "--no-advice",
                                      "--outputs", "summary", "--out", base};
        for (const auto& s : r.sets) argv.insert(argv.end(), {"--set", s});
        for (const auto& p : ps)
          for (const auto& key : p.keys) argv.insert(argv.end(), {"--set", key + "=" + p.text()});
        // A worker thread must not throw (std::terminate): a run that cannot start is a failure
        // of its row, reported with the others once every worker has ended.
        int rc = 0;
        try {
          rc = run_process(argv, base + ".json", base + ".err");
        } catch (const std::exception& e) {
          failures[k] = fmt::format("row at line {} ({}): {}", r.line, r.workload, e.what());
          continue;
        }
        if (rc != 0) {
          failures[k] = fmt::format("row at line {} ({}): memsim run exited {}: {}", r.line, r.workload, rc,
                                    trim(slurp(base + ".err")).substr(0, 400));
          continue;
        }
        try {
          const nlohmann::json summary = nlohmann::json::parse(slurp(base + ".json"));
          if (summary.at("iteration_time_s").is_null()) {
            // Measured, so it ran: the platform's memory is what does not hold it.
            failures[k] = fmt::format("row at line {} ({}): memsim's step ends with status {} on {}, so it has no "
                                      "iteration time; the measured run fit, so give the row's GPUs its memory in "
                                      "its set column (gpu*.hbm.capacity=80GiB) or leave the row out",
                                      r.line, r.workload, summary.value("status", std::string("unknown")),
                                      options.platform);
            continue;
          }
          out[k] = summary.at("iteration_time_s").get<double>();
        } catch (const std::exception& e) {
          failures[k] = fmt::format("row at line {} ({}): no iteration time in memsim's output: {}", r.line,
                                    r.workload, e.what());
        }
      }
    };
    std::vector<std::thread> threads;
    for (std::size_t j = 0; j < std::max<std::size_t>(1, options.jobs); ++j) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    for (const auto& f : failures)
      if (!f.empty()) throw InputError("calibrate --steps: " + f);
    return out;
  };

  std::vector<std::size_t> fitted_rows, held_rows;
  for (std::size_t i = 0; i < rows.size(); ++i) (fit.fitted[i] ? fitted_rows : held_rows).push_back(i);
  auto objective = [&](const std::vector<double>& u) {
    for (std::size_t k = 0; k < params.size(); ++k)
      params[k].value = params[k].lo + std::clamp(u[k], 0.0, 1.0) * (params[k].hi - params[k].lo);
    const auto predicted = predict(params, fitted_rows);
    double sum = 0;
    for (std::size_t k = 0; k < fitted_rows.size(); ++k) sum += relative_error(*predicted[k], rows[fitted_rows[k]].measured_s);
    const double mae = sum / static_cast<double>(fitted_rows.size());
    ++fit.evaluations;
    if (progress) progress(fit.evaluations, mae, params);
    return mae;
  };

  // Nelder-Mead on [0, 1]^n (reflection 1, expansion 2, contraction 1/2, shrink 1/2), from
  // the middle of every range with steps of a quarter of it.
  const std::size_t n = params.size();
  std::vector<std::vector<double>> simplex(n + 1, std::vector<double>(n, 0.5));
  for (std::size_t k = 0; k < n; ++k) simplex[k + 1][k] = 0.75;
  std::vector<double> f;
  for (const auto& x : simplex) f.push_back(objective(x));
  auto clamp01 = [](std::vector<double> x) {
    for (double& v : x) v = std::clamp(v, 0.0, 1.0);
    return x;
  };
  while (n > 0 && fit.evaluations + 2 <= options.evaluations) {
    std::vector<std::size_t> order(n + 1);
    for (std::size_t i = 0; i <= n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return f[a] < f[b]; });
    const std::size_t best = order.front(), worst = order.back(), second = order[n - 1];
    if (f[worst] - f[best] < 1e-5) break;
    std::vector<double> centroid(n, 0.0);
    for (std::size_t i : order)
      if (i != worst)
        for (std::size_t k = 0; k < n; ++k) centroid[k] += simplex[i][k] / static_cast<double>(n);
    auto along = [&](double t) {
      std::vector<double> x(n);
      for (std::size_t k = 0; k < n; ++k) x[k] = centroid[k] + t * (simplex[worst][k] - centroid[k]);
      return clamp01(x);
    };
    const auto xr = along(-1.0);
    const double fr = objective(xr);
    if (fr < f[best]) {
      const auto xe = along(-2.0);
      const double fe = objective(xe);
      if (fe < fr) {
        simplex[worst] = xe;
        f[worst] = fe;
      } else {
        simplex[worst] = xr;
        f[worst] = fr;
      }
    } else if (fr < f[second]) {
      simplex[worst] = xr;
      f[worst] = fr;
    } else {
      const auto xc = along(fr < f[worst] ? -0.5 : 0.5);
      const double fc = objective(xc);
      if (fc < std::min(fr, f[worst])) {
        simplex[worst] = xc;
        f[worst] = fc;
      } else {
        for (std::size_t i = 0; i <= n && fit.evaluations < options.evaluations; ++i) {
          if (i == best) continue;
          for (std::size_t k = 0; k < n; ++k) simplex[i][k] = simplex[best][k] + 0.5 * (simplex[i][k] - simplex[best][k]);
          f[i] = objective(simplex[i]);
        }
      }
    }
  }
  const std::size_t best =
      static_cast<std::size_t>(std::min_element(f.begin(), f.end()) - f.begin());
  for (std::size_t k = 0; k < n; ++k)
    params[k].value = params[k].lo + std::clamp(simplex[best][k], 0.0, 1.0) * (params[k].hi - params[k].lo);
  // Round to the precision written, so the YAML file gives what is reported.
  for (auto& p : params) p.value = std::stod(fmt::format("{:.4g}", p.value));

  // Every row, fitted and held out, at the chosen values.
  std::vector<std::size_t> all(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) all[i] = i;
  fit.predicted_s = predict(params, all);
  double fit_sum = 0, held_sum = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double e = relative_error(*fit.predicted_s[i], rows[i].measured_s);
    if (fit.fitted[i]) {
      fit_sum += e;
      fit.fit_max_abs_error = std::max(fit.fit_max_abs_error, e);
    } else {
      held_sum += e;
      fit.held_out_max_abs_error = std::max(fit.held_out_max_abs_error, e);
      ++fit.held_out;
    }
  }
  fit.fit_mean_abs_error = fit_sum / static_cast<double>(fitted_rows.size());
  fit.held_out_mean_abs_error = fit.held_out ? held_sum / static_cast<double>(fit.held_out) : 0.0;
  fit.params = std::move(params);
  return fit;
}

std::string platform_yaml_with(const std::string& platform_yaml, const std::vector<FitParam>& params) {
  YAML::Node root = YAML::Load(platform_yaml);
  const ConfigNode config = ConfigNode::parse_text(platform_yaml, "platform.yaml");
  for (const auto& p : params)
    for (const auto& key : p.keys) {
      const auto path = platform_override_path(config, key);
      if (!path) throw InputError(fmt::format("--fit {}: '{}' names nothing in the platform", p.key, key));
      // Walk with fresh handles: assigning to a yaml-cpp handle would rebind it, not descend.
      std::vector<YAML::Node> chain{root};
      for (std::size_t i = 0; i + 1 < path->size(); ++i) chain.push_back(chain.back()[(*path)[i]]);
      chain.back()[path->back()] = p.text();
    }
  YAML::Emitter e;
  e << root;
  return std::string(e.c_str()) + "\n";
}

}  // namespace memsim
