#include "sim/app/sweep_cli.h"

#include <cstdlib>
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/core/paths.h"
#include "sim/core/registry.h"
#include "sim/core/suggest.h"
#include "sim/core/units.h"
#include "sim/inputs/inputs.h"
#include "sim/policy/policy.h"
#include "sim/sweep/fit.h"
#include "sim/sweep/runner.h"

namespace memsim {
namespace {

std::string policy_list() {
  std::string names;
  for (const auto& p : builtin_policies()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

// -j N: at least one worker; 0 is a mistake, not "the default" (that is leaving -j out).
CLI::Validator workers() {
  return CLI::Validator(
      [](std::string& v) {
        const bool digits = !v.empty() && v.size() < 5 && v.find_first_not_of("0123456789") == std::string::npos;
        return digits && std::stoi(v) >= 1 && std::stoi(v) <= 4096
                   ? std::string()
                   : "expected a number of workers from 1 to 4096, got '" + v + "'";
      },
      "N from 1 to 4096");
}

struct FitArgs {
  std::string device, workload;
  std::vector<std::string> policies{"none"};
  std::vector<std::string> sets;
  FitOptions options;
  std::string out_dir = "out/fit";
  int jobs = 0;
  bool force = false, json = false;
};

// One policy's line of the table: what was found, or why nothing was.
struct FitRow {
  std::string policy;
  std::string problem;  // "no such policy ..." or the fit's error
  FitResult result;
};

std::string first_fail_text(const FitResult& r, std::int64_t limit) {
  if (r.first_fail == 0) return fmt::format("none up to {}", limit);
  if (r.fail_status == "invalid") return fmt::format("{} (the workload refuses it)", r.first_fail);
  return std::to_string(r.first_fail);
}

// Why not even the smallest value fits: the model state alone (weights, gradients and
// optimizer state, which no batch shrinks) against the compute tier, or else the step.
std::string why_nothing_fits(const FitArgs& a, const std::string& policy, const std::vector<Override>& overrides) {
  std::vector<Override> at_min = overrides;
  at_min.push_back(parse_override(fmt::format("workload.{}={}", a.options.axis, a.options.min)));
  try {
    const PlatformSpec platform = load_platform_arg(a.device, at_min);
    const Trace trace = load_workload_arg(a.workload, at_min);
    const auto compute = platform.compute_devices();
    if (compute.empty()) return "the platform has no compute device";
    const TierSpec& tier = platform.tiers[*platform.devices[compute.front()].compute_tier];
    const std::uint64_t weights = trace.total_bytes(Category::weight);
    const std::uint64_t grads = trace.total_bytes(Category::gradient);
    const std::uint64_t state = trace.total_bytes(Category::optimizer_state);
    const std::uint64_t model = weights + grads + state;
    if (model > tier.capacity_bytes)
      return fmt::format("0 because the model state alone is {} (weights {}, gradients {}, optimizer state {}), "
                         "more than {}'s {}{}",
                         format_bytes(model), format_bytes(weights), format_bytes(grads), format_bytes(state),
                         tier.name, format_bytes(tier.capacity_bytes),
                         policy == "none" ? "; a policy that offloads it (zero-offload, zero-infinity) may fit"
                                          : "");
    return fmt::format("0 because {} {} already runs out of memory (model state {} of {}'s {}); see its run "
                       "in the folder below",
                       a.options.axis, a.options.min, format_bytes(model), tier.name, format_bytes(tier.capacity_bytes));
  } catch (const std::exception&) {
    return fmt::format("0: {} {} runs out of memory", a.options.axis, a.options.min);
  }
}

int fit_command(const FitArgs& a) {
  std::vector<std::string> policies;
  for (const auto& p : a.policies) {
    std::size_t start = 0;
    while (start <= p.size()) {
      const auto comma = p.find(',', start);
      std::string name = p.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!name.empty()) policies.push_back(name);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (policies.empty()) throw UsageError("--policy: give at least one policy");
  std::vector<Override> overrides;
  for (const auto& s : a.sets) {
    Override o = parse_override(s);
    // The fit sets its own axis.
    if (o.target == "workload" && (o.key == a.options.axis || o.key.starts_with(a.options.axis + ".")))
      continue;
    overrides.push_back(std::move(o));
  }
  if (a.options.slowdown != 0 && a.options.slowdown < 1)
    throw UsageError(fmt::format("--slowdown expects a factor >= 1 (like 1.25), got {}", a.options.slowdown));
  if (a.options.min < 1 || a.options.max < a.options.min)
    throw UsageError(fmt::format("--min and --max: expected 1 <= min <= max, got {} and {}",
                                 a.options.min, a.options.max));

  Resolver resolver;
  PointStore store(a.out_dir, memsim_executable(), a.force);
  // Progress on a terminal: a search is a run at a time, a second or more each.
  const bool tty = isatty(STDERR_FILENO);
  std::size_t runs = 0;
  if (tty)
    store.on_result([&](const ResolvedRun& run, const PointResult& r) {
      std::string value;
      for (const Override& o : run.request.overrides)
        if (o.target == "workload" && o.key == a.options.axis) value = o.value;
      std::cerr << fmt::format("\r\033[Kmemsim fit: run {} ({} at {} {}: {}{})", ++runs, run.request.policy,
                               a.options.axis, value, r.status, r.ran ? "" : ", from an earlier run")
                << std::flush;
    });
  std::vector<FitRow> rows(policies.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < rows.size(); i = next++) {
      FitRow& row = rows[i];
      row.policy = policies[i];
      const bool is_file = row.policy.ends_with(".yaml") || row.policy.ends_with(".yml") ||
                           path_exists(row.policy);
      if (!is_file && !find_policy(row.policy)) {
        row.problem = fmt::format("no such policy{} (policies: {})",
                                  did_you_mean(row.policy, names_of(builtin_policies())), policy_list());
        continue;
      }
      try {
        row.result = run_fit({a.device, a.workload, row.policy, overrides}, a.options, resolver, store);
        row.problem = row.result.error;
      } catch (const std::exception& e) {
        row.problem = e.what();
      }
    }
  };
  {
    const int jobs = std::min<int>(default_jobs(a.jobs), static_cast<int>(rows.size()));
    std::vector<std::thread> threads;
    for (int j = 1; j < jobs; ++j) threads.emplace_back(work);
    work();
    for (auto& t : threads) t.join();
  }
  if (tty) std::cerr << "\r\033[K" << std::flush;

  const bool any_problem =
      std::any_of(rows.begin(), rows.end(), [](const FitRow& r) { return !r.problem.empty(); });
  // Errors go to standard error (the exit code is 1); the table and the JSON say which
  // policy had one.
  for (const auto& r : rows)
    if (!r.problem.empty()) std::cerr << fmt::format("memsim fit: policy {}: {}\n", r.policy, r.problem);
  const std::string& axis = a.options.axis;
  if (a.json) {
    nlohmann::ordered_json j;
    j["device"] = a.device;
    j["workload"] = a.workload;
    j["axis"] = axis;
    j["min"] = a.options.min;
    j["max"] = a.options.max;
    if (a.options.slowdown > 0) j["slowdown"] = a.options.slowdown;
    j["fits"] = nlohmann::ordered_json::array();
    for (const auto& r : rows) {
      nlohmann::ordered_json f;
      f["policy"] = r.policy;
      if (r.problem.empty() || !r.result.probes.empty()) {
        const nlohmann::json result = r.result.to_json();
        for (const auto& [k, v] : result.items()) f[k] = v;
      }
      if (!r.problem.empty()) f["error"] = r.problem;
      j["fits"].push_back(f);
    }
    std::cout << j.dump(2) << "\n";
    return any_problem ? 1 : 0;
  }

  std::cout << fmt::format("{} on {}: the largest {} that runs without oom (from {}, doubling, then "
                           "bisection; up to {})\n",
                           a.workload, a.device, axis, a.options.min, a.options.max);
  std::vector<std::vector<std::string>> table{{"policy", "max " + axis, "first failure"}};
  if (a.options.slowdown > 0) table[0].push_back(fmt::format("within {}x", a.options.slowdown));
  table[0].push_back("runs");
  const FitResult* baseline = nullptr;
  for (const auto& r : rows) {
    if (!r.problem.empty()) {
      table.push_back({r.policy, "error (on standard error)"});
      continue;
    }
    std::vector<std::string> line{r.policy, std::to_string(r.result.max),
                                  first_fail_text(r.result, a.options.max)};
    if (a.options.slowdown > 0) {
      line.push_back(r.result.max_within ? std::to_string(*r.result.max_within) : "-");
      baseline = &r.result;
    }
    line.push_back(std::to_string(r.result.probes.size()));
    table.push_back(std::move(line));
  }
  std::vector<std::size_t> width(table[0].size(), 0);
  for (const auto& line : table)
    if (line.size() == table[0].size())
      for (std::size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  for (const auto& line : table) {
    std::string text;
    for (std::size_t c = 0; c < line.size(); ++c)
      text += "  " + (c + 1 == line.size() ? line[c] : fmt::format("{:<{}}", line[c], width[c]));
    std::cout << text << "\n";
  }
  for (const auto& r : rows) {
    if (!r.problem.empty()) continue;
    // Each run of the search with the compute tier's peak (up to the oom, for one that ran
    // out), and why a search that ends at 0 does.
    std::string probes;
    for (const FitProbe& p : r.result.probes)
      probes += fmt::format("{}{} {}", probes.empty() ? "" : ", ", p.value,
                            p.status == "ok" ? format_bytes(static_cast<double>(p.peak_bytes)) : p.status);
    std::cout << fmt::format("  {} runs ({} peak): {}\n", r.policy, axis, probes);
    if (r.result.max == 0 && r.result.fail_status == "oom")
      std::cout << "  " << r.policy << ": " << why_nothing_fits(a, r.policy, overrides) << "\n";
  }
  if (baseline)
    std::cout << fmt::format("within {}x: time per {} at most {} x that of policy none at its max "
                             "{} {} ({:.4g} s per {})\n",
                             a.options.slowdown, axis == "batch" ? "sample" : "unit of " + axis,
                             a.options.slowdown, axis, baseline->baseline_value,
                             baseline->baseline_time_per_unit_s, axis == "batch" ? "sample" : "unit");
  std::cout << fmt::format("runs: {}/points/\n", a.out_dir);
  return any_problem ? 1 : 0;
}

class Commands : public SweepCommands {
 public:
  explicit Commands(CLI::App& app) {
    sweep_ = app.add_subcommand("sweep", "run every point of a sweep file (docs/sweeps.md)");
    sweep_->add_option("file", sweep_opts_.file, "the sweep file (configs/sweeps/*.yaml)")->required();
    sweep_->add_flag("--list", sweep_opts_.list, "print the points and stop");
    sweep_->add_option("-j,--jobs", sweep_opts_.jobs, "points run at once (default: one per CPU)")
        ->check(workers());
    sweep_->add_option("-o,--out", sweep_opts_.out_dir, "output folder (default out/<file stem>)");
    sweep_->add_flag("--force", sweep_opts_.force, "rerun points already finished");
    sweep_->add_option("--shard", shard_,
                       "I/N: run every N-th point from the I-th (default in a Slurm array job: "
                       "from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT)");
    sweep_->add_option("--merge", sweep_opts_.merge,
                       "join the results of these output folders (shards) into --out")
        ->expected(1, -1);

    fit_ = app.add_subcommand("fit", "find the largest batch (or other parameter) that runs without oom");
    fit_->add_option("device", fit_args_.device, "DEVICE (file or built-in preset)")->required();
    fit_->add_option("workload", fit_args_.workload, "WORKLOAD (file or built-in preset)")->required();
    fit_->add_option("--policy", fit_args_.policies,
                     "policies to fit, repeated or comma-separated (default none)");
    fit_->add_option("--axis", fit_args_.options.axis, "the workload parameter to search (default batch; seq_len)");
    fit_->add_option("--slowdown", fit_args_.options.slowdown,
                     "also the largest whose time per sample is within this factor of policy none's "
                     "at its own max (like 1.25)")
        ->check(CLI::Validator(
            [](std::string& v) {
              char* end = nullptr;
              const double x = std::strtod(v.c_str(), &end);
              return !v.empty() && *end == '\0' && x >= 1 && x <= 1e6
                         ? std::string()
                         : "expected a factor >= 1 (like 1.25), got '" + v + "'";
            },
            "FACTOR >= 1"));
    fit_->add_option("--min", fit_args_.options.min, "the smallest value tried (default 1)");
    fit_->add_option("--max", fit_args_.options.max, "the largest value tried (default 1000000)");
    fit_->add_option("--set", fit_args_.sets, "override a value, as for run");
    fit_->add_option("-j,--jobs", fit_args_.jobs, "policies fitted at once (default: one per CPU)")
        ->check(workers());
    fit_->add_option("-o,--out", fit_args_.out_dir, "where the runs are kept (default out/fit)");
    fit_->add_flag("--force", fit_args_.force, "rerun instead of reusing earlier runs");
    fit_->add_flag("--json", fit_args_.json, "print JSON");
  }

  std::optional<int> dispatch() override {
    if (sweep_->parsed()) {
      SweepOptions o = sweep_opts_;
      if (!shard_.empty()) parse_shard(shard_, &o.shard, &o.shards);
      if (o.jobs < 0) throw UsageError("-j expects a positive number of workers");
      o.memsim = memsim_executable();
      return sweep_command(o);
    }
    if (fit_->parsed()) return fit_command(fit_args_);
    return std::nullopt;
  }

 private:
  CLI::App* sweep_ = nullptr;
  CLI::App* fit_ = nullptr;
  SweepOptions sweep_opts_;
  std::string shard_;
  FitArgs fit_args_;
};

}  // namespace

namespace {
std::string& executable_override() {
  static std::string path;
  return path;
}
}  // namespace

void set_memsim_executable(const std::string& path) { executable_override() = path; }

std::string memsim_executable() {
  if (!executable_override().empty()) return executable_override();
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw InputError(fmt::format("cannot find the memsim executable: {}", ec.message()));
  return self.string();
}

std::unique_ptr<SweepCommands> add_sweep_commands(CLI::App& app) { return std::make_unique<Commands>(app); }

}  // namespace memsim
