#pragma once
// Kineto traces (torch.profiler's Chrome-trace JSON: `traceEvents` with cpu_op,
// cuda_runtime, kernel, gpu_memcpy ... events) as the measured op durations of the
// Execution Trace captured in the same run.
//
// The join, as HTA and Chakra's trace linker make it: an ET node's `rf_id` is the
// record-function id of its op, which the Kineto cpu_op carries as "Record function id"
// (newer traces) or "External id" (older ones: HTA's join); whichever joins more ops by name
// is used, and an op whose names differ is not joined. An op's GPU time is the time of the
// kernels, copies and memsets launched (cuda_runtime/cuda_driver events, tied to the GPU
// events by their correlation id) while its cpu_op ran, on its thread — its own and those of
// the ops under it. A trace without GPU events times ops by their CPU duration instead.
// The events are read with simdjson's on-demand parser, one at a time.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/workload/importers/pytorch_et.h"

namespace memsim {

/// True when `head`, the first bytes of a file, look like a Kineto / Chrome trace: a JSON
/// object with "traceEvents", or Kineto's "schemaVersion" and "deviceProperties".
bool looks_like_kineto(std::string_view head);

struct KinetoOp {
  std::string name;
  double cpu_us = 0;  // the cpu_op's own duration
  double gpu_us = 0;  // GPU time of what it launched, nested ops included
  std::uint32_t gpu_events = 0;
};

struct KinetoTimes {
  std::string device;                  // deviceProperties[0].name, when the trace has it
  bool has_gpu = false;                // any kernel, memcpy or memset event
  std::unordered_map<std::int64_t, KinetoOp> by_external_id, by_record_function_id;
  std::size_t cpu_ops = 0, gpu_events = 0;
};

/// Reads the text of a Kineto trace (padded for simdjson; copied once otherwise). InputError
/// naming `source` when it is not one.
KinetoTimes read_kineto(const std::string& text, const std::string& source);

/// Sets each op's measured duration from the Kineto op its origin joins to; returns the
/// notes that say how many joined, on which key, and what was left to the cost model.
std::vector<std::string> apply_kineto(Trace& trace, const std::vector<EtOpOrigin>& origins,
                                      const KinetoTimes& kineto, const std::string& source);

}  // namespace memsim
