#pragma once
// Trace files as users have them: plain, gzip-compressed (`.json.gz`, one member or several
// concatenated), or a tar archive (plain or gzip-compressed, `.tar.gz` / `.tgz`) holding the
// trace. Archives are opened with zlib and a small tar reader of our own (ustar and GNU/pax
// headers; long names and sizes from pax records).
//
// An archive member is named `ARCHIVE:MEMBER` (its path in the archive, or its file name).
// Without one, the archive's only trace is read; when it holds several (one per rank), the
// first by name is, and a note says which and how to pick another. macOS metadata members
// (`._name`, `__MACOSX/`) and folders are skipped.
#include <cstddef>
#include <string>
#include <vector>

namespace memsim {

struct TraceFile {
  std::string bytes;    // uncompressed content, with simdjson's padding reserved past the end
  std::string source;   // for messages: "x.json.gz", or "x.tar.gz:dir/member.json"
  std::string name;     // the trace's file name, without folders and compression suffixes
  std::vector<std::string> notes;  // what was chosen on the user's behalf (an archive member)
};

/// Reads `path` whole, uncompressing and unpacking as needed. InputError naming the file
/// (and member) when it cannot be read, is corrupt, or holds nothing to read.
TraceFile read_trace_file(const std::string& path);

/// The first bytes (up to `n`) of what read_trace_file(path) would return, inflating only
/// what it needs; empty when the file cannot be opened. Never throws for a corrupt file
/// (the full read reports it).
std::string read_trace_head(const std::string& path, std::size_t n);

/// True when `path` names an existing file, or `ARCHIVE:MEMBER` with an existing archive.
bool trace_file_exists(const std::string& path);

/// The members of the archive at `path` that may be traces (regular files, metadata
/// skipped), in archive order; empty for a file that is not an archive.
std::vector<std::string> archive_members(const std::string& path);

}  // namespace memsim
