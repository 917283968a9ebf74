#pragma once
// A memory policy decides what lives where. The field has two kinds, so there are two hooks:
//
//  - plan(): a planning pass that reads the whole trace and returns a Plan — the trace with
//    frees, swaps (and, later, drops and recomputes) inserted, as TensorFlow LMS rewrites a
//    graph or Checkmate emits a schedule;
//  - on_alloc_failure(): a runtime hook called when the compute tier cannot take an
//    allocation; the policy answers with actions from a view of memory, or with none, and
//    the run ends with status oom.
//
// Policies are created by name with declared parameters (policy/builtin.cpp registers them).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/params.h"
#include "sim/memory/memory_state.h"
#include "sim/platform/platform.h"
#include "sim/policy/plan.h"
#include "sim/workload/trace.h"

namespace memsim {

/// What a policy can see while the step runs.
class RuntimeView {
 public:
  virtual ~RuntimeView() = default;
  virtual double now_s() const = 0;
  virtual const Trace& trace() const = 0;
  virtual const Liveness& liveness() const = 0;
  virtual const PlatformSpec& platform() const = 0;
  virtual const MemoryState& memory() const = 0;
  /// The op being prepared when the hook runs.
  virtual OpId current_op() const = 0;
};

struct Action {
  enum class Kind : std::uint8_t { swap_out } kind = Kind::swap_out;
  BufferId buffer = 0;
  std::size_t to_tier = 0;
};

struct AllocationFailure {
  std::size_t tier = 0;
  std::uint64_t bytes = 0;  // what was asked for
  OpId op = 0;              // the op it was for
};

class Policy {
 public:
  virtual ~Policy() = default;
  /// The static schedule. The engine runs it step by step.
  virtual Plan plan(const Trace& trace, const Liveness& liveness,
                    const PlatformSpec& platform) const = 0;
  /// Called when an allocation fails. Append actions that make room; an empty answer ends
  /// the run with status oom. The engine waits for the actions to complete and retries.
  virtual void on_alloc_failure(const RuntimeView&, const AllocationFailure&,
                                std::vector<Action>&) {}
  /// "vdnn(all)": the name with the parameters that matter, for reports.
  virtual std::string label() const = 0;
};

struct PolicyInfo {
  std::string name;
  std::string description;
  std::vector<ParamSpec> params;
  std::function<std::unique_ptr<Policy>(const Params&)> create;
};

/// Every built-in policy, in the order `memsim list` shows them.
const std::vector<PolicyInfo>& builtin_policies();
const PolicyInfo* find_policy(std::string_view name);

// One per file under impl/.
PolicyInfo none_policy();
PolicyInfo keep_all_policy();

}  // namespace memsim
