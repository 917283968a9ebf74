// The sweep reader and its expansion into points (what `memsim sweep --list` does), each
// point's inputs loaded as `memsim run` would load them: with axes over parallel keys, every
// point's workload is generated with its layout. A sweep names its inputs relative to its own
// folder, so the input is written to a file first.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>

#include "fuzz/fuzz.h"
#include "sim/sweep/resolve.h"
#include "sim/sweep/sweep.h"

namespace {

// Axes whose values multiply the ops of a point's step (micro-batches, ranks, layers), with
// the most this harness expands: a point past them is the work bound's business (the CLI's),
// and would make libFuzzer's timeout fire on work rather than on a hang.
bool heavy(const memsim::SweepSpec& spec) {
  static const std::map<std::string, long long> most{
      {"parallel.micro_batches", 16}, {"parallel.global_batch", 64}, {"parallel.dp", 64},
      {"parallel.tp", 64},            {"parallel.pp", 64},           {"parallel.virtual_stages", 8},
      {"workload.layers", 64},        {"workload.depth", 200},       {"workload.batch", 64},
      {"nodes", 4}};
  for (const memsim::SweepAxis& a : spec.axes) {
    const auto it = most.find(a.key);
    if (it == most.end()) continue;
    for (const std::string& v : a.values)
      if (std::strtoll(v.c_str(), nullptr, 10) > it->second) return true;
  }
  return false;
}

}  // namespace

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
    if (count && *count <= memsim::kMostSweepPoints && heavy(spec)) return;
    memsim::Resolver resolver;
    memsim::expand_sweep(spec, resolver);
  });
}
