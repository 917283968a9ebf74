#include "sim/app/run_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <exception>
#include <functional>
#include <future>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/app/advice.h"
#include "sim/app/sweep_cli.h"
#include "sim/core/error.h"
#include "sim/core/files.h"
#include "sim/core/limits.h"
#include "sim/core/text_out.h"
#include "sim/inputs/policy_args.h"
#include "sim/report/chrome_trace.h"
#include "sim/report/csv_stream.h"
#include "sim/report/kind_table.h"
#include "sim/report/peak.h"
#include "sim/report/perfetto_trace.h"
#include "sim/report/events_csv.h"
#include "sim/report/trace_layout.h"
#include "sim/report/writers.h"
#include "sim/core/units.h"
#include "sim/workload/importers/archive.h"

namespace memsim {

OutputChoice parse_outputs(const std::string& list, bool events) {
  OutputChoice c;
  c.events = events;
  if (list.empty()) return c;
  c = OutputChoice{false, false, false, false, false, false, events};
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    if (name == "summary") c.summary = true;
    else if (name == "timeline") c.timeline = true;
    else if (name == "memory") c.memory = true;
    else if (name == "peak") c.peak = true;
    else if (name == "tiles") c.tiles = true;
    else if (name == "trace") c.trace = true;
    else if (name == "events") c.events = true;
    else if (name == "all") c = OutputChoice{true, true, true, true, true, true, true};
    else
      throw UsageError(fmt::format("--outputs '{}': expected names separated by commas from {}, got '{}'", list,
                                   output_names_text(), name));
  }
  if (list.back() == ',')
    throw UsageError(fmt::format("--outputs '{}': expected names separated by commas from {}, got an empty name",
                                 list, output_names_text()));
  return c;
}

namespace {

std::vector<Override> parse_overrides(const std::vector<std::string>& sets) {
  std::vector<Override> out;
  for (const auto& s : sets) out.push_back(parse_override(s));
  return out;
}

// The progress line: shown once a run has taken kAfter_s, rewritten at most every
// kEvery_s, cleared when the run ends. Wall-clock time decides only what a terminal shows.
class ProgressLine {
 public:
  void show(std::uint64_t done, std::uint64_t total, double simulated_s) {
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    if (elapsed < kAfter_s || (shown_ && std::chrono::duration<double>(now - last_).count() < kEvery_s)) return;
    last_ = now;
    shown_ = true;
    std::cerr << fmt::format("\r\033[Kmemsim: {} of {} ops run, {} simulated, {} ops/s", format_count(done),
                             format_count(total), format_seconds(simulated_s), format_count(std::floor(done / elapsed)))
              << std::flush;
  }
  void clear() {
    if (shown_) std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr double kAfter_s = 3, kEvery_s = 0.5;
  Clock::time_point start_ = Clock::now(), last_ = start_;
  bool shown_ = false;
};

}  // namespace

void simulate_run(const RunCommand& command, RunOutcome& out, const RunHooks& hooks) {
  std::ostringstream quiet;
  std::ostream& log = hooks.log ? *hooks.log : quiet;
  const std::vector<InputArg>& workloads = command.workloads;
  const auto overrides = parse_overrides(command.sets);
  PlatformSpec platform = load_platform_arg(command.platform, overrides);
  // One workload runs on every compute device (data-parallel replicas); several run one per
  // device, in the platform's device order.
  std::vector<std::string> device_names;
  for (std::size_t d : platform.compute_devices()) device_names.push_back(platform.devices[d].name);
  std::vector<std::uint32_t> slots;  // with --devices: each chosen device's index
  if (command.devices) {
    // --devices: run on these compute devices only; the others stay idle.
    const std::string& only_devices = *command.devices;
    std::vector<std::string> chosen;
    std::stringstream list(only_devices);
    if (only_devices.empty() || only_devices.back() == ',')
      throw UsageError(fmt::format("--devices '{}': give compute device names separated by commas (platform {} has {})",
                                   only_devices, platform.name, fmt::join(device_names, ", ")));
    for (std::string name; std::getline(list, name, ',');) {
      if (name.empty())
        throw UsageError(fmt::format("--devices '{}': an empty device name between commas", only_devices));
      const auto at = std::find(device_names.begin(), device_names.end(), name);
      if (at == device_names.end())
        throw UsageError(fmt::format("--devices: platform {} has no compute device '{}' (it has {})",
                                     platform.name, name, fmt::join(device_names, ", ")));
      if (std::find(chosen.begin(), chosen.end(), name) != chosen.end()) continue;
      chosen.push_back(name);
      slots.push_back(static_cast<std::uint32_t>(at - device_names.begin()));
    }
    device_names = std::move(chosen);
  }
  if (workloads.empty() || (workloads.size() != 1 && workloads.size() != device_names.size()))
    throw UsageError(fmt::format("platform {} has {} compute devices: give one workload (run on each) "
                                 "or {}, got {}",
                                 platform.name, device_names.size(), device_names.size(), workloads.size()));
  const OutputChoice& outputs = command.outputs;
  RunInputs& inputs = out.inputs;
  std::vector<std::string> import_notes;
  for (std::size_t k = 0; k < workloads.size(); ++k) {
    inputs.workloads.push_back(load_workload_arg(workloads[k], overrides, command.import));
    const Trace& t = inputs.workloads.back();
    print_import_notes(t, log);
    for (const auto& n : t.import_notes)
      import_notes.push_back(workloads.size() > 1 ? t.name + ": " + n : n);
  }
  const InputArg& workload = workloads[0];
  out.policy = make_policy_arg(command.policy, overrides);
  inputs.policy = out.policy.get();
  inputs.slots = slots;
  inputs.keep_allocations = outputs.events;
  inputs.keep_samples = outputs.memory || outputs.trace;
  // memory.csv takes every sample as the run goes (CsvStream); the recorder keeps those the
  // trace can show, or every one when nothing streams them.
  inputs.samples_kept = outputs.trace ? TraceLayout::kept_samples_for(command.max_events)
                        : hooks.stream ? 0
                                       : SIZE_MAX;
  // Measured durations time the ops on the platform they were measured on, or wherever
  // --durations measured (or a --kineto trace) asks; --durations model always uses the model.
  const std::string& durations = command.durations;
  if (durations == "measured" || (durations.empty() && !command.import.kineto.empty()))
    inputs.durations = RunInputs::Durations::measured;
  else if (durations == "model")
    inputs.durations = RunInputs::Durations::model;
  inputs.platform = std::move(platform);
  inputs.stream = hooks.stream;
  inputs.explain_peaks = false;
  inputs.exact = command.exact;
  auto line = std::make_shared<ProgressLine>();
  if (command.progress)
    inputs.progress = [line](std::uint64_t done, std::uint64_t total, double at_s) { line->show(done, total, at_s); };
  RunResult& result = out.result;
  try {
    run(std::move(inputs), result);  // the step is moved, the platform kept
  } catch (...) {
    line->clear();
    throw;
  }
  line->clear();
  result.plan = Plan{};  // nothing below reads it (a million-op plan is a hundred megabytes)
  for (const std::string& note : result.notes) log << "memsim: " << note << "\n";
  const PlatformSpec& platform_run = inputs.platform;
  const Trace& trace = result.trace;
  Summary& summary = result.summary;
  summary.import_notes = import_notes;
  // Table keys that timed no op: a platform written for another model's kinds reads as
  // tuned when it is not (`matmul` for a GPT whose layers are `linear`).
  summary.unused_efficiency_keys = unused_efficiency_keys(trace, platform_run);
  summary.platform_source = platform_run.source;
  summary.workload_source = workload.text                       ? workload.name
                            : trace_file_exists(workload.name) ? workload.name
                                                               : "(built in) " + workload.name;
  if (hooks.ran) hooks.ran(out);
  explain_peaks(result, platform_run);
  if (summary.oom && command.advice) {
    // What would fit, by child runs of the same inputs; for one device and one workload.
    if (workloads.size() != 1 || command.devices || command.import.step || !command.import.kineto.empty() ||
        !durations.empty() || command.platform.text || workload.text) {
      log << "memsim: no advice on what would fit for a run with --devices, several workloads, "
             "--step, --kineto or --durations (--no-advice hides this note)\n";
    } else {
      const bool tty = &log == &std::cerr && isatty(STDERR_FILENO);
      AdviceProgress progress;
      if (tty) progress = [](const std::string& line) { std::cerr << "\r\033[K" << line << std::flush; };
      summary.oom->advice = advise(RunRequest{command.platform.name, workload.name, command.policy, overrides},
                                   summary, command.advice_dir,
                                   command.memsim.empty() ? memsim_executable() : command.memsim, step_memory_bound(trace, platform_run),
                                   progress);
      if (tty) std::cerr << "\r\033[K" << std::flush;
    }
  }
}

RunFiles run_to_folder(const RunCommand& command, const std::string& out_dir, const std::string& trace_format,
                       RunOutcome& outcome, std::ostream& log) {
  const OutputChoice& outputs = command.outputs;
  const std::size_t max_events = command.max_events;
  // timeline.csv and memory.csv are written as the engine runs, on a thread of their own;
  // the peaks are explained beside the trace's writer.
  // The files go to a staging folder inside out_dir and are moved in together at the end:
  // the folder holds the previous run's set or this one's (OutputFolder).
  OutputFolder folder(out_dir,
                      {"summary.json", "timeline.csv", "memory.csv", "peak.csv", "tiles.csv", "trace.json",
                       "trace.pftrace", "events.csv"},
                      "summary.json");
  CsvStream streamed(folder.staging(), outputs.timeline, outputs.memory);
  RunHooks hooks;
  if (outputs.timeline || outputs.memory) hooks.stream = &streamed;
  hooks.log = &log;

  // Each file through one buffer (TextOut): no output is held whole in memory. The files
  // are independent, so they are written at once, one thread each (a million-op run writes
  // a gigabyte): the trace first, beside the peaks' explanation, then the files that need
  // the peaks. The list of what was written keeps their fixed order.
  struct FileJob {
    std::string name;
    std::function<bool(TextOut&)> write;  // false: nothing to say, no file; empty: streamed
    bool needs_peaks = false;             // launched once the peaks are explained
    std::future<bool> done;
  };
  std::vector<FileJob> jobs;
  jobs.reserve(8);  // a launched job is referred to by its thread: never moved
  auto launch = [&folder](FileJob& job) {
    job.done = std::async(std::launch::async, [&folder, &job] {
      OutputFile f(folder.path(job.name));
      TextOut out(f);
      if (!job.write(out)) return false;  // f removes its temporary
      out.finish();
      return true;
    });
  };
  const RunResult& result = outcome.result;
  const PlatformSpec& platform_run = outcome.platform();
  const Trace& trace = result.trace;
  const Recorder& recorder = result.recorder;
  const Summary& summary = result.summary;
  // The timeline: trace.pftrace (Perfetto's format) or, with --trace-format json, trace.json.
  // It reads the summary, not its peaks.
  const bool pftrace = trace_format == "pftrace";
  const std::string trace_file = pftrace ? "trace.pftrace" : "trace.json";
  std::size_t trace_written = 0, trace_total = 0;
  double trace_until_s = 0;
  hooks.ran = [&](const RunOutcome&) {
    using Write = std::function<bool(TextOut&)>;
    const bool streamed_files = streamed.started();
    if (outputs.timeline)
      jobs.push_back({"timeline.csv", streamed_files ? Write() : [&](TextOut& o) {
                        return write_timeline_csv(o, recorder.events(), trace, platform_run), true;
                      }, false, {}});
    if (outputs.memory)
      jobs.push_back({"memory.csv", streamed_files ? Write() : [&](TextOut& o) {
                        return write_memory_csv(o, recorder.samples(), platform_run), true;
                      }, false, {}});
    if (outputs.peak) jobs.push_back({"peak.csv", [&](TextOut& o) { return write_peak_csv(o, summary); }, true, {}});
    if (outputs.tiles)
      jobs.push_back({"tiles.csv", [&](TextOut& o) {
                        const std::string tiles = tiles_csv(summary);
                        o.put(tiles);
                        return !tiles.empty();
                      }, true, {}});
    if (outputs.trace)
      jobs.push_back({trace_file, [&](TextOut& o) {
                        const SampleLog& samples = recorder.samples();
                        if (pftrace) {
                          const PerfettoTrace pf = write_perfetto_trace(o, recorder.events(), samples, summary, trace,
                                                                        platform_run, max_events);
                          trace_written = pf.events_written, trace_total = pf.events_total,
                          trace_until_s = pf.written_until_s;
                        } else {
                          const ChromeTrace chrome =
                              chrome_trace_json(recorder.events(), samples, summary, trace, platform_run, max_events);
                          o.put(chrome.json);
                          trace_written = chrome.events_written, trace_total = chrome.events_total,
                          trace_until_s = chrome.written_until_s;
                        }
                        return true;
                      }, false, {}});
    if (outputs.events)
      jobs.push_back({"events.csv", [&](TextOut& o) {
                        return write_events_csv(o, recorder.allocations(), trace, platform_run), true;
                      }, false, {}});
    for (FileJob& job : jobs)
      if (job.write && !job.needs_peaks) launch(job);
  };
  // Every writer launched finishes before an error is passed on: each refers to `jobs`.
  auto wait_all = [&jobs](std::exception_ptr& failed, std::vector<bool>* wrote) {
    for (FileJob& job : jobs) {
      try {
        const bool w = job.done.valid() ? job.done.get() : true;  // no future: streamed (or never launched)
        if (wrote) wrote->push_back(w);
      } catch (...) {
        if (!failed) failed = std::current_exception();
        if (wrote) wrote->push_back(false);
      }
    }
  };
  try {
    simulate_run(command, outcome, hooks);
  } catch (...) {
    std::exception_ptr ignored;
    wait_all(ignored, nullptr);
    throw;
  }
  RunFiles files;
  for (FileJob& job : jobs)
    if (job.write && job.needs_peaks) launch(job);
  std::vector<bool> wrote;
  std::exception_ptr failed;
  wait_all(failed, &wrote);
  try {
    streamed.finish();
  } catch (...) {
    if (!failed) failed = std::current_exception();
  }
  if (failed) std::rethrow_exception(failed);
  if (outputs.summary) files.written.push_back("summary.json");
  for (std::size_t k = 0; k < jobs.size(); ++k)
    if (wrote[k]) files.written.push_back(jobs[k].name);
  if (outputs.trace && trace_written < trace_total && max_events > 0)  // --max-events 0 asks for none
    log << fmt::format("memsim: {}/{}: kept the first {} of {} events{}; "
                       "raise --max-events to keep more\n",
                       out_dir, trace_file, trace_written, trace_total,
                       trace_written > 0 ? fmt::format(" (up to {})", format_seconds(trace_until_s)) : std::string());
  if (outputs.summary) {
    OutputFile file(folder.path("summary.json"));
    write_summary_json(summary, [&file](std::string_view text) { file.write(text); });
    file.commit();
  }
  folder.install();
  // After summary.json, so that a sweep's point whose files failed reports that first.
  if (!summary.unused_efficiency_keys.empty()) {
    std::string kinds_command =
        fmt::format("memsim info {} {}", command.platform.name,
                    command.workloads.size() == 1 ? command.workloads[0].name : std::string("WORKLOAD"));
    for (const std::string& set : command.sets) {
      const Override o = parse_override(set);
      if (o.target != "policy") kinds_command += " " + o.origin;
    }
    kinds_command += " --op-kinds";
    for (const std::string& line : unused_efficiency_lines(summary.unused_efficiency_keys, kinds_command))
      log << "memsim: " << line << "\n";
  }
  return files;
}

}  // namespace memsim
