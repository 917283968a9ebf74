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
//
// Names: a trace recorded with `with_modules` (or `with_stack`) has an event per module
// forward, `nn.Module: Linear_3` (Kineto numbers each class's instances). Where it does, an
// op is named in the scope that encloses its cpu_op on its thread: the modules around it,
// outermost first, joined by dots (`TransformerEncoder_0.TransformerEncoderLayer_1.Linear_3`),
// or a user annotation nearer to it; a backward op takes its forward op's. Ops the Kineto
// trace puts in no scope keep the ET's names (pytorch_et.h).
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
  std::string scope;  // the modules or annotation around it (see above); empty for none
};

struct KinetoTimes {
  std::string device;                  // deviceProperties[0].name, when the trace has it
  bool has_gpu = false;                // any kernel, memcpy or memset event
  std::unordered_map<std::int64_t, KinetoOp> by_external_id, by_record_function_id;
  std::size_t cpu_ops = 0, gpu_events = 0;
  std::size_t modules = 0;             // `nn.Module: ` events: the ops' scopes name layers
  std::size_t long_scopes = 0;         // scopes too long to name anything (kMaxScopeName)
};

/// Reads the text of a Kineto trace (padded for simdjson; copied once otherwise). InputError
/// naming `source` when it is not one.
KinetoTimes read_kineto(const std::string& text, const std::string& source);

/// Sets each op's measured duration from the Kineto op its origin joins to and, where the
/// Kineto trace has module events, names the op and what it allocates in its Kineto scope;
/// returns the notes that say how many joined, on which key, what was left to the cost model
/// and how many ops were named.
std::vector<std::string> apply_kineto(Trace& trace, const std::vector<EtOpOrigin>& origins,
                                      const KinetoTimes& kineto, const std::string& source);

}  // namespace memsim
