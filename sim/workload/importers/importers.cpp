#include "sim/workload/importers/importers.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/files.h"
#include "sim/workload/importers/archive.h"
#include "sim/workload/importers/chakra_et.h"
#include "sim/workload/importers/kineto.h"
#include "sim/workload/importers/pytorch_et.h"

namespace memsim {
namespace {

constexpr std::size_t kHead = 4096;

bool looks_like_chakra_feeder_json(std::string_view head) {
  const auto first = head.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && head[first] == '{' &&
         head.find("\"workload_graph\"") != std::string_view::npos;
}

// The file's own first bytes: compressed or packed, or neither.
bool is_archive(const std::string& path) {
  const std::string raw = read_input_head(path, 512);
  const bool gzip = raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f && static_cast<unsigned char>(raw[1]) == 0x8b;
  return gzip || (raw.size() >= 262 && raw.compare(257, 5, "ustar") == 0);
}

std::string stem(std::string name) {
  for (const char* ext : {".json", ".et"})
    if (name.size() > std::string_view(ext).size() && name.ends_with(ext)) name.resize(name.size() - std::string_view(ext).size());
  return name;
}

[[noreturn]] void refuse_kineto(const std::string& path) {
  throw InputError(fmt::format(
      "{}: a Kineto trace (torch.profiler's traceEvents: when each op and kernel ran), not a trace of a "
      "training step's memory; pass it with the Execution Trace recorded in the same run: "
      "memsim run DEVICE TRACE.json --kineto {}",
      path, path));
}

}  // namespace

ForeignTrace sniff_foreign_trace(const std::string& path) {
  if (!trace_file_exists(path)) return ForeignTrace::none;
  const std::string head = read_trace_head(path, kHead);
  if (looks_like_pytorch_et(head)) return ForeignTrace::pytorch_et;
  if (looks_like_kineto(head)) return ForeignTrace::kineto;
  if (looks_like_chakra_feeder_json(head)) return ForeignTrace::chakra_json;
  if (looks_like_chakra_et(head)) return ForeignTrace::chakra;
  // An archive (or ARCHIVE:MEMBER) whose content is none of these.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || is_archive(path)) return ForeignTrace::archive;
  return ForeignTrace::none;
}

Trace import_foreign_trace(const std::string& path, ForeignTrace kind, const ImportOptions& options) {
  switch (kind) {
    case ForeignTrace::kineto: refuse_kineto(path);
    case ForeignTrace::chakra_json:
      throw InputError(fmt::format(
          "{}: the Chakra feeder's JSON test format (workload_graph), not a trace memsim imports; pass the "
          "Chakra protobuf trace (chakra_converter's .et output) or the PyTorch Execution Trace it came from",
          path));
    case ForeignTrace::archive: {
      TraceFile f = read_trace_file(path);  // reports corrupt archives and missing members
      throw InputError(fmt::format("{}: neither a PyTorch Execution Trace (JSON with schema and nodes) nor a "
                                   "Chakra trace (protobuf)",
                                   f.source));
    }
    case ForeignTrace::none: throw InputError(fmt::format("{}: not a trace format memsim imports", path));
    case ForeignTrace::pytorch_et:
    case ForeignTrace::chakra: break;
  }
  TraceFile f = read_trace_file(path);
  Trace t;
  if (kind == ForeignTrace::chakra) {
    if (!options.kineto.empty())
      throw InputError(fmt::format("--kineto {}: a Kineto trace times the ops of a PyTorch Execution Trace; {} is a "
                                   "Chakra trace, which carries its own durations",
                                   options.kineto, f.source));
    if (options.step)
      throw InputError(fmt::format("--step {}: {} is a Chakra trace, which holds one step", *options.step, f.source));
    t = import_chakra_et(f.bytes, f.source, stem(f.name));
  } else {
    PytorchEtImport imported = import_pytorch_et_with_origins(f.bytes, f.source, stem(f.name), options.step);
    t = std::move(imported.trace);
    if (!options.kineto.empty()) {
      if (!trace_file_exists(options.kineto))
        throw InputError(fmt::format("--kineto {}: no such file", options.kineto));
      const ForeignTrace k = sniff_foreign_trace(options.kineto);
      if (k != ForeignTrace::kineto)
        throw InputError(fmt::format("--kineto {}: not a Kineto trace (expected torch.profiler's JSON with traceEvents{})",
                                     options.kineto,
                                     k == ForeignTrace::pytorch_et ? "; this is an Execution Trace: pass it as the workload"
                                                                   : ""));
      f.bytes = std::string();  // the ET's text is done with; the Kineto trace takes its place
      TraceFile kf = read_trace_file(options.kineto);
      const KinetoTimes times = read_kineto(kf.bytes, kf.source);
      for (std::string& n : kf.notes) t.import_notes.push_back(std::move(n));
      for (std::string& n : apply_kineto(t, imported.origins, times, kf.source)) t.import_notes.push_back(std::move(n));
    }
  }
  t.import_notes.insert(t.import_notes.begin(), f.notes.begin(), f.notes.end());
  return t;
}

}  // namespace memsim
