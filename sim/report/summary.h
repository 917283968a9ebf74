#pragma once
// What a run concluded: the figures summary.json holds and the terminal table shows.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/memory/memory_state.h"

namespace memsim {

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
  std::uint64_t swap_out_bytes = 0;
  std::uint64_t swap_in_bytes = 0;
  double recompute_flops = 0;
  std::uint64_t ops_run = 0;
  std::uint64_t ops_total = 0;
  std::vector<TierSummary> tiers;
  std::vector<TrafficSummary> traffic;  // per (source, destination) tier, in tier order
  std::optional<OomReport> oom;
  // Imported traces: what the importer left out or chose, and which op durations came from
  // the trace's measurements and which from the cost model.
  std::vector<std::string> import_notes;
  std::uint64_t measured_ops = 0;  // timed by their measured duration
  std::uint64_t modelled_ops = 0;  // timed by the cost model
};

}  // namespace memsim
