#pragma once
// The file system, asked without exceptions: a name that is too long, or a path through a
// file, is simply not there (std::filesystem::exists would throw and end the program).
#include <string>

namespace memsim {

/// Whether `path` names anything in the file system (a file, a folder, a device).
bool path_exists(const std::string& path);

}  // namespace memsim
