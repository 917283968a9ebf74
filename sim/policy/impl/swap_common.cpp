#include "sim/policy/impl/swap_common.h"

#include <algorithm>
#include <map>
#include <optional>

#include "sim/exec/replay.h"

namespace memsim {

std::vector<SwapTiers> swap_tiers(const PlatformSpec& platform, const Trace& trace) {
  // The slots the step uses, not every device of the platform: a rank of a data-parallel
  // step on 8,000 GPUs searched 8,000 GPUs' routes to their hosts.
  std::size_t used = 0;
  for (const Op& op : trace.ops) used = std::max<std::size_t>(used, op.device + 1);
  for (const Buffer& b : trace.buffers) used = std::max<std::size_t>(used, b.device + 1);
  std::vector<std::size_t> computes;
  for (std::size_t d : platform.op_devices()) {
    if (computes.size() == used) break;
    computes.push_back(*platform.devices[d].operand_tier());
  }
  std::vector<std::optional<OffloadRoute>> offloads = nearest_offloads(platform, computes);
  std::vector<SwapTiers> out;
  for (std::size_t k = 0; k < computes.size(); ++k) {
    SwapTiers s;
    s.compute = static_cast<std::uint32_t>(computes[k]);
    if (offloads[k]) {
      s.offload = static_cast<std::uint32_t>(offloads[k]->tier);
      s.out = std::move(offloads[k]->out);
      s.in = std::move(offloads[k]->in);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<BufferUses> buffer_uses(const Trace& trace) {
  std::vector<BufferUses> uses(trace.buffers.size());
  for (const Op& op : trace.ops)
    for (BufferId b : op.reads()) {
      if (op.phase == Phase::forward)
        uses[b].last_forward = op.id;
      else if (uses[b].first_later == kNoOp)
        uses[b].first_later = op.id;
    }
  return uses;
}

std::vector<std::uint32_t> buffer_devices(const Trace& trace) {
  std::vector<std::uint32_t> device(trace.buffers.size(), UINT32_MAX);
  for (const Op& op : trace.ops)
    for (const auto* list : {&op.outputs, &op.inputs, &op.updates})
      for (BufferId b : *list)
        if (device[b] == UINT32_MAX) device[b] = op.device;
  for (const Buffer& b : trace.buffers)
    if (device[b.id] == UINT32_MAX) device[b.id] = b.device;
  return device;
}

std::vector<InitialPlacement> overflow_placements(const Trace& trace, const PlatformSpec&,
                                                  const std::vector<SwapTiers>& tiers,
                                                  const std::vector<std::uint64_t>& tier_caps) {
  const auto device = buffer_devices(trace);
  std::vector<OpId> first_use(trace.buffers.size(), kNoOp);
  for (const Op& op : trace.ops)
    for (BufferId b : op.reads())
      if (first_use[b] == kNoOp) first_use[b] = op.id;
  std::vector<std::vector<BufferId>> resident(tiers.size());
  std::vector<std::uint64_t> bytes(tiers.size(), 0);
  for (const Buffer& b : trace.buffers)
    if (b.producer == kNoOp && device[b.id] < tiers.size()) {
      resident[device[b.id]].push_back(b.id);
      bytes[device[b.id]] += b.bytes;
    }
  std::vector<InitialPlacement> out;
  for (std::size_t d = 0; d < tiers.size(); ++d) {
    const std::uint64_t cap = tier_caps[tiers[d].compute];
    if (bytes[d] <= cap || !tiers[d].offload) continue;
    // Latest first use first (never used: kNoOp, the largest id, goes first), then the larger.
    auto& list = resident[d];
    std::sort(list.begin(), list.end(), [&](BufferId x, BufferId y) {
      if (first_use[x] != first_use[y]) return first_use[x] > first_use[y];
      if (trace.buffers[x].bytes != trace.buffers[y].bytes)
        return trace.buffers[x].bytes > trace.buffers[y].bytes;
      return x < y;
    });
    for (BufferId b : list) {
      if (bytes[d] <= cap) break;
      out.push_back({b, *tiers[d].offload});
      bytes[d] -= trace.buffers[b].bytes;
    }
  }
  std::sort(out.begin(), out.end(), [](const InitialPlacement& x, const InitialPlacement& y) {
    return x.buffer < y.buffer;
  });
  return out;
}

std::vector<std::vector<OpId>> buffer_accesses(const Trace& trace) {
  std::vector<std::vector<OpId>> out(trace.buffers.size());
  for (const Op& op : trace.ops)
    for (const auto* list : {&op.inputs, &op.outputs, &op.updates})
      for (BufferId b : *list)
        if (out[b].empty() || out[b].back() != op.id) out[b].push_back(op.id);
  return out;
}

void evict_furthest_next_use(const RuntimeView& view, const AllocationFailure& failure,
                             const std::vector<SwapTiers>& tiers,
                             const std::vector<std::vector<OpId>>& accesses,
                             std::vector<Action>& actions) {
  const SwapTiers* st = nullptr;
  for (const auto& t : tiers)
    if (t.compute == failure.tier) st = &t;
  if (!st || !st->offload) return;
  const MemoryState& m = view.memory();
  const Trace& trace = view.trace();
  // The next access after the failing op; a buffer the op itself touches is not a candidate.
  auto next_use = [&](BufferId b) -> std::optional<OpId> {
    const auto& uses = accesses[b];
    auto it = std::lower_bound(uses.begin(), uses.end(), failure.op);
    if (it != uses.end() && *it == failure.op) return std::nullopt;
    return it == uses.end() ? kNoOp : *it;
  };
  // The plan's own swap-outs come first: while one is leaving the tier, answer nothing, so
  // the engine waits for it to land and tries again.
  std::vector<std::pair<OpId, BufferId>> candidates;  // (next use, buffer)
  for (BufferId b = 0; b < trace.buffers.size(); ++b) {
    if (!m.resident(b, failure.tier)) continue;
    if (view.in_flight(b)) return;
    if (view.in_use(b)) continue;  // another stream's op waits for it
    if (auto next = next_use(b)) candidates.emplace_back(*next, b);
  }
  std::sort(candidates.begin(), candidates.end(), [&](const auto& x, const auto& y) {
    if (x.first != y.first) return x.first > y.first;  // kNoOp (never again) is the largest
    return x.second < y.second;
  });
  std::vector<BufferId> order;
  order.reserve(candidates.size());
  for (const auto& [next, b] : candidates) order.push_back(b);
  swap_out_in_order(m, failure, *st->offload, order, actions);
}

void swap_out_in_order(const MemoryState& memory, const AllocationFailure& failure, std::uint32_t offload,
                       const std::vector<BufferId>& order, std::vector<Action>& actions) {
  const std::uint64_t free_now = memory.largest_free_block(failure.tier);
  std::uint64_t freed = 0;
  const std::size_t first = actions.size();
  for (BufferId b : order) {
    if (free_now + freed >= failure.bytes) break;
    actions.push_back({StepKind::swap_out, b, offload});
    freed += memory.placement(b).allocation.bytes;
  }
  if (free_now + freed < failure.bytes) actions.resize(first);
}

std::vector<std::uint64_t> plan_peaks(const Trace& trace, const Plan& plan, std::size_t devices) {
  std::vector<std::uint64_t> peaks = exec::replay(trace, plan).peak_bytes;
  peaks.resize(devices, 0);
  return peaks;
}

std::vector<std::uint64_t> bytes_at_ops(const Trace& trace, const Plan& plan, std::size_t devices) {
  (void)devices;
  std::vector<std::uint64_t> bytes(trace.ops.size(), 0);
  exec::replay(trace, plan, {}, [&](const Op& op, const std::vector<std::uint64_t>& live) {
    bytes[op.id] = std::max(bytes[op.id], live[op.device] + op.workspace_bytes);
  });
  return bytes;
}

std::vector<double> expected_start_times(const Trace& trace, const std::vector<double>& durations) {
  std::map<std::pair<std::uint32_t, std::uint32_t>, double> clock;
  std::vector<double> start(trace.ops.size(), 0);
  for (const Op& op : trace.ops) {
    double& c = clock[{op.device, op.stream}];
    start[op.id] = c;
    c += durations[op.id];
  }
  return start;
}

}  // namespace memsim
