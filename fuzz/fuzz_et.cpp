// The PyTorch Execution Trace importer (JSON read with simdjson), and the zero-time replay
// of what it accepted.
#include "fuzz/fuzz.h"
#include "sim/exec/replay.h"
#include "sim/workload/importers/pytorch_et.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return memsim::fuzz::run(data, size, [](const std::string& text) {
    memsim::exec::baseline_peak_bytes(memsim::import_pytorch_et(text, "fuzz.json"));
  });
}
