#include "sim/core/paths.h"

#include <filesystem>
#include <system_error>

namespace memsim {

bool path_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec) && !ec;
}

}  // namespace memsim
