#pragma once
// The `sweep` and `fit` subcommands (docs/sweeps.md). cli_main adds them and, after
// parsing, asks dispatch() whether one of them was chosen.
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace memsim {

class SweepCommands {
 public:
  virtual ~SweepCommands() = default;
  /// The exit code of the chosen command, or nullopt when neither was chosen. Throws
  /// InputError and UsageError like the other commands.
  virtual std::optional<int> dispatch() = 0;
};

/// This executable's path (/proc/self/exe), which sweeps, fits and advice run as children.
std::string memsim_executable();
/// Makes memsim_executable() answer `path`: in the Python package this process is Python,
/// and the memsim binary built beside it is what runs a sweep's points.
void set_memsim_executable(const std::string& path);

/// Registers `sweep` and `fit` on `app`; the returned object holds their options.
std::unique_ptr<SweepCommands> add_sweep_commands(CLI::App& app);

}  // namespace memsim
