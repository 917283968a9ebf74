#pragma once
// The native trace format (docs/trace-format.md): one JSON document holding the buffers and
// the ops in issue order. Written by `memsim trace`, accepted wherever a workload is.
#include <ostream>
#include <string>

#include "sim/core/config.h"
#include "sim/workload/trace.h"

namespace memsim {

inline constexpr int kTraceFormatVersion = 1;

void write_trace_json(const Trace& trace, std::ostream& out);

/// True when the parsed document declares `"format": "memsim-trace"`.
bool is_native_trace(const ConfigNode& root);

/// Reads and validates a native trace; errors name the file, line and key.
Trace read_trace(const ConfigNode& root);

}  // namespace memsim
