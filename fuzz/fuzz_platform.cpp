// The platform parser: a device YAML, as `memsim validate DEVICE.yaml` reads it.
#include "fuzz/fuzz.h"
#include "sim/core/config.h"
#include "sim/platform/platform.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return memsim::fuzz::run(data, size, [](const std::string& text) {
    memsim::load_platform(memsim::ConfigNode::parse_text(text, "fuzz.yaml"));
  });
}
