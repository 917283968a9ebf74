#pragma once
// How long an op takes on a device. Pure arithmetic, no SimGrid, so it is unit-tested alone.
//
//   duration = max(FLOPs / (peak[dtype] x eff[kind]), bytes / (tier bandwidth x mem_eff[kind]))
//              + launch overhead
//
// where a GEMM on a device with `gemm:` (SM count, tile) divides its compute term by the
// wave quantization of its output tiles (gemm_wave_factor), and a FlashAttention kernel on a
// device with `flash_attention:` by its short sequence's fixed work (flash_factor). The host's time to issue each op
// (`host_overhead:`) is not in the duration: the engine keeps a host clock per device
// (docs/time-model.md).
//
// eff is the device's `efficiency` table, mem_eff its `memory_efficiency` table (which falls
// back to eff where it says nothing, so a device without one uses eff for both terms).
//
// On a bulk-synchronous (IPU-like) device, with `exchange` in its YAML, each op is a
// compute step, a sync and an exchange step that brings its operands to the tiles that
// compute: + sync + input bytes / exchange bandwidth.
//
// unless the trace carries a duration measured on this very platform, which then wins.
#include <string>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/workload/trace.h"

namespace memsim {

/// `input_bytes`: the bytes of the op's inputs, for the exchange step of a BSP device;
/// `wave`: the fraction of the compute rate a GEMM's last wave leaves (gemm_wave_factor).
double roofline_s(const Op& op, const DeviceSpec& device, const TierSpec& compute_tier,
                  double input_bytes = 0, double wave = 1.0);

/// A GEMM's wave quantization on a device with `gemm:` (1 for other ops and devices): its
/// M and N from its operands' sizes (x: M x K, weight: N x K, output: M x N), then
/// GemmModel::wave_factor.
double gemm_wave_factor(const Trace& trace, const Op& op, const GemmModel& gemm);

/// A FlashAttention kernel's (`flash_attention`, `flash_attention_backward`) share of its
/// efficiency on a device with `flash_attention:` (1 for other ops and devices): the keys a
/// query attends to, FLOPs / (4 x the query's elements, the output's), a backward's FLOPs as
/// 2.5 forwards, then FlashModel::factor.
double flash_factor(const Trace& trace, const Op& op, const FlashModel& flash);

/// Durations of every op of the trace on the platform, checking that each op's device
/// exists and has a rate for its dtype (InputError otherwise, naming op and device).
std::vector<double> op_durations(const Trace& trace, const PlatformSpec& platform);

}  // namespace memsim
