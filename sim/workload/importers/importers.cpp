#include "sim/workload/importers/importers.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/workload/importers/chakra_et.h"
#include "sim/workload/importers/pytorch_et.h"

namespace memsim {

ForeignTrace sniff_foreign_trace(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return ForeignTrace::none;
  std::string head(4096, '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(f.gcount()));
  if (looks_like_pytorch_et(head)) return ForeignTrace::pytorch_et;
  if (looks_like_chakra_et(head)) return ForeignTrace::chakra;
  return ForeignTrace::none;
}

Trace import_foreign_trace(const std::string& path, ForeignTrace kind) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(fmt::format("{}: cannot read the file", path));
  std::ostringstream text;
  text << f.rdbuf();
  switch (kind) {
    case ForeignTrace::pytorch_et: return import_pytorch_et(text.str(), path);
    case ForeignTrace::chakra: return import_chakra_et(text.str(), path);
    case ForeignTrace::none: break;
  }
  throw InputError(fmt::format("{}: not a trace format memsim imports", path));
}

}  // namespace memsim
