// The workload-spec parser and the model generator it drives (`model: resnet`, ...).
#include "fuzz/fuzz.h"
#include "sim/core/config.h"
#include "sim/workload/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return memsim::fuzz::run(data, size, [](const std::string& text) {
    const memsim::ConfigNode root = memsim::ConfigNode::parse_text(text, "fuzz.yaml");
    if (memsim::is_workload_spec(root)) memsim::generate_workload(root);
  });
}
