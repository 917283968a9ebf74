#pragma once
// What a run concluded: the figures summary.json holds and the terminal table shows.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <memory>
#include <vector>

#include "sim/memory/memory_state.h"

namespace memsim {

/// A buffer live at a tier's peak. Its names point into the text its PeakReport keeps.
struct PeakBuffer {
  std::string_view name;      // "" for an op's workspace
  Category category = Category::other;
  std::uint64_t bytes = 0;
  std::string_view producer;  // the op that made it ("" when it was there from the start)
  std::string_view layer;     // the producer's module (see layer_of), for activations
};

/// The buffers live at a tier's peak, read like a vector. Copies of a report share one list:
/// a symmetric run's thousands of ranks held what the simulated rank held, and a list each
/// was most of its memory.
class PeakBuffers {
 public:
  std::size_t size() const { return list_ ? list_->size() : 0; }
  bool empty() const { return size() == 0; }
  const PeakBuffer& operator[](std::size_t i) const { return (*list_)[i]; }
  const PeakBuffer* begin() const { return list_ ? list_->data() : nullptr; }
  const PeakBuffer* end() const { return list_ ? list_->data() + list_->size() : nullptr; }
  /// This report's own list to fill (a shared one is copied first).
  std::vector<PeakBuffer>& edit() {
    if (!list_)
      list_ = std::make_shared<std::vector<PeakBuffer>>();
    else if (list_.use_count() > 1)
      list_ = std::make_shared<std::vector<PeakBuffer>>(*list_);
    return *list_;
  }

 private:
  std::shared_ptr<std::vector<PeakBuffer>> list_;
};

/// What the tier held at its peak and what was running then.
struct PeakReport {
  OpId op = kNoOp;        // the op running on the tier's device (or about to)
  std::string op_name;
  std::string phase;      // forward | backward | optimizer, "" without an op
  bool recompute = false; // the op was being recomputed
  PeakBuffers live;  // largest first; equal sizes in the order the step made them
  /// What live's names point into, shared by copies of the report (a million live buffers'
  /// names in one block, not a string each).
  std::shared_ptr<const void> text;
  /// The device whose replica names it holds ("gpu3" of "gpu3:fc1") where that is not the
  /// tier's own: a peer's copy of the report of the rank or node that speaks for it.
  std::string device;
};

struct TierSummary {
  std::string name;
  std::string role;
  TierUsage usage;  // capacity, peaks, time of the peak, split by category at the peak
  std::vector<std::uint64_t> tile_peaks;  // tiled tiers: the peak of each tile
};

struct LiveBuffer {
  std::string name;
  Category category;
  std::uint64_t bytes;
};

/// A change that makes the step fit, verified by running it (`memsim run`'s advice).
struct FitAdvice {
  std::string change;        // batch | policy | recompute | layout
  std::string policy;
  std::string recompute;     // for recompute: the workload's recomputation (full | selective)
  std::string layout;        // for layout: memsim plan's words for it ("tp 2, pp 1, dp 4, ...")
  std::vector<std::string> sets;  // for layout: the --set KEY=VALUE that make it
  std::uint32_t gpus = 0;    // for layout: the GPUs searched over
  std::int64_t global_batch = 0;
  double mfu = -1;           // for layout (-1: not known)
  std::int64_t batch = 0;    // 0: the workload has no batch parameter
  std::int64_t first_fail = 0;  // for batch: the smallest batch found not to fit
  double iteration_time_s = 0;
  double slowdown = 0;       // the iteration time over that with enough memory (0: unknown)
  std::string point;         // the folder of the run that shows it
};

/// What it would take, found by child runs after an oom (empty with --no-advice).
struct OomAdvice {
  std::uint64_t needs_bytes = 0;    // the tier's peak with enough memory (0: not found)
  std::string needs_error;          // when not found: why, in one line (never empty then)
  CategoryBytes needs_by_category{};
  double needs_time_s = 0;          // the iteration time with enough memory
  std::string needs_policy;         // the policy of that run
  std::string needs_point;
  std::vector<Category> exceeding;  // categories that alone hold more than the tier
  std::uint64_t model_state_bytes = 0;  // weights, gradients and optimizer state at the peak
  std::vector<FitAdvice> fits;
  /// Each policy tried at this batch and how it went (ok, oom, error) with its time.
  struct Tried {
    std::string policy, status;
    double iteration_time_s = 0;
    std::string error;  // why, for status error (a policy the platform cannot run)
  };
  std::vector<Tried> tried;
  std::vector<std::string> notes;   // what was not tried, and why
};

struct OomReport {
  std::string op;
  OpId op_id = 0;
  std::string tier;
  std::uint64_t requested_bytes = 0;
  std::uint64_t allocated_bytes = 0;
  std::uint64_t capacity_bytes = 0;
  std::uint64_t largest_free_block = 0;
  std::string reason;                    // "fragmentation: ...", "tile 17 ...", or ""
  std::vector<LiveBuffer> largest_live;  // largest first
  std::optional<OomAdvice> advice;
};

/// What the copies carried from one tier to another (host traffic, NVMe traffic).
struct TrafficSummary {
  std::string from, to;  // tier names
  std::uint64_t bytes = 0;
  std::uint64_t copies = 0;
};

/// What crossed one link in the step: copies and communication, each way (forward: from its
/// first endpoint to its second), and its busiest direction's share of the step.
struct LinkSummary {
  std::string name;
  double bandwidth_Bps = 0;
  bool full_duplex = true;
  std::uint64_t bytes_forward = 0, bytes_backward = 0;
  double utilisation = 0;  // bytes over bandwidth x iteration time (the busier direction)
};

/// A rank's communication ops of one kind: how many and the bytes of their tensors.
struct CollectiveSummary {
  std::string kind;  // all_reduce, all_gather, ...
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;  // sum of Op::message_bytes
};

/// One pipeline stage, as its simulated rank ran it: the time its device computed and the
/// rest of the iteration, its bubble (waiting for the stages before and after it).
struct PipelineStageSummary {
  std::uint32_t stage = 0;
  std::uint32_t rank = 0;
  double compute_s = 0;         // forward and backward
  double exposed_comm_s = 0;    // its tensor- and data-parallel communication it waited for
  /// The rest of the flush (Summary::passes_end_s), as a fraction of it: waiting for the
  /// stages before and after it.
  double bubble_fraction = 0;
};

/// The keys of a device's `efficiency` and `memory_efficiency` tables that no op it ran
/// has as its kind (`default` aside): they timed nothing in the run.
struct UnusedEfficiencyKeys {
  std::string device;  // "gpu0"
  std::vector<std::string> efficiency, memory_efficiency;  // in key order
};

/// What the step trained on per second and how much of the GPUs' peak it used. Written for
/// a step that finished (status ok) only; an oom's counts are of the part it ran.
/// Per step, over every GPU, simulated or not: a simulated rank's figures stand for the
/// peers it speaks for.
struct Throughput {
  std::uint32_t gpus = 0;     // accelerators the step runs on
  std::uint64_t samples = 0;  // over the data-parallel replicas (0: unknown, as for a trace)
  std::uint64_t tokens = 0;   // samples x their sequence length (0: unknown, or no sequence)
  /// The forward and backward ops' FLOPs as memsim's trace counts them (a multiply-add is
  /// 2), without recomputation: what MFU counts. hardware_flops adds the recomputation (the
  /// workload's and a policy's): what HFU counts. The optimizer's are in neither.
  double model_flops = 0;
  double hardware_flops = 0;
  double peak_flops = 0;      // of one GPU in `dtype` (0: the device gives none)
  DType dtype = DType::fp32;  // the dtype most of the model FLOPs ran in
};

struct Summary {
  std::string status = "ok";  // ok | oom
  std::string workload;       // trace name
  std::string description;    // "resnet50 (batch 64, fp32, momentum)"
  std::string platform;
  std::string policy;
  std::string workload_source, platform_source;
  double iteration_time_s = 0;
  double compute_time_s = 0;  // of the busiest stream (the only one, usually)
  double stall_time_s = 0;    // of that stream
  double recompute_time_s = 0;
  double host_compute_time_s = 0;  // ops a policy moved to a host CPU (an offloaded optimizer)
  // The rest of the iteration on the stream that speaks for it, so that iteration = compute
  // + stall + recompute + exposed host + idle: host compute it waited through, and the
  // time it neither computed nor stalled (waiting for a copy or another device without a
  // stall, or done before the step's end).
  double exposed_host_time_s = 0;
  double idle_time_s = 0;
  double transfer_time_s = 0;  // total busy time of copies
  // Communication (collectives over a process group), of the rank that communicated longest:
  // its communication stream's busy time, and of that the part its compute streams were idle
  // (not overlapped with compute).
  double comm_time_s = 0;
  double exposed_comm_time_s = 0;
  std::vector<CollectiveSummary> collectives;  // of the first rank, per kind
  std::vector<LinkSummary> links;              // links that carried anything, in file order
  /// Training across devices: how many ranks the step is one of, and whether rank 0 was
  /// simulated for all of them (symmetric ranks, their traffic still on the links).
  std::uint32_t ranks = 1;
  bool symmetric = false;
  /// With symmetric ranks that share their node's host (ZeRO-Offload): node 0's ranks, all
  /// simulated, speak for every node's; else 1.
  std::uint32_t node_ranks_simulated = 1;
  /// Per compute device slot, when the step communicates: the time it computed forward and
  /// backward ops (its compute streams' union), and when the last of those ended anywhere
  /// (a pipeline's flush, before the optimizer steps).
  std::vector<double> device_compute_s;
  std::vector<double> device_exposed_comm_s;  // its collectives before then, not hidden by compute
  double passes_end_s = 0;
  /// A pipeline's stages (empty without one), its schedule and micro-batches.
  std::vector<PipelineStageSummary> pipeline;
  std::string pipeline_schedule;
  std::uint32_t micro_batches = 1;
  std::uint64_t swap_out_bytes = 0;
  std::uint64_t swap_in_bytes = 0;
  double recompute_flops = 0;
  /// Per accelerator slot: its forward and backward FLOPs without and with recomputation
  /// (Throughput's, before the peers are counted).
  std::vector<double> device_model_flops, device_hardware_flops;
  std::optional<Throughput> throughput;
  std::uint64_t ops_run = 0;
  std::uint64_t ops_total = 0;
  // The engine's own count, not written out: collective phases whose flows' time was slept as
  // measured at their first run (CollectiveRunner::plan_replay), not run as SimGrid's flows.
  std::uint64_t replayed_phases = 0;
  std::vector<TierSummary> tiers;
  std::vector<PeakReport> peaks;  // indexed like tiers (explain_peaks fills them)
  std::vector<TrafficSummary> traffic;  // per (source, destination) tier, in tier order
  std::optional<OomReport> oom;
  // Imported traces: what the importer left out or chose, and which op durations came from
  // the trace's measurements and which from the cost model.
  std::vector<std::string> import_notes;
  std::uint64_t measured_ops = 0;  // timed by their measured duration
  std::uint64_t modelled_ops = 0;  // timed by the cost model
  /// Per device that ran ops, in op-device order, those with any: table keys that matched
  /// no op kind of the run (a `matmul` entry for a model whose layers are `linear`).
  std::vector<UnusedEfficiencyKeys> unused_efficiency_keys;

  /// What tier `index` held at its peak (empty before explain_peaks).
  const PeakReport& peak(std::size_t index) const {
    static const PeakReport none;
    return index < peaks.size() ? peaks[index] : none;
  }
  const PeakReport& peak(const TierSummary& tier) const {
    return peak(static_cast<std::size_t>(&tier - tiers.data()));
  }
};

}  // namespace memsim
