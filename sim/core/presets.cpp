#include "sim/core/presets.h"

namespace memsim {
namespace {

std::string_view stem_in(std::string_view path, std::string_view folder) {
  if (path.size() <= folder.size() + 1 || path.substr(0, folder.size()) != folder ||
      path[folder.size()] != '/')
    return {};
  std::string_view file = path.substr(folder.size() + 1);
  if (file.find('/') != std::string_view::npos) return {};
  auto dot = file.rfind('.');
  return dot == std::string_view::npos ? file : file.substr(0, dot);
}

}  // namespace

const Preset* find_preset(std::string_view folder, std::string_view name) {
  for (const auto& p : builtin_presets())
    if (!name.empty() && stem_in(p.path, folder) == name) return &p;
  return nullptr;
}

std::vector<std::string> preset_names(std::string_view folder) {
  std::vector<std::string> names;
  for (const auto& p : builtin_presets())
    if (auto s = stem_in(p.path, folder); !s.empty()) names.emplace_back(s);
  return names;
}

}  // namespace memsim
