// The Chakra execution trace importer (length-prefixed protobuf messages), and the zero-time
// replay of what it accepted.
#include "fuzz/fuzz.h"
#include "sim/exec/replay.h"
#include "sim/workload/importers/chakra_et.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return memsim::fuzz::run(data, size, [](const std::string& text) {
    memsim::exec::baseline_peak_bytes(memsim::import_chakra_et(text, "fuzz.et"));
  });
}
