#pragma once
// The step's time accounting, kept by listening to the engine's events as a SimGrid plugin
// listens to signals: busy time per stream (compute, recompute, stall), the copies (bytes
// each way, busy time, traffic per pair of tiers), the ops run and the FLOPs recomputed
// (by the policy, and by the workload itself: `recompute: full` or selective attention).
// The engine hands every event to the recorder and to the tally; at the end the tally fills
// the summary's totals. No SimGrid here.
#include <cstdint>
#include <array>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/platform/platform.h"
#include "sim/report/recorder.h"
#include "sim/report/summary.h"
#include "sim/workload/trace.h"

namespace memsim {

class Tally {
 public:
  /// `devices` compute devices that run ops (the accelerators first, `accelerators` of
  /// them, then hosts), each with up to `streams` streams.
  Tally(const Trace& trace, std::size_t devices, std::size_t accelerators, std::uint32_t streams);

  void on_event(const Event& e);
  /// Bytes that crossed link `link` in one direction (copies and collectives).
  void on_link_bytes(std::size_t link, bool forward, std::uint64_t bytes);

  /// The totals into `summary`: the accelerator stream that computed and recomputed longest
  /// speaks for the step (compute, stall and recompute time); hosts' compute is host_compute_time_s, and the
  /// rest of the step on that stream is split into exposed communication, host compute it
  /// waited through (exposed_host_time_s) and idle time, so the iteration line adds up.
  /// Reads summary.iteration_time_s.
  void fill(Summary& summary, const PlatformSpec& platform) const;

 private:
  struct Busy {
    double compute_s = 0;
    double stall_s = 0;
    double recompute_s = 0;
    std::vector<std::pair<double, double>> work;    // when it computed or recomputed
    std::vector<std::pair<double, double>> stalls;  // when it stalled
  };
  Busy& busy(std::uint32_t device, std::uint32_t stream) {
    if (device * streams_ + stream >= busy_.size()) busy_.resize((device + 1) * streams_);  // a stall on a lane of no ops
    return busy_[device * streams_ + stream];
  }
  using Interval = std::pair<double, double>;

  const Trace& trace_;
  std::size_t accelerators_;
  std::uint32_t streams_;
  std::vector<Busy> busy_;  // per (compute device, stream), up to the last device that runs ops
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::pair<std::uint64_t, std::uint64_t>>
      traffic_;  // (from, to) tier -> (bytes, copies)
  std::uint64_t swap_in_bytes_ = 0, swap_out_bytes_ = 0, ops_run_ = 0;
  // Communication: per compute device, when its compute streams worked and when it
  // communicated (kept only when the step communicates), and per (kind) what rank 0 sent.
  bool communicates_ = false;
  std::vector<std::vector<Interval>> computing_, communicating_;
  // Forward and backward compute per device, and when the last of it ended: a pipeline's
  // flush, before the optimizer steps.
  std::vector<std::vector<Interval>> passes_;
  std::vector<std::vector<Interval>> collecting_;  // communication but point-to-point
  double passes_end_s_ = 0;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> collectives_;  // kind -> (count, bytes)
  // Per link that carried bytes: forward, backward (a 16,384-GPU platform has 75,000 links).
  std::unordered_map<std::size_t, std::array<std::uint64_t, 2>> link_bytes_;
  double transfer_time_s_ = 0, recompute_flops_ = 0;
  // Per accelerator: the FLOPs of its forward and backward ops, without the recomputed
  // ones (the model's) and all it ran (the hardware's).
  std::vector<double> model_flops_, hardware_flops_;
  // Per op: a forward op the workload runs again itself (recomputed_ops.h). Its run is a
  // compute event, as the trace's other ops; a policy's re-run of any op is a recompute
  // event. Both count as recompute time, each run once.
  std::vector<std::uint8_t> rerun_;
};

}  // namespace memsim
