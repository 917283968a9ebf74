#pragma once
// Traces written by other tools, recognised by content (after gzip and tar, see archive.h)
// so that `memsim run DEVICE FILE`, `info`, `validate` and `trace` take them like any
// workload. Files that are traces of something else are recognised too, and refused at once
// with what they are and what to pass instead.
#include <cstdint>
#include <optional>
#include <string>

#include "sim/workload/trace.h"

namespace memsim {

enum class ForeignTrace {
  none,         // YAML, a native trace, or a file that cannot be opened: memsim reads it itself
  pytorch_et,   // PyTorch Execution Trace (JSON)
  chakra,       // MLCommons Chakra execution trace (protobuf)
  kineto,       // a Kineto / PyTorch profiler trace: op times, not a trace of the step's memory
  chakra_json,  // the Chakra feeder's JSON test format (`workload_graph`)
  archive,      // gzip or tar whose content is none of the above
};

/// How to import: which step, and a Kineto trace for the ops' measured durations.
struct ImportOptions {
  std::optional<std::int64_t> step;  // ProfilerStep#N; default: the last complete one
  std::string kineto;                // path of the Kineto trace captured with the ET
};

/// Looks at the first bytes of `path` (inflating gzip, looking into tar); `none` for
/// anything memsim reads itself (YAML, a native trace) or cannot open.
ForeignTrace sniff_foreign_trace(const std::string& path);

/// Reads and converts a file `sniff_foreign_trace` recognised; errors are InputErrors, and
/// the formats that are no trace of a step (Kineto alone, the Chakra feeder JSON) are
/// refused with what they are and what to pass instead.
Trace import_foreign_trace(const std::string& path, ForeignTrace kind, const ImportOptions& options = {});

}  // namespace memsim
