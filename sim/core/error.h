#pragma once
// Errors that reach the user. Bad input (a file, a value, a trace) is an InputError and
// exits with code 1; a malformed command line is a UsageError and exits with code 2; a
// policy that breaks the engine's rules (a plan that reads a freed buffer) is a PolicyError,
// and a result no correct run produces (a NaN time) an InternalError: memsim's own fault,
// exit code 3.
// Messages are complete sentences of the form "file:line:col: key.path: expected X, got Y".
#include <stdexcept>
#include <string>

namespace memsim {

/// Something the user gave us is wrong. The message is shown verbatim.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

/// The command line itself is wrong (unknown flag, missing argument).
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

/// A policy broke the rules of memory (sim/exec/residency.h): a bug in memsim, not in the
/// input. The message says what the policy did; the CLI asks for a report.
class PolicyError : public std::logic_error {
 public:
  explicit PolicyError(const std::string& message) : std::logic_error(message) {}
};

/// A run produced a figure no correct run can (a time that is not a finite number of seconds,
/// a peak over its tier's capacity in a run that fit): a bug in memsim, not in the input.
/// The message names the check and the value; the CLI asks for a report.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

}  // namespace memsim
