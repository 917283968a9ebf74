#pragma once
// The `plan` subcommand (docs/plan.md). cli_main adds it and, after parsing, asks
// dispatch() whether it was chosen.
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

namespace memsim {

class PlanCommand {
 public:
  virtual ~PlanCommand() = default;
  /// The exit code when `plan` was chosen, else nullopt.
  virtual std::optional<int> dispatch() = 0;
};

/// Registers `plan` on `app`; the returned object holds its options.
std::unique_ptr<PlanCommand> add_plan_command(CLI::App& app);

}  // namespace memsim
