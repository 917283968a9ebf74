#include "sim/workload/importers/archive.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <zlib.h>

#include "sim/core/error.h"
#include "sim/core/files.h"

namespace memsim {
namespace {

constexpr std::size_t kPadding = 64;  // simdjson::SIMDJSON_PADDING, without the header here
constexpr std::size_t kBlock = 512;   // tar's block size

bool is_gzip(std::string_view b) {
  return b.size() >= 2 && static_cast<unsigned char>(b[0]) == 0x1f && static_cast<unsigned char>(b[1]) == 0x8b;
}

bool is_tar(std::string_view b) { return b.size() >= kBlock && b.substr(257, 5) == "ustar"; }

bool ends_with(std::string_view s, std::string_view e) { return s.size() >= e.size() && s.substr(s.size() - e.size()) == e; }

std::string base_name(std::string_view path) {
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  const auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// The file and the member named by `path`: the file itself when it exists, else
// `ARCHIVE:MEMBER` split at the last ':' whose left side is a file.
std::optional<std::pair<std::string, std::string>> split_member(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return std::make_pair(path, std::string());
  for (auto colon = path.rfind(':'); colon != std::string::npos && colon > 0; colon = path.rfind(':', colon - 1)) {
    const std::string file = path.substr(0, colon);
    if (std::filesystem::is_regular_file(file, ec)) return std::make_pair(file, path.substr(colon + 1));
    if (colon == 0) break;
  }
  return std::nullopt;
}

// The file's bytes (all of them, or the first `limit`), through the one input reader: a
// regular file of bounded size, never a device or a FIFO.
std::string read_raw(const std::string& file, std::size_t limit) {
  if (!is_input_file(file)) throw InputError(fmt::format("{}: cannot read the file", file));
  std::string out = limit == std::numeric_limits<std::size_t>::max() ? read_input_file(file) : read_input_head(file, limit);
  if (out.capacity() < out.size() + kPadding) out.reserve(out.size() + kPadding);
  return out;
}

// Inflates every gzip member of `in` into a string, stopping once `limit` bytes are out.
// Corrupt or cut-short data is an InputError naming `source` and the compressed byte.
std::string gunzip(std::string_view in, const std::string& source, std::size_t limit) {
  std::string out;
  // The last member's ISIZE (its size mod 2^32) is a good first guess for one member.
  if (limit == std::numeric_limits<std::size_t>::max() && in.size() >= 4) {
    const auto* t = reinterpret_cast<const unsigned char*>(in.data() + in.size() - 4);
    const std::size_t isize = t[0] | (t[1] << 8) | (t[2] << 16) | (static_cast<std::size_t>(t[3]) << 24);
    // Deflate shrinks by at most about 1032:1, so a larger claim is a corrupt trailer.
    const std::size_t most = std::min<std::uint64_t>(in.size() * std::uint64_t{1032}, input_size_limit());
    out.reserve(std::min(std::max(isize, in.size()), most) + kPadding);
  }
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw InputError(fmt::format("{}: cannot start gzip decompression", source));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(std::min<std::size_t>(in.size(), std::numeric_limits<uInt>::max()));
  std::size_t fed = z.avail_in;
  int rc = Z_OK;
  while (out.size() < limit) {
    if (z.avail_in == 0 && fed < in.size()) {
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + fed));
      z.avail_in = static_cast<uInt>(std::min<std::size_t>(in.size() - fed, std::numeric_limits<uInt>::max()));
      fed += z.avail_in;
    }
    const std::size_t chunk = std::min<std::size_t>(1 << 20, limit - out.size());
    const std::size_t before = out.size();
    out.resize(before + chunk);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + before);
    z.avail_out = static_cast<uInt>(chunk);
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(before + (chunk - z.avail_out));
    if (out.size() > input_size_limit()) {
      inflateEnd(&z);
      throw InputError(fmt::format("{}: inflates to over the input size limit of {} bytes; raise it with "
                                   "--max-input-size SIZE (or MEMSIM_MAX_INPUT_SIZE=SIZE)",
                                   source, input_size_limit()));
    }
    if (rc == Z_STREAM_END) {
      // Another member may follow (gzip files can be concatenated); trailing zeros end it.
      const std::size_t at = fed - z.avail_in;
      const std::string_view rest = in.substr(at);
      if (rest.find_first_not_of('\0') == std::string_view::npos) break;
      if (!is_gzip(rest)) {
        inflateEnd(&z);
        throw InputError(fmt::format("{}: compressed byte {}: data after the end of the gzip stream", source, at));
      }
      inflateReset(&z);
      continue;
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && fed >= in.size()) {
      inflateEnd(&z);
      throw InputError(fmt::format("{}: truncated gzip data: the compressed stream ends after {} bytes",
                                   source, in.size()));
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string why = z.msg ? z.msg : "corrupt data";
      const std::size_t at = fed - z.avail_in;
      inflateEnd(&z);
      throw InputError(fmt::format("{}: compressed byte {}: corrupt gzip data: {}", source, at, why));
    }
  }
  inflateEnd(&z);
  if (out.capacity() < out.size() + kPadding) out.reserve(out.size() + kPadding);
  return out;
}

struct TarEntry {
  std::string path;
  std::size_t offset = 0;  // of the data
  std::size_t size = 0;
  char type = '0';
};

std::uint64_t tar_number(std::string_view field) {
  if (!field.empty() && (static_cast<unsigned char>(field[0]) & 0x80)) {  // base-256 (GNU, large files)
    std::uint64_t v = static_cast<unsigned char>(field[0]) & 0x7f;
    for (std::size_t i = 1; i < field.size(); ++i) v = (v << 8) | static_cast<unsigned char>(field[i]);
    return v;
  }
  std::uint64_t v = 0;
  for (char c : field) {
    if (c >= '0' && c <= '7') v = v * 8 + static_cast<std::uint64_t>(c - '0');
    else if (c == '\0' || c == ' ') { if (v) break; }
    else break;
  }
  return v;
}

std::string cstring(std::string_view field) {
  const auto nul = field.find('\0');
  return std::string(nul == std::string_view::npos ? field : field.substr(0, nul));
}

// The entries of a tar archive. Errors name `source` and the header's byte offset.
std::vector<TarEntry> tar_entries(std::string_view b, const std::string& source) {
  std::vector<TarEntry> entries;
  std::string long_name;
  std::optional<std::uint64_t> pax_size;
  std::size_t pos = 0;
  while (pos + kBlock <= b.size()) {
    const std::string_view h = b.substr(pos, kBlock);
    if (h.find_first_not_of('\0') == std::string_view::npos) break;  // the end-of-archive blocks
    // The checksum: the header's bytes summed with its own field read as spaces.
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < kBlock; ++i)
      sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    if (sum != tar_number(h.substr(148, 8)))
      throw InputError(fmt::format("{}: tar header at byte {}: checksum mismatch (not a tar archive, or corrupt)",
                                   source, pos));
    TarEntry e;
    e.type = h[156];
    e.size = static_cast<std::size_t>(tar_number(h.substr(124, 12)));
    if (pax_size) e.size = static_cast<std::size_t>(*pax_size);
    e.offset = pos + kBlock;
    const std::string prefix = h.substr(257, 5) == "ustar" ? cstring(h.substr(345, 155)) : std::string();
    e.path = long_name.empty() ? (prefix.empty() ? "" : prefix + "/") + cstring(h.substr(0, 100)) : long_name;
    if (e.offset + e.size > b.size())
      throw InputError(fmt::format("{}: truncated tar archive: member '{}' at byte {} declares {} bytes, but only {} remain",
                                   source, e.path, pos, e.size, b.size() - e.offset));
    const std::string_view data = b.substr(e.offset, e.size);
    if (e.type == 'L') {  // GNU: the next entry's long name
      long_name = cstring(data);
    } else if (e.type == 'x') {  // pax: "LEN key=value\n" records for the next entry
      std::size_t p = 0;
      while (p < data.size()) {
        const auto space = data.find(' ', p);
        if (space == std::string_view::npos) break;
        const std::size_t len = static_cast<std::size_t>(std::strtoull(std::string(data.substr(p, space - p)).c_str(), nullptr, 10));
        if (len == 0 || p + len > data.size()) break;
        const std::string_view record = data.substr(space + 1, p + len - space - 2);
        const auto eq = record.find('=');
        if (eq != std::string_view::npos) {
          if (record.substr(0, eq) == "path") long_name = std::string(record.substr(eq + 1));
          if (record.substr(0, eq) == "size") pax_size = std::strtoull(std::string(record.substr(eq + 1)).c_str(), nullptr, 10);
        }
        p += len;
      }
    } else if (e.type != 'g') {
      entries.push_back(e);
      long_name.clear();
      pax_size.reset();
    }
    pos = e.offset + (e.size + kBlock - 1) / kBlock * kBlock;
  }
  return entries;
}

bool may_be_trace(const TarEntry& e) {
  if (e.type != '0' && e.type != '\0' && e.type != '7') return false;
  if (e.size == 0) return false;
  const std::string name = base_name(e.path);
  return !(name.rfind("._", 0) == 0 || e.path.find("__MACOSX/") != std::string::npos);
}

std::string strip_compression(std::string name) {
  if (ends_with(name, ".tgz")) return name.substr(0, name.size() - 4) + ".tar";
  if (ends_with(name, ".gz")) name.resize(name.size() - 3);
  return name;
}

TraceFile read(const std::string& path, std::size_t limit) {
  auto split = split_member(path);
  if (!split) throw InputError(fmt::format("{}: cannot read the file", path));
  const auto& [file, member] = *split;
  TraceFile out;
  out.source = file;
  out.name = strip_compression(base_name(file));
  const bool whole = limit == std::numeric_limits<std::size_t>::max();
  std::string bytes = read_raw(file, whole ? limit : std::max<std::size_t>(limit, 1 << 16));
  if (is_gzip(bytes)) {
    // Archives inside need all of it (their members' order decides nothing about size).
    if (!whole) bytes = read_raw(file, std::numeric_limits<std::size_t>::max());
    const bool maybe_tar = ends_with(file, ".tgz") || ends_with(file, ".tar.gz") || !member.empty();
    std::string head = gunzip(bytes, file, kBlock);
    const bool tar = maybe_tar || is_tar(head);
    bytes = gunzip(bytes, file, whole || tar ? std::numeric_limits<std::size_t>::max() : limit);
  } else if (!whole && is_tar(bytes)) {
    bytes = read_raw(file, std::numeric_limits<std::size_t>::max());
  }
  if (!is_tar(bytes)) {
    if (!member.empty())
      throw InputError(fmt::format("{}: not a tar archive, so it has no member '{}'", file, member));
    out.bytes = std::move(bytes);
    return out;
  }
  std::vector<TarEntry> candidates;
  for (const TarEntry& e : tar_entries(bytes, file))
    if (may_be_trace(e)) candidates.push_back(e);
  std::sort(candidates.begin(), candidates.end(), [](const TarEntry& a, const TarEntry& b) { return a.path < b.path; });
  auto names = [&] {
    std::string s;
    for (const auto& c : candidates) s += (s.empty() ? "" : ", ") + c.path;
    return s;
  };
  const TarEntry* chosen = nullptr;
  if (!member.empty()) {
    for (const auto& c : candidates)
      if (c.path == member || base_name(c.path) == member) {
        if (chosen)
          throw InputError(fmt::format("{}: member name '{}' matches both {} and {}; give its path", file, member,
                                       chosen->path, c.path));
        chosen = &c;
      }
    if (!chosen)
      throw InputError(fmt::format("{}: the archive has no member '{}' (it holds: {})", file, member,
                                   candidates.empty() ? "no files" : names()));
  } else {
    if (candidates.empty()) throw InputError(fmt::format("{}: the tar archive holds no file to read", file));
    chosen = &candidates.front();
    if (candidates.size() > 1)
      out.notes.push_back(fmt::format("{} holds {} files ({}); read {}, the first by name; name another as {}:MEMBER",
                                      file, candidates.size(), names(), chosen->path, file));
  }
  out.source = file + ":" + chosen->path;
  out.name = strip_compression(base_name(chosen->path));
  std::string_view data = std::string_view(bytes).substr(chosen->offset, chosen->size);
  if (is_gzip(data)) {
    out.bytes = gunzip(data, out.source, limit);
  } else {
    out.bytes.reserve(std::min(data.size(), limit) + kPadding);
    out.bytes.assign(data.substr(0, std::min(data.size(), limit)));
  }
  return out;
}

}  // namespace

TraceFile read_trace_file(const std::string& path) { return read(path, std::numeric_limits<std::size_t>::max()); }

std::string read_trace_head(const std::string& path, std::size_t n) {
  try {
    std::string head = read(path, n).bytes;
    if (head.size() > n) head.resize(n);
    return head;
  } catch (const InputError&) {
    return {};
  }
}

bool trace_file_exists(const std::string& path) { return split_member(path).has_value(); }

std::vector<std::string> archive_members(const std::string& path) {
  std::vector<std::string> out;
  try {
    auto split = split_member(path);
    if (!split) return out;
    std::string bytes = read_raw(split->first, std::numeric_limits<std::size_t>::max());
    if (is_gzip(bytes)) bytes = gunzip(bytes, split->first, std::numeric_limits<std::size_t>::max());
    if (!is_tar(bytes)) return out;
    for (const TarEntry& e : tar_entries(bytes, split->first))
      if (may_be_trace(e)) out.push_back(e.path);
  } catch (const InputError&) {
  }
  return out;
}

}  // namespace memsim
