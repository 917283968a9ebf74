#pragma once
// Device and workload presets compiled into the binary (configs/devices/*.yaml,
// workloads/*.yaml), so `memsim run a100-40gb resnet50` works from any directory.
#include <string>
#include <string_view>
#include <vector>

namespace memsim {

struct Preset {
  std::string path;  // relative to the source tree: "configs/devices/a100-40gb.yaml"
  std::string text;
};

/// In path order (the glob sorts them).
const std::vector<Preset>& builtin_presets();

/// The preset whose file stem is `name` under `folder` ("configs/devices", "a100-40gb").
const Preset* find_preset(std::string_view folder, std::string_view name);

/// Names (file stems) of the presets under `folder`.
std::vector<std::string> preset_names(std::string_view folder);

}  // namespace memsim
