#include "sim/workload/importers/importers.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/files.h"
#include "sim/core/registry.h"
#include "sim/workload/importers/archive.h"

namespace memsim {
namespace {

constexpr std::size_t kHead = 4096;

// The Chakra feeder's JSON test format: recognised, to be refused.
ImporterInfo chakra_feeder_json_importer() {
  return {"chakra-feeder-json",
          "the Chakra feeder's JSON test format (workload_graph): recognised and refused, it is no trace of a step",
          [](std::string_view head) {
            const auto first = head.find_first_not_of(" \t\r\n");
            return first != std::string_view::npos && head[first] == '{' &&
                   head.find("\"workload_graph\"") != std::string_view::npos;
          },
          [](TraceFile& f, const std::string&, const ImportOptions&) -> Trace {
            throw InputError(fmt::format(
                "{}: the Chakra feeder's JSON test format (workload_graph), not a trace memsim imports; pass the "
                "Chakra protobuf trace (chakra_converter's .et output) or the PyTorch Execution Trace it came from",
                f.source));
          },
          false};
}

// An archive (or ARCHIVE:MEMBER) whose content no importer claims: not listed, never sniffed.
// It reads the file (imports true) so that a corrupt archive or a missing member is reported
// as such before it is refused.
const ImporterInfo& unknown_archive() {
  static const ImporterInfo info{"archive", "an archive holding no trace memsim imports", {},
                                 [](TraceFile& f, const std::string&, const ImportOptions&) -> Trace {
                                   throw InputError(fmt::format(
                                       "{}: neither a PyTorch Execution Trace (JSON with schema and nodes) nor a "
                                       "Chakra trace (protobuf)",
                                       f.source));
                                 },
                                 true};
  return info;
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

}  // namespace

const std::vector<ImporterInfo>& builtin_importers() {
  static const std::vector<ImporterInfo> importers{
      pytorch_et_importer(),
      kineto_importer(),
      chakra_feeder_json_importer(),
      chakra_et_importer(),
  };
  return importers;
}

const ImporterInfo* find_importer(std::string_view name) { return find_by_name(builtin_importers(), name); }

ForeignTrace sniff_foreign_trace(const std::string& path) {
  if (!trace_file_exists(path)) return nullptr;
  const std::string head = read_trace_head(path, kHead);
  for (const ImporterInfo& importer : builtin_importers())
    if (importer.sniff(head)) return &importer;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || is_archive(path)) return &unknown_archive();
  return nullptr;
}

Trace import_foreign_trace(const std::string& path, ForeignTrace kind, const ImportOptions& options) {
  if (!kind) throw InputError(fmt::format("{}: not a trace format memsim imports", path));
  if (!kind->imports) {
    // Refused at once, by what its first bytes are, without reading the rest.
    TraceFile named;
    named.source = path;
    return kind->import(named, std::string(), options);
  }
  TraceFile f = read_trace_file(path);  // reports corrupt archives and missing members
  const std::vector<std::string> notes = f.notes;
  Trace t = kind->import(f, stem(f.name), options);
  t.import_notes.insert(t.import_notes.begin(), notes.begin(), notes.end());
  return t;
}

}  // namespace memsim
