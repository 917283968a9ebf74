#pragma once
// The op kinds a step emits, and the entry of a device's `efficiency` and `memory_efficiency`
// tables that times each (`memsim info [DEVICE] WORKLOAD --op-kinds`); and the entries no op
// of a run reaches, which `memsim run` notes and summary.json lists, so that a table keyed by
// a kind the workload never emits (`matmul` for a GPT's `linear` layers) is not silently
// unused. (sim/workload/op_kinds.h is the other list: every kind a table may name.)
#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/report/summary.h"
#include "sim/workload/trace.h"

namespace memsim {

/// The ops of one kind in a step, added up.
struct OpKindTotals {
  std::string kind;
  std::uint64_t ops = 0;
  double flops = 0;        // sum of Op::flops
  double bytes_moved = 0;  // sum of Op::bytes_moved
  std::array<bool, 3> phases{};   // indexed by Phase: whether ops of the kind run in it
  bool communication = false;     // a collective or point-to-point kind (is_communication_kind)
  std::uint64_t message_bytes = 0;  // sum of Op::message_bytes
};

/// One row per kind of the trace's ops: the most FLOPs first, then the most bytes moved,
/// then by name.
std::vector<OpKindTotals> op_kind_totals(const Trace& trace);

/// The entry of a device's tables that times ops of a kind, and its value, as
/// DeviceSpec::efficiency_for and memory_efficiency_for choose it: "efficiency.linear" or
/// "efficiency.default"; "memory_efficiency.linear", "memory_efficiency.default", or the
/// kind's efficiency entry where the memory table says nothing.
struct EfficiencyEntry {
  std::string key;
  double value = 1;
};
EfficiencyEntry efficiency_entry(const DeviceSpec& device, const std::string& kind);
EfficiencyEntry memory_efficiency_entry(const DeviceSpec& device, const std::string& kind);

/// The keys of `device`'s tables (but `default`) that none of `kinds` is.
UnusedEfficiencyKeys unused_efficiency_keys(const DeviceSpec& device, const std::set<std::string>& kinds);

/// "gpu0.efficiency.matmul", ...: each key with its device and table, as summary.json lists them.
std::vector<std::string> qualified_keys(const UnusedEfficiencyKeys& unused);

/// For each device that runs an op of `trace` (Op::device numbers platform.op_devices()),
/// in that order, the keys of its tables that no op it runs has as kind; devices without
/// such keys are left out.
std::vector<UnusedEfficiencyKeys> unused_efficiency_keys(const Trace& trace, const PlatformSpec& platform);

/// The note `memsim run` prints for them, a line per device, consecutive devices with the
/// same keys as one ("gpu0-7: efficiency keys matmul, matmul_backward match no op of this
/// run (its kinds: <kinds_command>)").
std::vector<std::string> unused_efficiency_lines(const std::vector<UnusedEfficiencyKeys>& unused,
                                                 const std::string& kinds_command);

/// `memsim info [DEVICE] WORKLOAD --op-kinds`: the kinds as a table, or as JSON; with a
/// device (nullptr: none), which entry of its tables times each kind and the keys that time
/// none of them.
std::string op_kinds_text(const Trace& trace, const PlatformSpec* platform, const DeviceSpec* device);
std::string op_kinds_json(const Trace& trace, const PlatformSpec* platform, const DeviceSpec* device);

}  // namespace memsim
