#pragma once
// Traces written by other tools, recognised by content (after gzip and tar, see archive.h)
// so that `memsim run DEVICE FILE`, `info`, `validate` and `trace` take them like any
// workload. Each format is a registered importer (builtin_importers(), in the order their
// sniffs are tried; `memsim list importers`), like a policy or a model. Files that are traces
// of something else are recognised too, by importers that refuse them at once with what they
// are and what to pass instead.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/workload/trace.h"

namespace memsim {

struct TraceFile;

/// How to import: which step, and a Kineto trace for the ops' measured durations.
struct ImportOptions {
  std::optional<std::int64_t> step;  // ProfilerStep#N; default: the last complete one
  std::string kineto;                // path of the Kineto trace captured with the ET
};

struct ImporterInfo {
  std::string name;
  std::string description;
  /// Whether the first bytes of a file (inflated, out of its archive) are this format's.
  std::function<bool(std::string_view head)> sniff;
  /// The file's trace (its bytes are the importer's to move from); an InputError for what it
  /// cannot read, or for a format recognised only to be refused.
  std::function<Trace(TraceFile& file, const std::string& name, const ImportOptions& options)> import;
  /// Whether it makes a trace of a step. False: it recognises a file in order to refuse it,
  /// at once: its `import` is called before the file is read, with `file.source` the path and
  /// no bytes, and throws.
  bool imports = true;
};

/// Every importer, in the order their sniffs are tried (the first that claims a file reads it).
const std::vector<ImporterInfo>& builtin_importers();
const ImporterInfo* find_importer(std::string_view name);

/// What a file is, by its first bytes: an importer of builtin_importers(); nullptr for
/// anything memsim reads itself (YAML, a native trace) or cannot open. An archive (or
/// ARCHIVE:MEMBER) whose content no importer claims gets an importer that says so.
using ForeignTrace = const ImporterInfo*;
ForeignTrace sniff_foreign_trace(const std::string& path);

/// Reads and converts a file `sniff_foreign_trace` recognised; errors are InputErrors, and
/// the formats that are no trace of a step (Kineto alone, the Chakra feeder JSON) are
/// refused with what they are and what to pass instead.
Trace import_foreign_trace(const std::string& path, ForeignTrace kind, const ImportOptions& options = {});

// One per importer file (the refusals are in importers.cpp).
ImporterInfo pytorch_et_importer();
ImporterInfo chakra_et_importer();
ImporterInfo kineto_importer();

}  // namespace memsim
