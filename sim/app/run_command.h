#pragma once
// `memsim run` as a library call: a request value in, a result value out, and writing the
// output folder a separate step. The command line (cmd_run in cli.cpp) parses its arguments
// into a RunCommand and calls run_to_folder; the Python package (python/memsim_module.cpp)
// calls simulate_run and turns the result into Python values, and run_to_folder when asked
// to write the files.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/inputs/inputs.h"
#include "sim/report/recorder.h"
#include "sim/run/run.h"
#include "sim/workload/importers/importers.h"

namespace memsim {

/// The files `memsim run` writes (--outputs).
struct OutputChoice {
  bool summary = true, timeline = true, memory = true, peak = true, tiles = true, trace = true, events = false;
};
/// "summary,memory": those only; empty: the default set (events with `events`). UsageError
/// for an unknown name.
OutputChoice parse_outputs(const std::string& list, bool events);

/// What `memsim run` is asked: its inputs and the options that change the result.
struct RunCommand {
  InputArg platform = kDefaultDevice;
  /// One (run on every compute device) or one per device that runs.
  std::vector<InputArg> workloads{kDefaultWorkload};
  std::string policy = "none";      // a policy name or a policy file
  std::vector<std::string> sets;    // --set KEY=VALUE, in order
  std::optional<std::string> devices;  // --devices LIST: the compute devices that run
  ImportOptions import;             // --step, --kineto
  std::string durations;            // --durations: "", "measured" or "model"
  /// What the result keeps: the records these files need (events.csv: every allocation).
  OutputChoice outputs;
  std::size_t max_events = 0;       // --max-events: what the trace keeps
  /// On oom, find what would fit by child runs of `memsim` kept under `advice_dir`/advice.
  bool advice = false;
  std::string advice_dir = "out";
  std::string memsim;               // the executable of those runs (default: this one)
  /// A progress line on standard error for a run of more than a few seconds (ops run,
  /// simulated time, rate), rewritten in place and cleared at the end: for a terminal.
  bool progress = false;
  /// --exact: every op its own SimGrid activity (what the engine's deferral is checked against).
  bool exact = false;
};

/// What a run gave: the pipeline's result, and its inputs (the platform it ran on), kept in
/// place: the stream's writer reads them until it stops.
struct RunOutcome {
  RunResult result;  // summary (peaks explained, advice added), the step, its records
  RunInputs inputs;  // the platform as it ran; the steps were moved into the run
  std::unique_ptr<Policy> policy;
  const PlatformSpec& platform() const { return inputs.platform; }
};

/// How the caller follows a run: `stream` gets the records as the engine makes them (the
/// CSV files written beside it); `ran` is called once the engine has finished, before the
/// peaks are explained and advice is sought (the trace's writer starts there); notes (import
/// notes, the policy's notes, why there is no advice) go to `log`.
struct RunHooks {
  RecordStream* stream = nullptr;
  std::function<void(const RunOutcome&)> ran;
  std::ostream* log = nullptr;
};

/// Loads the inputs, runs the step and explains the peaks: the result of `command` in
/// `out`, in place (the stream reads the step as it runs). Throws UsageError, InputError,
/// PolicyError or InternalError as `memsim run` reports them. SimGrid's engine is a process
/// singleton: once per process.
void simulate_run(const RunCommand& command, RunOutcome& out, const RunHooks& hooks = {});

/// `memsim run` whole: simulate_run, then the files of `command.outputs` written into
/// `out_dir` (timeline.csv and memory.csv as the engine runs, the others at once on threads
/// of their own; all moved in together at the end). `written`: the files, in their fixed
/// order (summary.json is the summary's write_summary_json, writers.h). The trace's
/// `--trace-format`: "pftrace" or "json".
struct RunFiles {
  std::vector<std::string> written;
};
RunFiles run_to_folder(const RunCommand& command, const std::string& out_dir, const std::string& trace_format,
                       RunOutcome& outcome, std::ostream& log);

}  // namespace memsim
