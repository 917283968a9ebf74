#include "sim/run/run.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/heap.h"
#include "sim/core/limits.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/engine.h"
#include "sim/exec/replay.h"
#include "sim/memory/allocator.h"
#include "sim/parallel/mesh.h"
#include "sim/platform/routes.h"
#include "sim/run/sanity.h"
#include "sim/workload/parallel.h"

namespace memsim {

std::vector<std::uint64_t> tier_caps(const PlatformSpec& platform, const Budget* budget,
                                     const std::vector<std::uint64_t>& baseline_peaks,
                                     const std::vector<std::uint64_t>& reserved) {
  std::vector<std::uint64_t> caps;
  caps.reserve(platform.tiers.size());
  for (const TierSpec& t : platform.tiers) caps.push_back(t.capacity_bytes);
  if (!budget) return caps;
  const auto devices = platform.compute_devices();
  for (std::size_t k = 0; k < devices.size(); ++k) {
    const std::uint64_t peak = k < baseline_peaks.size() ? baseline_peaks[k] : 0;
    if (budget->is_fraction && peak == 0) continue;
    const std::size_t tier = *platform.devices[devices[k]].compute_tier;
    // A fraction is of the step's own bytes: what the device reserves outside the allocator
    // (its CUDA context, NCCL's buffers) comes on top, as it does on the real device.
    const double cap = budget->is_fraction ? std::floor(budget->value * static_cast<double>(peak)) +
                                                 static_cast<double>(tier < reserved.size() ? reserved[tier] : 0)
                                           : budget->value;
    const TierSpec& t = platform.tiers[tier];
    const std::uint64_t limit = std::min<std::uint64_t>(t.capacity_bytes, static_cast<std::uint64_t>(cap));
    // As the tier's allocator rounds it (a tiled tier's tiles shrink in proportion).
    caps[tier] = make_allocator(t.allocator, t.allocator_params.get(), t.capacity_bytes, limit)->capacity_bytes();
  }
  return caps;
}

namespace {

// What the planners may use of each tier: its cap, less what is reserved outside the
// allocator on the devices that run the step (the engine takes those bytes at the start).
std::vector<std::uint64_t> planning_caps(const PlatformSpec& platform, const Trace& trace,
                                         std::vector<std::uint64_t> caps) {
  const std::vector<std::uint64_t> reserved = reserved_per_tier(platform, trace);
  for (std::size_t t = 0; t < caps.size(); ++t) caps[t] = caps[t] > reserved[t] ? caps[t] - reserved[t] : 0;
  return caps;
}

// Where a platform of several nodes runs one replica on each of its compute devices apart from
// the other nodes': the number of compute devices of node 0 (node k's are the next as many),
// when each of them swaps to a tier of node 0 over links of node 0's own; 0 when the nodes
// could meet (one node, nodes of unequal devices, an offload tier across the fabric).
std::uint32_t nodes_apart(const PlatformSpec& p, const std::vector<std::size_t>& compute) {
  if (p.nodes < 2 || compute.size() % p.nodes != 0) return 0;
  const std::size_t per_node = compute.size() / p.nodes;
  for (std::size_t k = 0; k < compute.size(); ++k)
    if (p.devices[compute[k]].node != k / per_node) return 0;
  std::vector<std::size_t> tiers;
  for (std::size_t k = 0; k < per_node; ++k) tiers.push_back(*p.devices[compute[k]].compute_tier);
  auto in_node0 = [&](const Route& r) {
    for (const RouteElement& e : r.elements) {
      const bool node0 = e.kind == RouteElement::Kind::link
                             ? p.links[e.index].node == 0u
                             : p.devices[p.find_device(p.tiers[e.index].device).value_or(0)].node == 0;
      if (!node0) return false;
    }
    return true;
  };
  for (const std::optional<OffloadRoute>& o : nearest_offloads(p, tiers))
    if (o && !(in_node0(o->out) && in_node0(o->in))) return 0;
  return static_cast<std::uint32_t>(per_node);
}

// The step's throughput (also of a step that ran out of memory, whose GPUs and samples the
// advice searches layouts for; it is written for a step that finished only): each
// simulated accelerator's FLOPs counted once for every GPU it speaks for (`peers[d]`, 0 for
// a device that ran nothing of the step), over `gpus`. `samples`: the step's, over its
// data-parallel replicas (0: unknown).
std::optional<Throughput> throughput_of(const Summary& s, const Trace& trace, const PlatformSpec& platform,
                                        const std::vector<std::uint32_t>& peers, std::uint32_t gpus,
                                        std::uint64_t samples, std::uint64_t sample_tokens) {
  if (gpus == 0) return std::nullopt;
  Throughput t;
  t.gpus = gpus;
  t.samples = samples;
  t.tokens = samples * sample_tokens;
  std::size_t first = peers.size();
  for (std::size_t d = 0; d < peers.size(); ++d) {
    if (peers[d] == 0) continue;
    first = std::min(first, d);
    if (d < s.device_model_flops.size()) t.model_flops += peers[d] * s.device_model_flops[d];
    if (d < s.device_hardware_flops.size()) t.hardware_flops += peers[d] * s.device_hardware_flops[d];
  }
  // The dtype of most of the model's FLOPs sets the peak MFU is measured against.
  std::array<double, kDTypeCount> by_dtype{};
  for (const Op& op : trace.ops)
    if (op.phase != Phase::optimizer && op.device < peers.size() && peers[op.device] > 0)
      by_dtype[static_cast<std::size_t>(op.dtype)] += op.flops;
  t.dtype = static_cast<DType>(std::max_element(by_dtype.begin(), by_dtype.end()) - by_dtype.begin());
  const auto compute = platform.compute_devices();
  if (first < compute.size()) t.peak_flops = platform.devices[compute[first]].peak_flops[static_cast<std::size_t>(t.dtype)];
  return t;
}

// Per device, the device in the same place of node 0's description (itself on node 0).
std::vector<std::size_t> node0_counterparts(const PlatformSpec& p) {
  std::vector<std::size_t> out(p.devices.size());
  std::vector<std::size_t> seen(p.nodes, 0);  // devices of each node so far
  std::vector<std::size_t> node0;
  for (std::size_t d = 0; d < p.devices.size(); ++d) {
    const std::uint32_t n = p.devices[d].node;
    const std::size_t at = n < seen.size() ? seen[n]++ : 0;
    if (n == 0) node0.push_back(d);
    out[d] = n == 0 || at >= node0.size() ? d : node0[at];
  }
  return out;
}

}  // namespace

RunResult run(const RunInputs& in) {
  RunInputs copy = in;
  return run(std::move(copy));
}

RunResult run(RunInputs&& in) {
  RunResult out;
  run(std::move(in), out);
  return out;
}

void explain_peaks(RunResult& r, const PlatformSpec& platform) {
  explain_peaks(r.summary, r.recorder, r.trace, platform);
  for (const auto& [t, t0] : r.peak_copies) {
    r.summary.peaks[t] = r.summary.peaks[t0];
    r.summary.peaks[t].device = platform.tiers[t0].device;
  }
}

void run(RunInputs&& in, RunResult& out) {
  if (!in.policy) throw PolicyError("run(): no policy given");
  const PlatformSpec& platform = in.platform;
  const Policy& policy = *in.policy;
  const auto compute = platform.compute_devices();
  std::vector<std::uint32_t> slots = in.slots;
  // The samples of each workload given, before they are moved (throughput counts them).
  std::vector<std::uint64_t> workload_samples;
  for (const Trace& w : in.workloads) workload_samples.push_back(w.samples);
  const std::uint64_t sample_tokens = in.workloads.empty() ? 0 : in.workloads[0].sample_tokens;
  const bool same_tokens = std::all_of(in.workloads.begin(), in.workloads.end(),
                                       [&](const Trace& w) { return w.sample_tokens == sample_tokens; });
  // A rank of a data-parallel step: the ranks take the first compute devices; with symmetric
  // ranks only rank 0 is simulated (its peers' traffic is on the links all the same).
  ParallelLayout layout = in.workloads.size() == 1 ? in.workloads[0].parallel : ParallelLayout{};
  std::vector<std::string> layout_notes;
  if (layout.ranks > 1 && layout.from_trace && compute.size() < layout.ranks) {
    layout_notes.push_back(fmt::format(
        "the trace's collectives span {} ranks and platform {} has {} compute device(s): they take "
        "the cost model's time, not the network's",
        layout.ranks, platform.name, compute.size()));
    layout = ParallelLayout{};
  }
  if (layout.ranks > 1) {
    // Located at the keys that asked for the ranks (parallel.tp, .dp, .pp), where known.
    const std::string at = layout.origin.empty() ? std::string() : layout.origin + ": ";
    if (in.workloads.size() != 1)
      throw InputError(at + "a data-parallel step (parallel.dp) runs alone: give one workload");
    if (compute.size() < layout.ranks)
      throw InputError(fmt::format("{}{}: the step runs on {} ranks ({}), but platform {} has {} compute device(s){}",
                                   at, in.workloads[0].name, layout.ranks, layout.summary, platform.name,
                                   compute.size(), more_devices_hint(platform, layout.ranks)));
    if (!in.slots.empty())
      throw InputError(fmt::format("{}{}: a data-parallel step takes the first {} compute devices; "
                                   "--devices does not apply to it",
                                   at, in.workloads[0].name, layout.ranks));
    slots.clear();
    if (!layout.simulated.empty())
      slots = layout.simulated;  // placed already (a pipeline's stages)
    else
      for (std::uint32_t k = 0; k < (layout.symmetric ? 1 : layout.ranks); ++k) slots.push_back(k);
    // Ranks that share their node's host (ZeRO-Offload): rank 0 alone would have host0's
    // CPU, memory and PCIe uplinks to itself. Node 0's ranks speak for every node's.
    if (layout.symmetric && layout.simulated.empty() && policy.shares_node_host())
      for (std::uint32_t k = 1; k < layout.ranks && platform.devices[compute[k]].node == platform.devices[compute[0]].node; ++k)
        slots.push_back(k);
  }
  const std::uint32_t node_speakers = layout.simulated.empty() && layout.symmetric ? static_cast<std::uint32_t>(slots.size()) : 1;
  // One step on every device of a multi-node platform: its nodes are copies of one description
  // and its replicas do not talk, so node 0's run and every other node holds what node 0 holds
  // (the step's time is node 0's). --devices runs each device it names.
  const std::uint32_t node0_replicas =
      slots.empty() && layout.ranks <= 1 && in.workloads.size() == 1 ? nodes_apart(platform, compute) : 0;
  if (node0_replicas)
    layout_notes.push_back(fmt::format(
        "nodes 1-{} of {} run the same replicas as node 0 and share no link or tier with it: node 0's {} "
        "device(s) are simulated and the other nodes' tiers hold what node 0's held (--devices simulates "
        "each device it names)",
        platform.nodes - 1, platform.name, node0_replicas));
  if (slots.empty())
    for (std::uint32_t k = 0; k < (node0_replicas ? node0_replicas : compute.size()); ++k) slots.push_back(k);
  std::vector<std::string> names;
  for (std::uint32_t s : slots) {
    if (s >= compute.size())
      throw InputError(fmt::format("platform {} has {} compute device(s): no device {}",
                                   platform.name, compute.size(), s));
    names.push_back(platform.devices[compute[s]].name);
  }
  const bool placed = !layout.simulated.empty();
  if (in.workloads.size() != 1 && in.workloads.size() != slots.size())
    throw InputError(fmt::format("platform {} runs {} device(s): give one workload (run on each) "
                                 "or {}, got {}",
                                 platform.name, slots.size(), slots.size(), in.workloads.size()));
  // One step on every device: a replica each (a single device takes it as it is).
  std::vector<Trace> replicas;
  if (in.workloads.size() == 1 && slots.size() > 1 && !placed) {
    // Refused before the copies are made.
    const double ops = static_cast<double>(in.workloads[0].ops.size()) * static_cast<double>(slots.size());
    if (over_op_limit(ops))
      throw InputError(fmt::format(
          "{}: {} copies of a step of {} ops, one per {} of platform {}, make {}{}", in.workloads[0].name,
          slots.size(), in.workloads[0].ops.size(),
          layout.ranks > 1 ? "simulated rank (parallel.symmetric false)" : "compute device", platform.name,
          ops_over_limit(ops), layout.ranks > 1 ? "" : "; --devices runs it on fewer"));
    replicas.assign(slots.size(), in.workloads[0]);
  }
  const std::vector<Trace>& traces = replicas.empty() ? in.workloads : replicas;
  const std::optional<Budget> budget = policy.budget();
  std::vector<std::uint64_t> baselines(compute.size(), 0);
  if (budget) {
    // A fraction is of each device's own step (one workload per device may differ).
    const std::uint64_t first = exec::baseline_peak_bytes(traces[0]);
    for (std::size_t k = 0; k < traces.size(); ++k)
      baselines[slots[k]] = k == 0 || in.workloads.size() == 1 ? first : exec::baseline_peak_bytes(traces[k]);
  }

  // `out` is a fresh RunResult (the caller's): filled here, never moved.
  // A step placed already, or one step on the first device alone, runs as it is: moved, not
  // copied (a million-op step is most of a run's memory).
  const std::vector<std::uint32_t>& placing = layout.ranks > 1 ? slots : in.slots;
  const bool as_it_is = placed || (traces.size() == 1 && replicas.empty() && (placing.empty() || placing[0] == 0));
  out.trace = as_it_is ? std::move(in.workloads[0]) : combine_per_device(traces, names, placing);
  // Several ranks simulated (every rank, or node 0's under a policy that offloads to the
  // node's host): each runs its collectives over its own instance of each group.
  if (layout.ranks > 1 && slots.size() > 1 && !placed && !layout.from_trace) place_rank_groups(out.trace);
  out.notes = layout_notes;
  if (layout.ranks <= 1 && in.workloads.size() == 1 && out.trace.parallel.from_trace) {
    // Not laid out as ranks: its groups are names only, as before.
    out.trace.groups.clear();
    out.trace.parallel = ParallelLayout{};
  }
  if (in.durations == RunInputs::Durations::measured)
    out.trace.measured_on = platform.name;
  else if (in.durations == RunInputs::Durations::model)
    out.trace.measured_on.clear();
  const std::vector<std::uint64_t> caps =
      planning_caps(platform, out.trace,
                    tier_caps(platform, budget ? &*budget : nullptr, baselines, reserved_per_tier(platform, out.trace)));

  std::string label;
  if (auto rewritten = policy.rewrite(out.trace, platform)) {
    out.trace = std::move(rewritten->trace);
    label = std::move(rewritten->label);
    out.notes.insert(out.notes.end(), rewritten->notes.begin(), rewritten->notes.end());
  }
  const Liveness liveness = compute_liveness(out.trace);
  const std::vector<double> durations = op_durations(out.trace, platform);
  const PlanningContext ctx{out.trace, liveness, platform, durations, caps};
  PlanResult planned = policy.plan(ctx);
  if (!label.empty()) planned.label = std::move(label);
  out.notes.insert(out.notes.end(), planned.notes.begin(), planned.notes.end());
  out.recorder.keep_allocations(in.keep_allocations);
  out.recorder.keep_samples(in.keep_samples);
  out.recorder.keep_samples_at_most(in.samples_kept);
  if (in.stream) {
    in.stream->start(out.trace, platform);
    out.recorder.stream_to(in.stream);
  }
  if (in.progress)
    out.recorder.report_progress([&in, total = out.trace.ops.size()](std::uint64_t done, double at_s) {
      in.progress(done, total, at_s);
    });
  out.summary = simulate(ctx, planned, out.recorder, in.exact);
  return_free_memory();  // the simulation's, before the peaks are explained and written
  out.recorder.report_progress({});
  out.recorder.flush_stream();
  out.recorder.stream_to(nullptr);
  // Which ops the measured durations timed, and which the cost model.
  const bool measured_here = !out.trace.measured_on.empty() && out.trace.measured_on == platform.name;
  for (const Op& op : out.trace.ops)
    ++(measured_here && op.measured_s ? out.summary.measured_ops : out.summary.modelled_ops);
  out.plan = std::move(planned.plan);
  // A tier that was not simulated holds what its speaker's held (a symmetric peer's, another
  // node's copy of node 0's); its peak report is copied when the peaks are explained.
  auto speaks_for = [&out](std::size_t t, std::size_t t0) {
    if (t >= out.summary.tiers.size() || t0 >= out.summary.tiers.size()) return;
    out.summary.tiers[t].usage = out.summary.tiers[t0].usage;
    out.summary.tiers[t].tile_peaks = out.summary.tiers[t0].tile_peaks;
    out.peak_copies.emplace_back(t, t0);
  };
  if (layout.ranks > 1) {
    out.summary.ranks = layout.ranks;
    out.summary.symmetric = layout.symmetric;
    if (layout.symmetric) out.summary.node_ranks_simulated = node_speakers;
    if (layout.stages > 1) {
      out.summary.pipeline_schedule = layout.schedule;
      out.summary.micro_batches = layout.micro_batches;
      const Mesh mesh = Mesh::of(layout);
      for (std::uint32_t r : layout.simulated) {
        if (mesh.first(r, Mesh::stage_dims()) != r) continue;  // a stage's first rank speaks for it
        PipelineStageSummary st{mesh.coord(r, "pp"), r, 0, 0, 0};
        if (r < out.summary.device_compute_s.size()) st.compute_s = out.summary.device_compute_s[r];
        if (r < out.summary.device_exposed_comm_s.size()) st.exposed_comm_s = out.summary.device_exposed_comm_s[r];
        if (out.summary.passes_end_s > 0)
          st.bubble_fraction = std::max(0.0, 1 - (st.compute_s + st.exposed_comm_s) / out.summary.passes_end_s);
        out.summary.pipeline.push_back(st);
      }
    }
    if (layout.symmetric) {
      // A simulated rank speaks for its peers (rank 0 for all of them, or a pipeline
      // stage's first rank for the stage's): their compute tiers held what its held.
      for (std::uint32_t r = 0; r < layout.ranks; ++r) {
        const std::uint32_t speaker = placed ? layout.speaker[r] : r % node_speakers;
        if (speaker == r) continue;
        speaks_for(*platform.devices[compute[r]].compute_tier, *platform.devices[compute[speaker]].compute_tier);
      }
      // Node 0's host speaks for every node's, whose ranks offload there alike.
      if (node_speakers > 1) {
        const std::uint32_t node0 = platform.devices[compute[0]].node;
        std::optional<std::size_t> host0;
        for (std::size_t d = 0; d < platform.devices.size() && !host0; ++d)
          if (!platform.devices[d].compute_tier && platform.devices[d].node == node0) host0 = d;
        for (std::size_t d = 0; host0 && d < platform.devices.size(); ++d) {
          const DeviceSpec& h = platform.devices[d];
          if (h.compute_tier || d == *host0 || h.tiers.size() != platform.devices[*host0].tiers.size()) continue;
          for (std::size_t i = 0; i < h.tiers.size(); ++i) {
            const std::size_t t = h.tiers[i], t0 = platform.devices[*host0].tiers[i];
            if (t >= out.summary.tiers.size() || t0 >= out.summary.tiers.size()) continue;
            out.summary.tiers[t].usage = out.summary.tiers[t0].usage;
            out.peak_copies.emplace_back(t, t0);
          }
        }
      }
    }
  }
  if (node0_replicas) {
    const std::vector<std::size_t> twin = node0_counterparts(platform);
    for (std::size_t d = 0; d < platform.devices.size(); ++d) {
      const DeviceSpec& dev = platform.devices[d];
      const DeviceSpec& dev0 = platform.devices[twin[d]];
      if (twin[d] == d || dev.tiers.size() != dev0.tiers.size()) continue;
      for (std::size_t i = 0; i < dev.tiers.size(); ++i) speaks_for(dev.tiers[i], dev0.tiers[i]);
    }
  }
  {
    // Who each simulated accelerator speaks for: its symmetric peers, or its twin on every
    // other node; the samples of every data-parallel replica, or of every device's own step.
    std::vector<std::uint32_t> peers(compute.size(), 0);
    std::uint32_t gpus = 0;
    std::uint64_t samples = 0;
    if (layout.ranks > 1) {
      gpus = layout.ranks;
      for (std::uint32_t r = 0; r < layout.ranks; ++r)
        ++peers[!layout.symmetric ? r : placed ? layout.speaker[r] : r % node_speakers];
      const std::uint64_t model_ranks = std::uint64_t{layout.tp} * layout.cp * layout.stages;
      if (!layout.from_trace && workload_samples.size() == 1 && layout.ranks % model_ranks == 0)
        samples = workload_samples[0] * (layout.ranks / model_ranks);
    } else {
      const std::uint32_t copies = node0_replicas ? platform.nodes : 1;
      gpus = static_cast<std::uint32_t>(slots.size()) * copies;
      bool known = same_tokens;
      for (std::size_t k = 0; k < slots.size(); ++k) {
        peers[slots[k]] = copies;
        const std::uint64_t n = workload_samples.size() == 1 ? workload_samples[0] : workload_samples[k];
        known &= n > 0;
        samples += n * copies;
      }
      if (!known) samples = 0;
    }
    out.summary.throughput =
        throughput_of(out.summary, out.trace, platform, peers, gpus, samples, samples ? sample_tokens : 0);
  }
  check_summary(out.summary);  // before anyone writes it
  if (in.explain_peaks) explain_peaks(out, platform);
}

Summary simulate(const PlatformSpec& platform, const Trace& trace, const Policy& policy,
                 Recorder& recorder, bool exact) {
  const Liveness liveness = compute_liveness(trace);
  const std::vector<double> durations = op_durations(trace, platform);
  const std::vector<std::uint64_t> caps = planning_caps(platform, trace, tier_caps(platform, nullptr, {}));
  const PlanningContext ctx{trace, liveness, platform, durations, caps};
  const PlanResult planned = policy.plan(ctx);
  return simulate(ctx, planned, recorder, exact);
}

PlanResult plan_for(const Policy& policy, const Trace& trace, const PlatformSpec& platform) {
  const Liveness liveness = compute_liveness(trace);
  const std::vector<double> durations = op_durations(trace, platform);
  const std::vector<std::uint64_t> caps = planning_caps(platform, trace, tier_caps(platform, nullptr, {}));
  PlanResult planned = policy.plan(PlanningContext{trace, liveness, platform, durations, caps});
  planned.hooks.reset();
  return planned;
}

}  // namespace memsim
