// The sweep reader and its expansion into points (what `memsim sweep --list` does). A sweep
// names its inputs relative to its own folder, so the input is written to a file first.
#include <unistd.h>

#include <fstream>

#include "fuzz/fuzz.h"
#include "sim/sweep/resolve.h"
#include "sim/sweep/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/memsim-fuzz-sweep-" + std::to_string(::getpid()) + ".yaml";
  return memsim::fuzz::run(data, size, [](const std::string& text) {
    {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f << text;
    }
    const memsim::SweepSpec spec = memsim::load_sweep(path);
    // Resolving is linear in the points (about half a millisecond each, far more under
    // ASan): large sweeps are expanded only to check their bound, which is what can break.
    const auto count = memsim::sweep_point_count(spec);
    if (count && *count > 500 && *count <= memsim::kMostSweepPoints) return;
    memsim::Resolver resolver;
    memsim::expand_sweep(spec, resolver);
  });
}
