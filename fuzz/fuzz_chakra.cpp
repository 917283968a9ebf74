// The Chakra execution trace importer (length-prefixed protobuf messages).
#include "fuzz/fuzz.h"
#include "sim/workload/importers/chakra_et.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return memsim::fuzz::run(data, size, [](const std::string& text) {
    memsim::import_chakra_et(text, "fuzz.et");
  });
}
