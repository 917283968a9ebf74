#pragma once
// A hand-made run for the trace writers on their own: gpu0 with two copy engines, three
// copies out of its HBM (two at once, then a third that finds the first engine free) and
// one copy in. Both trace formats are tested on it (test_trace_json.cpp,
// test_trace_pftrace.cpp).
#include <string>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/report/recorder.h"
#include "sim/workload/trace.h"

namespace memsim {

struct CopyEngineCase {
  PlatformSpec platform;
  Trace trace;
  std::vector<Event> events;
};

inline CopyEngineCase copy_engine_case() {
  CopyEngineCase c;
  PlatformSpec& p = c.platform;
  p.name = "box";
  DeviceSpec gpu;
  gpu.name = "gpu0";
  gpu.copy_engines = 2;
  gpu.tiers = {0};
  gpu.compute_tier = 0;
  DeviceSpec host;
  host.name = "host";
  host.kind = DeviceKind::cpu;
  host.tiers = {1};
  p.devices = {gpu, host};
  TierSpec hbm;
  hbm.name = "gpu0.hbm";
  hbm.device = "gpu0";
  hbm.capacity_bytes = 1 << 30;
  TierSpec dram = hbm;
  dram.name = "host.dram";
  dram.device = "host";
  dram.role = TierRole::offload;
  p.tiers = {hbm, dram};
  c.trace.name = "copies";
  for (int i = 0; i < 4; ++i) c.trace.add_buffer("b" + std::to_string(i), 1000, Category::activation);
  c.events = {
      {EventKind::swap_out, 0.0, 2e-3, 0, 0, kNoOp, 0, 1000, 0, 1},
      {EventKind::swap_out, 1e-3, 3e-3, 0, 0, kNoOp, 1, 1000, 0, 1},
      {EventKind::swap_out, 2e-3, 4e-3, 0, 0, kNoOp, 2, 1000, 0, 1},
      {EventKind::swap_in, 1e-3, 5e-3, 0, 1, kNoOp, 3, 1000, 1, 0},
  };
  return c;
}

}  // namespace memsim
