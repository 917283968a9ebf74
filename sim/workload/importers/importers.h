#pragma once
// Traces written by other tools, recognised by content so that `memsim run DEVICE FILE`,
// `info`, `validate` and `trace` take them like any workload.
#include <string>

#include "sim/workload/trace.h"

namespace memsim {

enum class ForeignTrace { none, pytorch_et, chakra };

/// Looks at the first bytes of `path`; `none` for anything memsim reads itself (YAML, a
/// native trace) or cannot open.
ForeignTrace sniff_foreign_trace(const std::string& path);

/// Reads and converts a file `sniff_foreign_trace` recognised; errors are InputErrors.
Trace import_foreign_trace(const std::string& path, ForeignTrace kind);

}  // namespace memsim
