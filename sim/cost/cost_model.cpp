#include "sim/cost/cost_model.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace memsim {

double roofline_s(const Op& op, const DeviceSpec& device, const TierSpec& tier,
                  double input_bytes, double wave) {
  const double peak = device.peak_flops[static_cast<int>(op.dtype)];
  const double compute = op.flops > 0 ? op.flops / (peak * device.efficiency_for(op.kind) * wave) : 0.0;
  const double memory = op.bytes_moved > 0
                            ? op.bytes_moved / (tier.bandwidth_Bps * device.memory_efficiency_for(op.kind))
                            : 0.0;
  double t = std::max(compute, memory) + device.launch_overhead_s;
  if (device.exchange_Bps > 0) t += device.sync_s + input_bytes / device.exchange_Bps;
  return t;
}

double gemm_wave_factor(const Trace& trace, const Op& op, const GemmModel& gemm) {
  if (gemm.sms == 0) return 1.0;
  const std::string_view kind = op.kind;
  const bool forward = kind == "linear" || kind == "matmul";
  if (!forward && kind != "linear_backward") return 1.0;
  // The shape from the operands' sizes (one element size for all three): forward reads
  // x (M x K) and the weight (N x K) and makes y (M x N); the backward of a linear that also
  // makes the input's gradient reads grad_out (M x N), x and the weight.
  if (op.inputs.size() < (forward ? 2u : 3u) || (forward && op.outputs.empty())) return 1.0;
  const double x = static_cast<double>(trace.buffers[op.inputs[forward ? 0 : 1]].bytes);
  const double w = static_cast<double>(trace.buffers[op.inputs[forward ? 1 : 2]].bytes);
  const double y = static_cast<double>(trace.buffers[forward ? op.outputs[0] : op.inputs[0]].bytes);
  if (x <= 0 || w <= 0 || y <= 0) return 1.0;
  const double m = std::sqrt(x * y / w), n = std::sqrt(y * w / x);
  return gemm.wave_factor(std::round(m), std::round(n), 1.0);
}

double flash_factor(const Trace& trace, const Op& op, const FlashModel& flash) {
  const std::string_view kind = op.kind;
  const bool backward = kind == "flash_attention_backward";
  if (!backward && kind != "flash_attention") return 1.0;
  // The attention's output has the query's shape (the query itself may be a view of a fused
  // q/k/v projection): the forward's first output (or, where it adds into a running output,
  // as context parallelism's later steps do, its first update), the backward's first input,
  // the output's gradient.
  if (op.flops <= 0) return 1.0;
  const auto& holder = backward ? op.inputs : !op.outputs.empty() ? op.outputs : op.updates;
  if (holder.empty()) return 1.0;
  const BufferId out = holder[0];
  const double elements = static_cast<double>(trace.buffers[out].bytes) / dtype_bytes(op.dtype);
  if (elements <= 0) return 1.0;
  return flash.factor(op.flops / ((backward ? 10.0 : 4.0) * elements), backward);
}

std::vector<double> op_durations(const Trace& trace, const PlatformSpec& platform) {
  const auto devices = platform.op_devices();
  const bool measured_here = !trace.measured_on.empty() && trace.measured_on == platform.name;
  std::vector<double> out;
  out.reserve(trace.ops.size());
  for (const Op& op : trace.ops) {
    if (op.device >= devices.size())
      throw InputError(fmt::format(
          "{}: op '{}' runs on device {}, but platform '{}' has {} device(s) that run ops",
          op_where(trace, op.id), op.name, op.device, platform.name, devices.size()));
    const DeviceSpec& d = platform.devices[devices[op.device]];
    if (op.stream >= static_cast<std::uint32_t>(d.streams))
        throw InputError(fmt::format("{}: op '{}' runs on stream {}, but device '{}' has {} stream(s)",
                                   op_where(trace, op.id), op.name, op.stream, d.name, d.streams));
    if (measured_here && op.measured_s) {
      out.push_back(*op.measured_s);
      continue;
    }
    if (op.flops > 0 && d.peak_flops[static_cast<int>(op.dtype)] <= 0)
      throw InputError(fmt::format(
          "{}: op '{}' computes in {}, but device '{}' of platform '{}' has no {} rate "
          "(add it under devices.{}.compute)",
          op_where(trace, op.id), op.name, to_string(op.dtype), d.name, platform.name, to_string(op.dtype),
          d.name));
    double input_bytes = 0;
    if (d.exchange_Bps > 0)
      for (BufferId b : op.inputs) input_bytes += static_cast<double>(trace.buffers[b].bytes);
    out.push_back(roofline_s(op, d, platform.tiers[*d.operand_tier()], input_bytes,
                             gemm_wave_factor(trace, op, d.gemm) * flash_factor(trace, op, d.flash)));
  }
  return out;
}

}  // namespace memsim
