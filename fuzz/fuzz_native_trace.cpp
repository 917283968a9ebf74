// The native trace reader (docs/trace-format.md), then what a run computes from an accepted
// trace before the engine: liveness, the zero-time replay's peak, and each op's duration on
// a built-in platform (the roofline, with its unit conversions).
#include "fuzz/fuzz.h"
#include "sim/core/config.h"
#include "sim/core/presets.h"
#include "sim/cost/cost_model.h"
#include "sim/exec/replay.h"
#include "sim/platform/platform.h"
#include "sim/workload/trace.h"
#include "sim/workload/trace_io.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const memsim::PlatformSpec platform = [] {
    const memsim::Preset* p = memsim::find_preset("configs/devices", "a100-40gb");
    return memsim::load_platform(memsim::ConfigNode::parse_text(p->text, p->path));
  }();
  return memsim::fuzz::run(data, size, [](const std::string& text) {
    const memsim::Trace t = memsim::read_trace(memsim::ConfigNode::parse_text(text, "fuzz.json"));
    memsim::compute_liveness(t);
    memsim::exec::baseline_peak_bytes(t);
    memsim::op_durations(t, platform);
  });
}
