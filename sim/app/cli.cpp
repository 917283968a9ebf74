#include "sim/app/cli.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <functional>
#include <future>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <algorithm>
#include <sstream>
#include <thread>
#include <tuple>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "sim/app/advice.h"
#include "sim/app/plan_cli.h"
#include "sim/app/run_command.h"
#include "sim/app/sweep_cli.h"
#include "sim/calibrate/calibrate.h"
#include "sim/collectives/collectives.h"
#include "sim/calibrate/steps.h"
#include "sim/core/error.h"
#include "sim/core/files.h"
#include "sim/core/heap.h"
#include "sim/core/limits.h"
#include "sim/core/paths.h"
#include "sim/core/presets.h"
#include "sim/core/suggest.h"
#include "sim/core/units.h"
#include "sim/engine/engine.h"
#include "sim/exec/replay.h"
#include "sim/inputs/inputs.h"
#include "sim/inputs/policy_args.h"
#include "sim/memory/allocator.h"
#include "sim/parallel/mesh.h"
#include "sim/parallel/scheme.h"
#include "sim/workload/parallel.h"
#include "sim/report/chrome_trace.h"
#include "sim/report/csv_stream.h"
#include "sim/core/text_out.h"
#include "sim/report/perfetto_trace.h"
#include "sim/report/events_csv.h"
#include "sim/report/kind_table.h"
#include "sim/report/peak.h"
#include "sim/report/trace_layout.h"
#include "sim/report/writers.h"
#include "sim/run/run.h"
#include "sim/workload/analysis.h"
#include "sim/workload/importers/archive.h"
#include "sim/workload/importers/importers.h"
#include "sim/workload/models/models.h"
#include "sim/workload/trace_io.h"

namespace memsim {
namespace {

using ordered_json = nlohmann::ordered_json;

std::vector<Override> parse_overrides(const std::vector<std::string>& sets) {
  std::vector<Override> out;
  for (const auto& s : sets) out.push_back(parse_override(s));
  return out;
}

// `memsim run X`: one argument may be the device or the workload; decide by what it is.
bool names_a_platform(const std::string& arg) {
  if (path_exists(arg))
    return sniff_foreign_trace(arg) == nullptr &&
           classify(ConfigNode::parse_file(arg)) == InputKind::platform;
  return find_preset("configs/devices", arg) != nullptr;
}

int cmd_run(const std::vector<std::string>& positional, const std::string& policy_arg,
            const std::vector<std::string>& sets, const std::string& out_dir, bool json,
            const OutputChoice& outputs, std::size_t max_events, const std::string& trace_format,
            bool devices_given, const std::string& only_devices,
            const ImportOptions& import, const std::string& durations, bool explain, bool advice,
            bool progress, bool exact) {
#if defined(__GLIBC__)
  // A run's other threads are its file writers, started once the step is simulated; glibc
  // gives each thread an arena of its own (up to 8 per core), whose pages stay resident.
  // Two arenas, the simulation's and one the writers share: a 16,384-GPU platform's run
  // 112 -> 105 MB of peak memory, no slower (`make platform-bench`).
  mallopt(M_ARENA_MAX, 2);
#endif
  allow_prefault();  // one step is built and simulated here (sim/core/heap.h)
  RunCommand command;
  if (positional.size() == 1) {
    if (names_a_platform(positional[0]))
      command.platform = positional[0];
    else
      command.workloads = {positional[0]};
  } else if (positional.size() >= 2) {
    command.platform = positional[0];
    command.workloads.assign(positional.begin() + 1, positional.end());
    if (positional.size() == 2 && !names_a_platform(positional[0]) && names_a_platform(positional[1]))
      throw UsageError(fmt::format("run {} {}: the device comes first: memsim run {} {}", positional[0],
                                   positional[1], positional[1], positional[0]));
  }
  command.policy = policy_arg;
  command.sets = sets;
  if (devices_given) command.devices = only_devices;
  command.import = import;
  command.durations = durations;
  command.outputs = outputs;
  command.max_events = max_events;
  command.advice = advice;
  command.advice_dir = out_dir;
  command.progress = progress;
  command.exact = exact;
  // The step, its plan and its records go with the process, not piece by piece: a million
  // ops would spend a second in destructors. Still reachable, so no leak to report.
  static RunOutcome* const outcome = new RunOutcome();
  const RunFiles files = run_to_folder(command, out_dir, trace_format, *outcome, std::cerr);
  const Summary& summary = outcome->result.summary;
  if (json)
    write_summary_json(summary, [](std::string_view text) { std::cout << text; });
  else
    std::cout << terminal_summary(summary, out_dir, files.written);
  // With --json the explanation goes to stderr, so stdout stays one JSON document.
  if (explain) (json ? std::cerr : std::cout) << (json ? "" : "\n") << explain_text(summary);
  return 0;
}

int cmd_explain(const std::string& out_dir) {
  std::cout << explain_text(read_peak_explanation(out_dir));
  return 0;
}

// A range of device names: "gpu8-15" when consecutive with one prefix, else listed.
std::string device_span(const PlatformSpec& p, const std::vector<std::size_t>& compute,
                        const std::vector<std::uint32_t>& ranks) {
  auto split = [](const std::string& n) {
    std::size_t i = n.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(n[i - 1]))) --i;
    return std::pair<std::string, std::string>(n.substr(0, i), n.substr(i));
  };
  const auto [prefix, first] = split(p.devices[compute[ranks.front()]].name);
  bool consecutive = !first.empty();
  for (std::size_t k = 1; k < ranks.size() && consecutive; ++k) {
    const auto [pre, num] = split(p.devices[compute[ranks[k]]].name);
    consecutive = pre == prefix && !num.empty() && ranks[k] == ranks[k - 1] + 1 &&
                  std::stoul(num) == std::stoul(first) + k;
  }
  if (consecutive && ranks.size() > 1)
    return fmt::format("{}{}-{}", prefix, first, split(p.devices[compute[ranks.back()]].name).second);
  std::string out;
  for (std::uint32_t r : ranks) out += (out.empty() ? "" : "+") + p.devices[compute[r]].name;
  return out;
}

// `memsim info PLATFORM WORKLOAD --placement`: where each rank of a parallel step runs and
// which devices each tensor-, data- and pipeline-parallel group spans.
int cmd_placement(const std::string& platform_arg, const std::string& workload_arg,
                  const std::vector<std::string>& sets, const ImportOptions& import) {
  const auto overrides = parse_overrides(sets);
  const PlatformSpec p = load_platform_arg(platform_arg, overrides);
  const Trace t = load_workload_arg(workload_arg, overrides, import);
  const ParallelLayout& l = t.parallel;
  const auto compute = p.compute_devices();
  const std::uint32_t ranks = std::max<std::uint32_t>(1, l.ranks);
  if (compute.size() < ranks)
    throw InputError(fmt::format("{}{}: the step runs on {} ranks, but platform {} has {} compute device(s){}",
                                 l.origin.empty() ? "" : l.origin + ": ", t.name, ranks, p.name, compute.size(),
                                 more_devices_hint(p, ranks)));
  const std::uint32_t tp = std::max<std::uint32_t>(1, l.tp), stages = std::max<std::uint32_t>(1, l.stages);
  const std::uint32_t cp = std::max<std::uint32_t>(1, l.cp);
  const std::uint32_t dp = std::max<std::uint32_t>(1, ranks / (tp * cp * stages));
  const std::uint32_t replicas = l.dp == dp && dp % std::max<std::uint32_t>(1, l.dp_replicas) == 0 ? l.dp_replicas : 1;
  const Mesh mesh = Mesh::megatron(tp, dp, l.dp == dp ? l.ep : 1, stages, cp, replicas);
  auto nodes = [&](const std::vector<std::uint32_t>& rs) {
    std::set<std::uint32_t> n;
    for (std::uint32_t r : rs) n.insert(p.devices[compute[r]].node);
    return n;
  };
  const std::string what = t.description.empty() ? t.name : t.description;
  if (cp > 1)
    std::cout << fmt::format(
        "{} on {}: {} ranks (tp {}, cp {}, dp {}, pp {}), rank = tp_rank + {} x (cp_rank + {} x (dp_rank + {} x stage))\n",
        what, p.name, ranks, tp, cp, dp, stages, tp, cp, dp);
  else
    std::cout << fmt::format("{} on {}: {} ranks (tp {}, dp {}, pp {}), rank = tp_rank + {} x (dp_rank + {} x stage)\n",
                             what, p.name, ranks, tp, dp, stages, tp, dp);
  constexpr std::size_t kMostGroups = 8;  // listed per kind; the rest counted
  for (std::uint32_t s = 0; s < stages; ++s) {
    const std::uint32_t first = mesh.with(0, "pp", s);
    const std::vector<std::uint32_t> all = mesh.group(Mesh::stage_dims(), first);
    const auto n = nodes(all);
    std::cout << fmt::format("  stage {:<3} ranks {}-{} on {} ({} node{})\n", s, all.front(), all.back(),
                             device_span(p, compute, all), n.size(), n.size() == 1 ? "" : "s");
    // The stage's groups of one kind, each once, in order of their first rank.
    auto list = [&](std::string_view kind) {
      const std::vector<std::string_view> dims = Mesh::dims_of(kind);
      if (mesh.size(dims) < 2) return;
      std::string groups;
      bool one_node = true;
      std::size_t count = 0;
      for (std::uint32_t r : all) {
        if (mesh.first(r, dims) != r) continue;
        const auto rs = mesh.group(dims, r);
        one_node &= nodes(rs).size() == 1;
        if (count++ < kMostGroups) groups += (groups.empty() ? "" : ", ") + device_span(p, compute, rs);
      }
      if (count > kMostGroups) groups += fmt::format(", ... ({} groups)", count);
      std::cout << fmt::format("    {} groups of {} ({}): {}\n", kind, mesh.size(dims),
                               one_node ? "each within a node" : "across nodes", groups);
    };
    for (std::string_view kind : {"tp", "cp", "dp", "ep"}) list(kind);
    if (replicas > 1)
      for (std::string_view kind : {"dp_shard", "dp_replica"}) list(kind);
  }
  if (stages > 1)
    std::cout << fmt::format("  pipeline: stage s sends to s + 1 from each rank to the rank {} above it ({})\n",
                             tp * cp * dp, nodes({0, mesh.with(0, "pp", 1)}).size() > 1 ? "across nodes" : "within a node");
  return 0;
}

// `memsim info [DEVICE] WORKLOAD --op-kinds`: the op kinds the workload emits, with their
// ops, FLOPs and bytes; with a device, the entry of its efficiency tables that times each
// (the platform's first compute device, as `calibrate` takes it).
int cmd_op_kinds(const std::string& platform_arg, const std::string& workload_arg,
                 const std::vector<std::string>& sets, bool json, const ImportOptions& import) {
  const auto overrides = parse_overrides(sets);
  std::optional<PlatformSpec> platform;
  const DeviceSpec* device = nullptr;
  if (!platform_arg.empty()) {
    platform = load_platform_arg(platform_arg, overrides);
    const auto compute = platform->compute_devices();
    if (compute.empty()) throw InputError(fmt::format("{}: no compute device", platform->source));
    device = &platform->devices[compute.front()];
  }
  const Trace t = load_workload_arg(workload_arg, overrides, import);
  if (!json) print_import_notes(t, std::cerr);
  const PlatformSpec* p = platform ? &*platform : nullptr;
  std::cout << (json ? op_kinds_json(t, p, device) : op_kinds_text(t, p, device));
  return 0;
}

int cmd_info(const std::string& arg, const std::vector<std::string>& sets, bool json, const ImportOptions& import) {
  const auto overrides = parse_overrides(sets);
  const bool platform_arg = names_a_platform(arg);
  if (platform_arg) {
    PlatformSpec p = load_platform_arg(arg, overrides);
    if (json) {
      ordered_json j;
      j["name"] = p.name;
      j["source"] = p.source;
      for (const auto& d : p.devices) {
        ordered_json dj;
        dj["kind"] = to_string(d.kind);
        for (int i = 0; i < kDTypeCount; ++i)
          if (d.peak_flops[i] > 0) dj["peak_flops"][std::string(to_string(static_cast<DType>(i)))] = d.peak_flops[i];
        dj["launch_overhead_s"] = d.launch_overhead_s;
        dj["streams"] = d.streams;
        dj["copy_engines"] = d.copy_engines;
        j["devices"][d.name] = dj;
      }
      for (const auto& t : p.tiers)
        j["tiers"][t.name] = {{"role", to_string(t.role)}, {"capacity_bytes", t.capacity_bytes},
                              {"bandwidth_Bps", t.bandwidth_Bps}, {"allocator", t.allocator.str()}};
      for (const auto& l : p.links)
        j["links"][l.name] = {{"from", l.from.str()}, {"to", l.to.str()}, {"bandwidth_Bps", l.bandwidth_Bps},
                              {"latency_s", l.latency_s}, {"duplex", l.full_duplex ? "full" : "half"}};
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    std::cout << fmt::format("platform {} ({})\n", p.name, p.source);
    for (const auto& d : p.devices) {
      std::string rates;
      for (int i = 0; i < kDTypeCount; ++i)
        if (d.peak_flops[i] > 0)
          rates += fmt::format("{}{} {}", rates.empty() ? "" : ", ", to_string(static_cast<DType>(i)),
                               format_rate(d.peak_flops[i]));
      std::cout << fmt::format("  device {:<8} {}  {}\n", d.name, to_string(d.kind),
                               rates.empty() ? "(no compute)" : rates);
    }
    for (const auto& t : p.tiers)
      std::cout << fmt::format("  tier   {:<12} {:<8} {:>10}  {}  allocator {}\n", t.name,
                               to_string(t.role), format_bytes(t.capacity_bytes),
                               format_bandwidth(t.bandwidth_Bps), t.allocator);
    for (const auto& l : p.links)
      std::cout << fmt::format("  link   {:<8} {} <-> {}  {} {}-duplex, latency {}\n", l.name,
                               l.from, l.to, format_bandwidth(l.bandwidth_Bps),
                               l.full_duplex ? "full" : "half", format_seconds(l.latency_s));
    return 0;
  }
  Trace t = load_workload_arg(arg, overrides, import);
  if (!json) print_import_notes(t, std::cerr);
  CategoryBytes by{};
  for (const auto& b : t.buffers) by[static_cast<int>(b.category)] += b.bytes;
  double flops[3] = {0, 0, 0};
  std::size_t ops_by_phase[3] = {0, 0, 0};
  for (const auto& op : t.ops) {
    flops[static_cast<int>(op.phase)] += op.flops;
    ++ops_by_phase[static_cast<int>(op.phase)];
  }
  const std::uint64_t params = parameter_count(t);
  const std::uint64_t peak = exec::baseline_peak_bytes(t);
  if (json) {
    ordered_json j;
    j["name"] = t.name;
    j["description"] = t.description;
    j["parameters"] = params;
    j["flops"] = flops[0] + flops[1] + flops[2];
    j["baseline_peak_bytes"] = peak;
    j["ops"] = t.ops.size();
    j["buffers"] = t.buffers.size();
    for (int p = 0; p < 3; ++p) {
      const std::string phase(to_string(static_cast<Phase>(p)));
      j["ops_by_phase"][phase] = ops_by_phase[p];
      j["flops_by_phase"][phase] = flops[p];
    }
    for (int c = 0; c < kCategoryCount; ++c) j["bytes_by_category"][std::string(to_string(static_cast<Category>(c)))] = by[c];
    std::map<std::string, std::size_t> comm;
    for (const auto& op : t.ops)
      if (op.message_bytes > 0) ++comm[op.kind];
    j["communication_ops"] = comm;
    j["import_notes"] = t.import_notes;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{}\n", t.description.empty() ? t.name : t.description);
  std::cout << fmt::format("  parameters  {}\n", params);
  std::cout << fmt::format("  ops         {} (forward {}, backward {}, optimizer {})\n", t.ops.size(),
                           ops_by_phase[0], ops_by_phase[1], ops_by_phase[2]);
  std::cout << fmt::format("  buffers     {}\n", t.buffers.size());
  std::cout << fmt::format("  peak        {} with memory sharing by liveness (policy none, ideal allocator)\n",
                           format_bytes(static_cast<double>(peak)));
  std::cout << fmt::format("  FLOPs       {:.4g} (forward {:.4g}, backward {:.4g}, optimizer {:.4g})\n",
                           flops[0] + flops[1] + flops[2], flops[0], flops[1], flops[2]);
  std::cout << "  bytes by category (all buffers, not a peak):\n";
  for (int c = 0; c < kCategoryCount; ++c)
    if (by[c] > 0)
      std::cout << fmt::format("    {:<16} {}\n", to_string(static_cast<Category>(c)), format_bytes(by[c]));
  return 0;
}

int cmd_validate(const std::vector<std::string>& files) {
  int bad = 0;
  for (const auto& f : files) {
    try {
      if (const ForeignTrace foreign = sniff_foreign_trace(f)) {
        import_foreign_trace(f, foreign);
        std::cout << fmt::format("{}: ok\n", f);
        continue;
      }
      ConfigNode root = ConfigNode::parse_file(f);
      switch (classify(root)) {
        case InputKind::platform: load_platform(root); break;
        case InputKind::workload_spec: load_workload_arg(f, {}); break;
        case InputKind::trace: read_trace(root); break;
        case InputKind::unknown:
          throw InputError(fmt::format(
              "{}: not a memsim input: expected a platform (devices:), a workload spec (model:) "
              "or a memsim trace{}",
              f, hf_config_hint(root)));
      }
      std::cout << fmt::format("{}: ok\n", f);
    } catch (const InputError& e) {
      std::cerr << e.what() << "\n";
      ++bad;
    }
  }
  return bad ? 1 : 0;
}

int cmd_trace(const std::string& workload, const std::vector<std::string>& sets, const std::string& out,
              const ImportOptions& import) {
  Trace t = load_workload_arg(workload, parse_overrides(sets), import);
  print_import_notes(t, std::cerr);
  std::ostringstream text;
  write_trace_json(t, text);
  write_output_file(out, text.str());
  return 0;
}

int cmd_calibrate(const std::string& device_arg, const std::vector<std::string>& trace_args,
                  const std::string& device_name, const std::string& out, const std::string& residuals) {
  PlatformSpec platform = load_platform_arg(device_arg, {});
  std::string device = device_name;
  if (device.empty()) {
    const auto compute = platform.compute_devices();
    if (compute.empty()) throw InputError(fmt::format("{}: no compute device to calibrate", platform.source));
    device = platform.devices[compute.front()].name;
  }
  // Several traces are fitted together: their measured ops pooled into one list (the fit
  // reads only each op's kind, work and time), so kinds one model lacks come from another.
  Trace trace = load_workload_arg(trace_args.front(), {});
  for (std::size_t k = 1; k < trace_args.size(); ++k) {
    const Trace more = load_workload_arg(trace_args[k], {});
    trace.name += "+" + more.name;
    for (Op op : more.ops) {
      op.id = static_cast<OpId>(trace.ops.size());
      op.inputs.clear();
      op.outputs.clear();
      op.updates.clear();
      trace.ops.push_back(std::move(op));
    }
  }
  const Calibration fit = calibrate(trace, platform, device, 3,
                                    residuals == "absolute" ? Residuals::absolute : Residuals::relative);
  std::cout << fmt::format("{} on {} ({}): {} ops fitted, {} held out\n", trace.name, platform.name, device,
                           fit.fitted_ops, fit.held_out_ops);
  // One row per kind: its compute-bound ops' efficiency, then its memory-bound ops'.
  std::set<std::string> kinds;
  for (const auto& [kind, f] : fit.compute) kinds.insert(kind);
  for (const auto& [kind, f] : fit.memory) kinds.insert(kind);
  auto cell = [](const std::map<std::string, KindFit>& table, const std::string& kind) {
    auto it = table.find(kind);
    return it == table.end() ? std::string("-")
                             : fmt::format("{:.4f} ({} ops)", it->second.efficiency, it->second.samples);
  };
  std::cout << fmt::format("  {:<22} {:<20} {}\n", "kind", "compute efficiency", "memory efficiency");
  for (const auto& kind : kinds)
    std::cout << fmt::format("  {:<22} {:<20} {}\n", kind, cell(fit.compute, kind), cell(fit.memory, kind));
  std::cout << fmt::format("  launch overhead        {}\n", format_seconds(fit.launch_overhead_s));
  std::cout << fmt::format("  which term bounds each op: {} after {} fit(s)\n",
                           fit.converged ? "stable" : "still changing (kept the closest fit)", fit.iterations);
  if (!fit.at_roofline.empty())
    std::cout << fmt::format("  held at the roofline (efficiency 1) by the bounds: {}\n", fmt::join(fit.at_roofline, ", "));
  if (fit.compute.empty()) std::cout << "  no fitted op was compute-bound: efficiency left as it was\n";
  if (fit.memory.empty()) std::cout << "  no fitted op was memory-bound: memory_efficiency left as it was\n";
  std::cout << fmt::format("  error per op: fitted {:.2f}%, held out {:.2f}%; held-out total time {:+.2f}%\n",
                           100 * fit.fit_mean_abs_error, 100 * fit.held_out_mean_abs_error,
                           100 * fit.held_out_total_error);
  // What "error per op" is, and why its mean can be large while the times add up.
  std::cout << fmt::format("    (|predicted - measured| / measured, averaged over ops; fitted: median {:.2f}%, "
                           "{:.2f}% weighted by measured time, total time {:+.2f}%)\n",
                           100 * fit.fit_median_abs_error, 100 * fit.fit_time_weighted_error,
                           100 * fit.fit_total_error);
  if (fit.fit_ops_off_double > 0 && fit.fit_mean_abs_error > 2 * fit.fit_time_weighted_error)
    std::cout << fmt::format(
        "    the mean is large because {} of the {} fitted ops are off by more than 100%: they average {} "
        "(the fitted ops {}) and hold {:.2f}% of the measured time; {}\n",
        fit.fit_ops_off_double, fit.fitted_ops, format_seconds(fit.fit_ops_off_double_mean_s),
        format_seconds(fit.fit_mean_measured_s), 100 * fit.fit_ops_off_double_time_share,
        residuals == "absolute"
            ? "absolute residuals fit seconds, so such short ops weigh little (--residuals relative "
              "weighs every op alike)"
            : "a roofline with one overhead per device cannot time both them and the long ops");
  if (!out.empty()) {
    std::string text;
    if (path_exists(device_arg)) {
      text = read_input_file(device_arg);
    } else {
      text = find_preset("configs/devices", device_arg)->text;
    }
    write_output_file(out, calibrated_platform_yaml(text, device, fit));
    std::cout << fmt::format("  wrote {}\n", out);
  }
  return 0;
}

struct StepCalibrationArgs {
  std::string csv;
  std::vector<std::string> fit;
  std::string fit_rows;
  std::size_t evaluations = 60;
  std::size_t jobs = 0;
  std::string table;
};

// "1-30,40" -> {0..29, 39}: 1-based data rows, checked against the count.
std::vector<std::size_t> parse_row_spec(const std::string& spec, std::size_t rows) {
  std::vector<std::size_t> out;
  std::istringstream parts(spec);
  for (std::string part; std::getline(parts, part, ',');) {
    const auto dash = part.find('-');
    std::size_t a = 0, b = 0;
    try {
      a = std::stoul(part.substr(0, dash));
      b = dash == std::string::npos ? a : std::stoul(part.substr(dash + 1));
    } catch (const std::exception&) {
      throw UsageError(fmt::format("--fit-rows: expected row numbers like 1-30,40, found '{}'", part));
    }
    if (a < 1 || b < a || b > rows)
      throw UsageError(fmt::format("--fit-rows: '{}' is not within rows 1-{}", part, rows));
    for (std::size_t i = a; i <= b; ++i) out.push_back(i - 1);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int cmd_calibrate_steps(const std::string& device_arg, const StepCalibrationArgs& args, const std::string& out) {
  if (args.fit.empty()) throw UsageError("calibrate --steps needs at least one --fit KEY=LO:HI");
  const PlatformSpec platform = load_platform_arg(device_arg, {});
  const std::vector<StepRow> rows = read_step_rows(args.csv);
  std::vector<FitParam> params;
  for (const auto& spec : args.fit) params.push_back(parse_fit_param(spec, platform));
  StepFitOptions options;
  options.memsim = std::filesystem::read_symlink("/proc/self/exe").string();
  options.platform = device_arg;
  options.jobs = args.jobs ? args.jobs : std::max(1u, std::thread::hardware_concurrency());
  options.evaluations = std::max<std::size_t>(args.evaluations, params.size() + 1);
  if (!args.fit_rows.empty()) options.fit_rows = parse_row_spec(args.fit_rows, rows.size());
  const auto tmp = std::filesystem::temp_directory_path() / fmt::format("memsim-calibrate-{}", ::getpid());
  options.work_dir = tmp.string();
  const std::size_t fitted = options.fit_rows.empty() ? rows.size() : options.fit_rows.size();
  std::cout << fmt::format("{} measured steps on {}: fitting {} parameter(s) to {} row(s), at most {} evaluations\n",
                           args.csv, platform.name, params.size(), fitted, options.evaluations);
  StepFit fit;
  try {
    fit = fit_step_times(rows, params, options, [](std::size_t k, double mae, const std::vector<FitParam>& ps) {
      std::string values;
      for (const auto& p : ps) values += fmt::format(" {}={}", p.key, p.text());
      std::cerr << fmt::format("  evaluation {}: mean error {:.2f}% at{}\n", k, 100 * mae, values);
    });
  } catch (...) {
    std::filesystem::remove_all(tmp);
    throw;
  }
  std::filesystem::remove_all(tmp);
  std::cout << fmt::format("  {} evaluations; chosen:\n", fit.evaluations);
  for (const auto& p : fit.params)
    std::cout << fmt::format("    {:<44} {:>10}   (range {}{} to {}{})\n", p.key, p.text(), p.lo, p.unit, p.hi, p.unit);
  std::cout << fmt::format("  fitted rows ({}): mean absolute error {:.2f}%, worst {:.2f}%\n", fitted,
                           100 * fit.fit_mean_abs_error, 100 * fit.fit_max_abs_error);
  if (fit.held_out)
    std::cout << fmt::format("  held-out rows ({}), predicted: mean absolute error {:.2f}%, worst {:.2f}%\n",
                             fit.held_out, 100 * fit.held_out_mean_abs_error, 100 * fit.held_out_max_abs_error);
  if (!args.table.empty()) {
    std::string csv = "line,workload,set,measured_ms,predicted_ms,error_pct,fitted\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const double p = *fit.predicted_s[i], m = rows[i].measured_s;
      std::string sets;
      for (const auto& s : rows[i].sets) sets += (sets.empty() ? "" : " ") + s;
      csv += fmt::format("{},{},\"{}\",{:.3f},{:.3f},{:.2f},{}\n", rows[i].line, rows[i].workload, sets, 1e3 * m,
                         1e3 * p, 100 * (p - m) / m, fit.fitted[i] ? "yes" : "no");
    }
    write_output_file(args.table, csv);
    std::cout << fmt::format("  wrote {}\n", args.table);
  }
  if (!out.empty()) {
    const std::string text = path_exists(device_arg) ? read_input_file(device_arg)
                                                     : find_preset("configs/devices", device_arg)->text;
    std::string header = fmt::format("# {} with parameters fitted by memsim calibrate --steps {} ({} rows, mean absolute "
                                     "error {:.2f}%):\n",
                                     platform.name, args.csv, fitted, 100 * fit.fit_mean_abs_error);
    for (const auto& p : fit.params) header += fmt::format("#   {} = {}\n", p.key, p.text());
    write_output_file(out, header + platform_yaml_with(text, fit.params));
    std::cout << fmt::format("  wrote {}\n", out);
  }
  return 0;
}

void print_params(const std::vector<ParamSpec>& params) {
  for (const auto& p : params)
    std::cout << fmt::format("      {:<16} {}{}\n", p.name, p.description,
                             p.default_value ? fmt::format(" (default {})", *p.default_value)
                                             : std::string(" (required)"));
}

ordered_json params_json(const std::vector<ParamSpec>& params) {
  ordered_json j = ordered_json::array();
  for (const auto& p : params)
    j.push_back({{"name", p.name}, {"description", p.description},
                 {"default", p.default_value ? ordered_json(*p.default_value) : ordered_json()},
                 {"required", !p.default_value}});
  return j;
}

const std::vector<std::string> kListed = {"policies",  "allocators", "models", "collectives",
                                          "importers", "parallel",   "presets"};

// `memsim list [WHAT] [--json]`: every registered policy, allocator, model and collective
// algorithm with its parameters, the importers of other tools' traces, the parallel schemes with
// their keys of a workload's parallel: section, and the built-in presets; WHAT picks one of them.
int cmd_list(const std::string& what, bool json) {
  if (!what.empty() && std::find(kListed.begin(), kListed.end(), what) == kListed.end())
    throw UsageError(fmt::format("list {}: expected one of {}{}", what, fmt::join(kListed, ", "),
                                 did_you_mean(what, kListed)));
  auto wanted = [&](const char* part) { return what.empty() || what == part; };
  struct Group {
    const char* key;
    const char* heading;
    std::vector<std::tuple<std::string, std::string, std::vector<ParamSpec>>> items;
  };
  std::vector<Group> groups;
  if (wanted("policies")) {
    groups.push_back({"policies", "policies (--policy NAME, parameters with --set policy.KEY=VALUE):", {}});
    for (const auto& p : builtin_policies()) groups.back().items.emplace_back(p.name, p.description, p.params);
  }
  if (wanted("allocators")) {
    groups.push_back({"allocators", "allocators (a tier's allocator:, parameters as keys of the tier):", {}});
    for (const auto& a : builtin_allocators()) groups.back().items.emplace_back(a.name, a.description, a.params);
  }
  if (wanted("models")) {
    groups.push_back({"models", "models (a workload spec's model:, parameters with --set workload.KEY=VALUE):", {}});
    for (const auto& m : builtin_models()) groups.back().items.emplace_back(m.name, m.description, m.params);
  }
  if (wanted("collectives")) {
    groups.push_back({"collectives", "collective algorithms (a platform's collectives: algorithms: {KIND: NAME}):", {}});
    for (const auto& a : builtin_collective_algorithms())
      groups.back().items.emplace_back(a.name, fmt::format("{} [{}]", a.description, fmt::join(a.kinds, ", ")),
                                       std::vector<ParamSpec>{});
  }
  if (wanted("importers")) {
    groups.push_back({"importers", "importers (a trace file as the workload, recognised by its content):", {}});
    for (const auto& i : builtin_importers())
      groups.back().items.emplace_back(i.name, i.description, std::vector<ParamSpec>{});
  }
  const auto devices = preset_names("configs/devices");
  const auto workloads = preset_names("workloads");
  if (json) {
    ordered_json j;
    for (const Group& g : groups) {
      ordered_json items = ordered_json::array();
      for (const auto& [name, description, params] : g.items)
        items.push_back({{"name", name}, {"description", description}, {"params", params_json(params)}});
      j[g.key] = items;
    }
    if (wanted("parallel")) {
      // Every key with the scheme that declares it, then the schemes.
      ordered_json keys = ordered_json::array(), schemes = ordered_json::array();
      for (const ParallelScheme& scheme : builtin_parallel_schemes()) {
        ordered_json names = ordered_json::array();
        for (ordered_json key : params_json(scheme.params)) {
          names.push_back(key["name"]);
          key["scheme"] = scheme.name;
          keys.push_back(std::move(key));
        }
        schemes.push_back({{"name", scheme.name},
                           {"description", scheme.description},
                           {"carried_out_by", scheme.transforms() ? "step transform" : "model generator"},
                           {"keys", names}});
      }
      j["parallel"] = keys;
      j["parallel_schemes"] = schemes;
    }
    if (wanted("presets")) j["presets"] = {{"devices", devices}, {"workloads", workloads}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  bool first = true;
  for (const Group& g : groups) {
    std::cout << (first ? "" : "\n") << g.heading << "\n";
    first = false;
    for (const auto& [name, description, params] : g.items) {
      std::cout << fmt::format("  {:<18} {}\n", name, description);
      print_params(params);
    }
  }
  if (wanted("parallel")) {
    std::cout << (first ? "" : "\n")
              << "parallel keys (a workload's parallel: section, --set parallel.KEY=VALUE), by parallel scheme:\n";
    first = false;
    for (const ParallelScheme& scheme : builtin_parallel_schemes()) {
      std::cout << fmt::format("  {:<18} {}\n", scheme.name, scheme.description);
      print_params(scheme.params);
    }
  }
  if (wanted("presets")) {
    std::cout << (first ? "" : "\n") << "built-in devices:   ";
    for (const auto& n : devices) std::cout << n << " ";
    std::cout << "\nbuilt-in workloads: ";
    for (const auto& n : workloads) std::cout << n << " ";
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

int cli_main(int argc, char** argv) {
  // Into a file or a pipe, standard output is written once at the end, so a failed write is
  // seen with its reason (finish_standard_output).
  static char stdout_buffer[1 << 20];
  if (!::isatty(STDOUT_FILENO)) std::setvbuf(stdout, stdout_buffer, _IOFBF, sizeof stdout_buffer);
  CLI::App app{"memsim: a discrete-event simulator of accelerator memory for deep-learning training"};
  app.set_version_flag("--version", std::string("memsim ") + MEMSIM_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options (--max-input-size) may follow the command
  std::string max_input_size;
  app.add_option("--max-input-size", max_input_size,
                 "the largest input file read, compressed or not (default 4GiB)");
  std::string max_ops, max_points;
  app.add_option("--max-ops", max_ops,
                 "the most ops a run's step may hold, all simulated devices together (default 1e7); "
                 "larger ones are refused before they are built");
  app.add_option("--max-points", max_points, "the most points a sweep may list or run (default 10000)");

  std::vector<std::string> positional, sets;
  std::string policy = "none", out_dir = "out", out_file;
  bool json = false;

  auto* run = app.add_subcommand("run", "simulate one training iteration of WORKLOAD on DEVICE");
  run->add_option("inputs", positional,
                  "[DEVICE] [WORKLOAD]: files or built-in presets (default: a100-40gb resnet50)");
  run->add_option("--policy", policy, "policy name or policy YAML (default none; see `memsim list`)");
  run->add_option("--set", sets, "override a value: workload.batch=128, policy.KEY=V, gpu0.hbm.capacity=12GiB");
  run->add_option("-o,--out", out_dir, "output folder (default out)");
  run->add_flag("--json", json, "print summary.json instead of the table");
  bool events = false;
  std::size_t max_events = kDefaultMaxTraceEvents;
  run->add_flag("--events", events,
                "also write events.csv: every allocation and free with its tier, address and bytes");
  std::string outputs;
  run->add_option("--outputs", outputs,
                  "which files to write, separated by commas: summary, timeline, memory, peak, tiles, trace, "
                  "events, all (default: all but events)");
  run->add_option("--max-events", max_events,
                  "most events in the trace (default 1000000); later ones are left out, with a note")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.find_first_not_of("0123456789") == std::string::npos && !v.empty() && v.size() < 16
                       ? std::string()
                       : "expected a number of events >= 0, got '" + v + "'";
          },
          "N >= 0"));
  std::string trace_format = "pftrace";
  run->add_option("--trace-format", trace_format,
                  "pftrace: trace.pftrace, Perfetto's own format (ui.perfetto.dev; the default); "
                  "json: trace.json, Chrome's trace event format (chrome://tracing, speedscope)")
      ->check(CLI::IsMember({"pftrace", "json"}));
  bool advice = false, no_advice = false;
  run->add_flag("--advice", advice,
                "on oom, run the candidates that find what would fit (a smaller batch, another policy); "
                "the default, but not with --json");
  run->add_flag("--no-advice", no_advice, "on oom, do not look for what would fit");
  bool quiet = false;
  run->add_flag("--quiet,-q", quiet,
                "no progress line on standard error (there is one for a run of more than a few seconds "
                "when standard error is a terminal)");
  bool exact = false;
  run->add_flag("--exact", exact,
                "every op its own event in SimGrid: no summing of the ops a stream runs while no other "
                "stream can act (slower; the same result but for the last bits of rounding)");
  bool explain = false;
  run->add_flag("--explain", explain,
                "after the summary, every buffer live at each tier's peak, by layer and category");
  std::string only_devices;
  run->add_option("--devices", only_devices,
                  "run on these compute devices only, separated by commas (default: all of them)");
  // Imported traces (docs/trace-format.md).
  ImportOptions import;
  std::int64_t step = -1;
  auto import_options = [&](CLI::App* cmd) {
    cmd->add_option("--step", step, "a PyTorch Execution Trace's ProfilerStep#N to import (default: the last complete one)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--kineto", import.kineto,
                    "the Kineto trace recorded with the Execution Trace: its kernels' GPU times are the ops' measured durations");
  };
  import_options(run);
  std::string durations;
  run->add_option("--durations", durations,
                  "measured: time ops by the trace's measured durations where it has them; model: by the cost "
                  "model (default: measured on the platform they were measured on, or with --kineto)")
      ->check(CLI::IsMember({"measured", "model"}));

  std::string target;
  auto* info = app.add_subcommand("info", "describe a workload (parameters, ops, bytes, FLOPs) or a device");
  info->add_option("target", target, "WORKLOAD or DEVICE.yaml (file or built-in preset)")->required();
  std::string info_workload;
  info->add_option("workload", info_workload,
                   "with --placement: the WORKLOAD to lay out on the platform TARGET; with --op-kinds: the "
                   "WORKLOAD whose kinds the device TARGET's efficiency tables time");
  bool placement = false;
  info->add_flag("--placement", placement,
                 "memsim info PLATFORM WORKLOAD --placement: which devices each rank and each tensor-, data- "
                 "and pipeline-parallel group runs on");
  bool op_kinds = false;
  info->add_flag("--op-kinds", op_kinds,
                 "memsim info [DEVICE] WORKLOAD --op-kinds: the op kinds the workload emits (ops, FLOPs, bytes, "
                 "phases); with a DEVICE, which entry of its efficiency and memory_efficiency tables times each");
  info->add_option("--set", sets, "override a value, as for run");
  info->add_flag("--json", json, "print JSON");
  import_options(info);

  auto* explain_cmd = app.add_subcommand(
      "explain", "what was live at each tier's peak in a run's output folder, by layer and category");
  explain_cmd->add_option("out", target, "the --out folder of a `memsim run` (default out)");

  std::vector<std::string> files;
  auto* validate_cmd = app.add_subcommand("validate", "check platform, workload and trace files");
  validate_cmd->add_option("files", files, "files to check")->required();

  auto* trace = app.add_subcommand("trace", "write a workload's trace in the native JSON format");
  trace->add_option("workload", target, "WORKLOAD (file or built-in preset)")->required();
  trace->add_option("-o,--out,--output", out_file, "output file ('-' for stdout)")->required();
  trace->add_option("--set", sets, "override a workload value: workload.batch=8");
  import_options(trace);

  std::string calib_device, calib_name;
  std::vector<std::string> calib_traces;
  auto* calib = app.add_subcommand(
      "calibrate", "fit a device's per-op-kind efficiencies to a trace's measured op durations");
  calib->add_option("device", calib_device, "DEVICE (file or built-in preset)")->required();
  calib->add_option("traces", calib_traces,
                    "one or more traces whose ops carry measured durations (fitted together)");
  StepCalibrationArgs steps_args;
  calib->add_option("--steps", steps_args.csv,
                    "fit platform parameters to measured step times instead: a CSV with columns workload, set "
                    "(space-separated KEY=VALUE) and iteration_ms (docs/time-model.md)");
  calib->add_option("--fit", steps_args.fit,
                    "with --steps: a parameter and its range, KEY=LO:HI (gpu*.host_overhead.per_op.default=10us:200us); "
                    "repeat for each");
  calib->add_option("--fit-rows", steps_args.fit_rows,
                    "with --steps: the rows to fit (1-based data rows: 1-30,40); the others are predicted and "
                    "reported as held out (default: fit all)");
  calib->add_option("--evaluations", steps_args.evaluations, "with --steps: most evaluations of the rows (default 60)");
  calib->add_option("--jobs", steps_args.jobs, "with --steps: runs at a time (default: the machine's cores)");
  calib->add_option("--table", steps_args.table, "with --steps: write every row's measured and predicted time here (CSV)");
  calib->add_option("--device-name", calib_name, "which device of the platform (default: the first compute device)");
  calib->add_option("-o,--out,--output", out_file, "write the platform with the fitted efficiencies here");
  std::string calib_residuals = "absolute";
  calib->add_option("--residuals", calib_residuals,
                    "relative: every op counts alike; absolute: errors in seconds, so long ops count "
                    "more (for the step's time), with efficiencies held in (0, 1] (default absolute)")
      ->check(CLI::IsMember({"relative", "absolute"}));

  std::string list_what;
  auto* list = app.add_subcommand("list", "list policies, allocators, models, collective algorithms, parallel keys and built-in presets");
  list->add_option("what", list_what, "one of policies, allocators, models, collectives, presets (default: all of them)");
  list->add_flag("--json", json, "print JSON");
  const auto sweep_commands = add_sweep_commands(app);  // sweep, fit
  const auto plan_command = add_plan_command(app);

  // A mistyped command: CLI11 would take it for an argument and ask for a subcommand.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> commands;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      commands.push_back(sub->get_name());
    if (std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
      std::cerr << fmt::format("memsim: unknown command '{}'{} (commands: {}; memsim --help)\n", argv[1],
                               did_you_mean(argv[1], commands), fmt::join(commands, ", "));
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (step >= 0) import.step = step;
  auto dispatch = [&]() -> int {
    if (run->parsed())
      return cmd_run(positional, policy, sets, out_dir, json, parse_outputs(outputs, events), max_events,
                     trace_format, run->count("--devices") > 0,
                     only_devices, import, durations, explain, !no_advice && (advice || !json),
                     !quiet && ::isatty(STDERR_FILENO), exact);
    if (explain_cmd->parsed()) return cmd_explain(target.empty() ? "out" : target);
    if (info->parsed()) {
      if (op_kinds) {
        if (placement) throw UsageError("info: --placement and --op-kinds are two views; give one");
        if (info_workload.empty() && names_a_platform(target))
          throw UsageError(fmt::format("info {} --op-kinds: the kinds are a workload's: memsim info {} WORKLOAD "
                                       "--op-kinds",
                                       target, target));
        if (!info_workload.empty() && !names_a_platform(target) && names_a_platform(info_workload))
          throw UsageError(fmt::format("info {} {} --op-kinds: the device comes first: memsim info {} {} --op-kinds",
                                       target, info_workload, info_workload, target));
        return info_workload.empty() ? cmd_op_kinds("", target, sets, json, import)
                                     : cmd_op_kinds(target, info_workload, sets, json, import);
      }
      if (placement || !info_workload.empty()) {
        if (!placement || info_workload.empty())
          throw UsageError("info PLATFORM WORKLOAD needs --placement or --op-kinds (and --placement needs both)");
        return cmd_placement(target, info_workload, sets, import);
      }
      return cmd_info(target, sets, json, import);
    }
    if (validate_cmd->parsed()) return cmd_validate(files);
    if (trace->parsed()) return cmd_trace(target, sets, out_file, import);
    if (calib->parsed()) {
      if (!steps_args.csv.empty()) {
        if (!calib_traces.empty())
          throw UsageError("calibrate --steps fits to measured step times; give no traces with it");
        return cmd_calibrate_steps(calib_device, steps_args, out_file);
      }
      if (calib_traces.empty())
        throw UsageError("calibrate needs traces with measured op durations, or --steps MEASURED.csv");
      return cmd_calibrate(calib_device, calib_traces, calib_name, out_file, calib_residuals);
    }
    if (auto code = sweep_commands->dispatch()) return *code;
    if (auto code = plan_command->dispatch()) return *code;
    if (list->parsed()) return cmd_list(list_what, json);
    return 2;
  };
  try {
    if (!max_input_size.empty()) {
      const auto bytes = parse_bytes(max_input_size);
      if (!bytes || *bytes == 0)
        throw UsageError(fmt::format("--max-input-size expects a size like '8GiB', got '{}'", max_input_size));
      set_input_size_limit(*bytes);
    }
    for (const auto& [flag, text, set] : {std::tuple{"--max-ops", &max_ops, &set_op_limit},
                                          std::tuple{"--max-points", &max_points, &set_point_limit}}) {
      if (text->empty()) continue;
      std::uint64_t n = 0;
      if (!parse_count(*text, n))
        throw UsageError(fmt::format("{} expects a whole number from 1 to 2^53 like 50000000 or 5e7, got '{}'", flag,
                                     *text));
      set(n);
    }
    const int code = dispatch();
    // What went to standard output is part of the result: losing it is a failure.
    finish_standard_output();
    return code;
  } catch (const UsageError& e) {
    std::cerr << "memsim: " << e.what() << "\n";
    return 2;
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const std::logic_error& e) {  // PolicyError, InternalError: memsim's own fault
    std::cerr << "memsim: internal error: " << e.what()
              << "\nThis is a bug in memsim, not in your input: please report it with the command "
                 "line and the input files.\n";
    return 3;
  }
}

}  // namespace memsim
