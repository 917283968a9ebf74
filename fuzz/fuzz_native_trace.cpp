// The native trace reader (docs/trace-format.md), then liveness over what it accepted.
#include "fuzz/fuzz.h"
#include "sim/core/config.h"
#include "sim/workload/trace.h"
#include "sim/workload/trace_io.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return memsim::fuzz::run(data, size, [](const std::string& text) {
    const memsim::Trace t = memsim::read_trace(memsim::ConfigNode::parse_text(text, "fuzz.json"));
    memsim::compute_liveness(t);
  });
}
