// ZeRO-Offload (Ren et al. 2021) and its NVMe extension ZeRO-Infinity (Rajbhandari et al.
// 2021), for one data-parallel rank per accelerator.
//
// zero-offload: the optimizer step moves to the host CPU (rewrite): it runs on the host at
// the host's compute rate from the platform, on operands in host DRAM. The fp32 master
// weights and the optimizer state are used only by the step, so they live in host DRAM from
// the start. Each gradient is copied to the host as soon as the accelerator is done with it,
// and each step writes a fresh fp16 copy of its weights (`<weight>.updated`), copied back
// to the accelerator; the accelerator's old copy is freed after its last use in backward.
// The accelerator then holds 2 bytes per parameter of model state (fp16 weights) plus the
// gradients still waiting for the link, instead of 16 (mixed-precision Adam).
// Without master weights (fp32 training) the weights themselves make the round trip.
//
// zero-infinity: the same, with the master weights and optimizer state on an NVMe tier of
// the host: each step's state is read into host DRAM `prefetch` steps ahead and written back
// after it. With `offload_params` the fp16 weights start on NVMe too: each run of uses on
// the accelerator reads them ahead, and they are evicted after it (NVMe still holds them, so
// nothing is written back); the steps' new weights go to NVMe.
#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

/// "configs/devices/x.yaml: " for messages about what a platform lacks.
std::string where(const PlatformSpec& platform) {
  return platform.source.empty() ? std::string() : platform.source + ": ";
}

/// A device or tier the user named, and where messages about it start ("--set
/// policy.host=host1: host: ", "p.yaml:3:9: host: ").
struct Given {
  std::string name;  // empty: auto
  std::string at;
};

/// The index (into op_devices) of the host that runs the steps: the one named, else the
/// first device that runs ops without a compute tier.
std::uint32_t host_slot(const PlatformSpec& platform, const Given& host, const std::string& policy) {
  const std::string& name = host.name;
  const auto devices = platform.op_devices();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceSpec& d = platform.devices[devices[i]];
    if (!d.compute_tier && (name.empty() || d.name == name)) return static_cast<std::uint32_t>(i);
  }
  if (!name.empty() && platform.find_device(name))
    throw InputError(host.at + fmt::format("{}: device '{}' of platform '{}' cannot run the optimizer step "
                                 "(it needs kind cpu, a compute rate and no compute tier)",
                                 policy, name, platform.name));
  if (!name.empty())
    throw InputError(host.at + fmt::format("{}: platform '{}' has no device '{}'", policy, platform.name, name));
  throw InputError(where(platform) + fmt::format("{}: platform '{}' has no host CPU with a compute rate to run the "
                               "optimizer step on (give a cpu device `compute: {{fp32: ...}}`)",
                               policy, platform.name));
}

/// On a multi-node platform, node `node`'s copy of `device`: the device at the same place
/// among its node's devices (every node is the same description, laid out in order).
std::size_t on_node(const PlatformSpec& platform, std::size_t device, std::uint32_t node) {
  const std::uint32_t home = platform.devices[device].node;
  if (node == home) return device;
  std::size_t place = 0;
  for (std::size_t i = 0; i < device; ++i) place += platform.devices[i].node == home;
  for (std::size_t i = 0; i < platform.devices.size(); ++i)
    if (platform.devices[i].node == node && place-- == 0) return i;
  return device;
}

/// A host or tier named on a multi-node platform must be node 0's, as the node description
/// names it: each node's ranks then use their own node's copy. Another node's is refused:
/// its ranks would reach across the fabric for another node's CPU or memory, which no
/// framework does. `device` holds what `given` names; `instead` is node 0's name for it.
void require_node_zero(const PlatformSpec& platform, std::size_t device, const Given& given,
                       const std::string& what, const std::string& instead, const std::string& policy) {
  const std::uint32_t node = platform.devices[device].node;
  if (node == 0) return;
  throw InputError(given.at + fmt::format(
      "{}: '{}' is node {}'s {}; on platform '{}' of {} nodes each node's ranks use their own node's: name it "
      "as node 0 has it ('{}', and each node uses its copy) or leave it auto",
      policy, given.name, node, what, platform.name, platform.nodes, instead));
}

/// Per op device (index into op_devices): the host that runs its optimizer steps. Auto: each
/// device's own node's host (on a cluster every node has its own CPUs and memory), else the
/// first host. A host named is node 0's, as the node description names it: on one node it
/// runs every device's steps, on several each node's copy of it runs that node's. A host
/// maps to itself.
std::vector<std::uint32_t> hosts_of(const PlatformSpec& platform, const Given& host,
                                    const std::string& policy) {
  const std::uint32_t first = host_slot(platform, host, policy);
  const auto devices = platform.op_devices();
  if (!host.name.empty())
    require_node_zero(platform, devices[first], host, "host",
                      platform.devices[on_node(platform, devices[first], 0)].name, policy);
  std::vector<std::uint32_t> out(devices.size(), first);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceSpec& d = platform.devices[devices[i]];
    if (!d.compute_tier) {
      out[i] = static_cast<std::uint32_t>(i);
      continue;
    }
    // The named host's copy on this device's node, else (auto) the node's first host.
    const std::size_t named = host.name.empty() ? 0 : on_node(platform, devices[first], d.node);
    for (std::size_t h = 0; h < devices.size(); ++h) {
      const DeviceSpec& c = platform.devices[devices[h]];
      if (!c.compute_tier && c.node == d.node && (host.name.empty() || devices[h] == named)) {
        out[i] = static_cast<std::uint32_t>(h);
        break;
      }
    }
  }
  return out;
}

// Which optimizer ops run on the host. The host's stream runs beside the accelerators' with no
// order between them but the data's: an op waits for what it reads to be made and for the
// in-place updates issued before it. A step moved there must therefore (1) be the last to
// touch what it touches (no accelerator op issued after it uses it) and (2) be sure to start
// after the accelerator ops issued before it that use it: through what it waits for, or an
// earlier step on the host. Otherwise the two sides would need one buffer in their own memory
// at once and their copies would chase each other forever: imported traces put such ops in
// the optimizer (Adam's empty_like(param) for its state, with no data dependency on the
// backward; a whole step issued ahead of the backward). Those stay on their accelerator.
std::vector<std::uint8_t> host_steps(const Trace& t) {
  const std::size_t n = t.ops.size();
  std::vector<std::uint8_t> host(n, 0);
  std::uint32_t devices = 1;
  for (const Op& op : t.ops) {
    host[op.id] = op.phase == Phase::optimizer;
    devices = std::max(devices, op.device + 1);
  }
  auto touches = [](const Op& op, auto&& f) {
    for (const auto* list : {&op.inputs, &op.outputs, &op.updates})
      for (BufferId b : *list) f(b);
  };
  for (bool changed = true; changed;) {
    changed = false;
    // (1) Nothing on an accelerator uses it later.
    std::vector<std::uint8_t> used_later(t.buffers.size(), 0);
    for (std::size_t i = n; i-- > 0;) {
      const Op& op = t.ops[i];
      bool later = false;
      if (host[i]) touches(op, [&](BufferId b) { later |= used_later[b] != 0; });
      if (later) {
        host[i] = 0;
        changed = true;
      }
      if (!host[i]) touches(op, [&](BufferId b) { used_later[b] = 1; });
    }
    // (2) It starts after the accelerators' earlier uses: `guard` is, per accelerator, the
    // last of its ops the host's next step is sure to follow.
    std::vector<OpId> last_use(t.buffers.size(), kNoOp), last_update(t.buffers.size(), kNoOp);
    std::vector<std::int64_t> guard(devices, -1);
    for (std::size_t i = 0; i < n; ++i) {
      const Op& op = t.ops[i];
      if (host[i]) {
        std::vector<std::int64_t> after = guard;
        auto follow = [&](OpId o) {
          if (o != kNoOp && !host[o]) after[t.ops[o].device] = std::max<std::int64_t>(after[t.ops[o].device], o);
        };
        for (const auto* list : {&op.inputs, &op.updates})
          for (BufferId b : *list) {
            follow(t.buffers[b].producer);
            follow(last_update[b]);
          }
        bool safe = true;
        touches(op, [&](BufferId b) {
          const OpId u = last_use[b];
          if (u != kNoOp && static_cast<std::int64_t>(u) > after[t.ops[u].device]) safe = false;
        });
        if (safe) {
          guard = std::move(after);
        } else {
          host[i] = 0;
          changed = true;
        }
      }
      if (!host[i]) {
        touches(op, [&](BufferId b) { last_use[b] = static_cast<OpId>(i); });
        for (BufferId b : op.updates) last_update[b] = static_cast<OpId>(i);
      }
    }
  }
  return host;
}

class ZeroPolicy final : public Policy {
 public:
  ZeroPolicy(bool nvme, Given host, Given nvme_tier, int prefetch, bool params)
      : nvme_(nvme),
        host_(std::move(host)),
        nvme_tier_(std::move(nvme_tier)),
        prefetch_(prefetch),
        params_(params) {}

  std::optional<Rewritten> rewrite(const Trace& trace, const PlatformSpec& platform) const override {
    const std::vector<std::uint32_t> host_of = hosts_of(platform, host_, name());
    // ZeRO-1 and 2 all-gather the updated weights after the steps, on the accelerators: a
    // step moved to the host would write a fresh copy of its weight while the gather still
    // updates the old one, which then dies before the next forward reads it.
    for (const Op& op : trace.ops)
      if (op.phase == Phase::optimizer && !op.group.empty())
        throw InputError(fmt::format("{}: {} with the weights all-gathered after the optimizer step ('{}', "
                                     "parallel.zero 1 or 2) is not modelled; use parallel.zero 0 or 3",
                                     trace.name, name(), op.name));
    Trace t = trace;
    const std::vector<std::uint8_t> to_host = host_steps(t);
    // The accelerators' copies: buffers that ops staying there touch.
    std::vector<std::uint8_t> device_use(t.buffers.size(), 0);
    for (const Op& op : t.ops)
      if (!to_host[op.id])
        for (const auto* list : {&op.inputs, &op.outputs, &op.updates})
          for (BufferId b : *list) device_use[b] = 1;
    for (Op& op : t.ops) {
      if (!to_host[op.id]) continue;
      op.device = host_of.at(op.device);
      op.stream = 0;
      bool has_master = false;
      for (BufferId b : op.updates)
        has_master |= !device_use[b] && t.buffers[b].category == Category::weight;
      if (!has_master) continue;  // fp32 training: the weights make the round trip
      std::vector<BufferId> kept;
      for (BufferId b : op.updates) {
        if (!device_use[b] || t.buffers[b].category != Category::weight) {
          kept.push_back(b);
          continue;
        }
        // The step casts the master into a new half copy; the old one dies after backward.
        t.buffers[b].persistent = false;
        const Buffer old = t.buffers[b];
        const BufferId fresh = t.add_buffer(old.name + ".updated", old.bytes, Category::weight, true);
        t.buffers[fresh].producer = op.id;
        t.buffers[fresh].device = old.device;
        op.outputs.push_back(fresh);
      }
      op.updates = std::move(kept);
    }
    validate(t, trace.name + " (" + label() + ")");
    return Rewritten{std::move(t), {}, {}};
  }

  // Each node's ranks share their node's host (CPUs, DRAM, NVMe).
  bool shares_node_host() const override { return true; }

  PlanResult plan(const PlanningContext& ctx) const override {
    return {plan_steps(ctx.trace, ctx.liveness, ctx.platform), label(), {}, {},
            std::make_shared<Hooks>(*this)};
  }

 private:
  Plan plan_steps(const Trace& trace, const Liveness& liveness, const PlatformSpec& platform) const {
    const std::vector<std::uint32_t> host_of = hosts_of(platform, host_, name());
    const auto devices = platform.op_devices();
    auto tier_of = [&](std::uint32_t slot) {
      return static_cast<std::uint32_t>(*platform.devices[devices[slot]].operand_tier());
    };
    auto is_host = [&](std::uint32_t slot) { return !platform.devices[devices[slot]].compute_tier; };
    // Per op device: the DRAM of the host its steps run on, and that host's NVMe.
    std::vector<std::uint32_t> host_tier(devices.size()), nvme(devices.size(), 0);
    for (std::uint32_t d = 0; d < devices.size(); ++d) {
      host_tier[d] = tier_of(host_of[d]);
      if (nvme_) nvme[d] = nvme_tier(platform, host_of[d]);
    }

    // Per buffer: the last op on an accelerator that touches it, its accelerator (the first
    // one to touch it, else its own device), and whether the host reads or updates it.
    const std::size_t n = trace.buffers.size();
    std::vector<OpId> last_device_use(n, kNoOp);
    std::vector<std::uint32_t> accelerator(n, UINT32_MAX);
    std::vector<std::uint8_t> host_reads(n, 0), device_use(n, 0);
    for (const Op& op : trace.ops)
      for (const auto* list : {&op.inputs, &op.outputs, &op.updates})
        for (BufferId b : *list) {
          if (is_host(op.device)) {
            if (list != &op.outputs) host_reads[b] = 1;
            continue;
          }
          last_device_use[b] = op.id;
          device_use[b] = 1;
          if (accelerator[b] == UINT32_MAX) accelerator[b] = op.device;
        }
    for (const Buffer& b : trace.buffers)
      if (accelerator[b.id] == UINT32_MAX) accelerator[b.id] = b.device;

    std::vector<std::vector<BufferId>> out_after(trace.ops.size());
    for (BufferId b = 0; b < n; ++b)
      if (host_reads[b] && last_device_use[b] != kNoOp) out_after[last_device_use[b]].push_back(b);

    Plan plan;
    // ZeRO-Infinity: the step's state (what only the host touches and was there at the
    // start) starts on NVMe; the state of host step j is read in as step j - prefetch starts
    // (the first ones at the start of the iteration) and written back after step j.
    std::vector<OpId> host_ops;
    for (const Op& op : trace.ops)
      if (is_host(op.device)) host_ops.push_back(op.id);
    std::vector<std::vector<BufferId>> state(trace.ops.size());
    std::vector<std::vector<BufferId>> fetch_before(trace.ops.size());
    std::vector<std::vector<Step>> fetch_before_device(trace.ops.size());
    if (nvme_) {
      std::vector<std::uint8_t> placed(n, 0);
      for (std::size_t j = 0; j < host_ops.size(); ++j) {
        const Op& op = trace.ops[host_ops[j]];
        for (BufferId b : op.reads()) {
          if (device_use[b] || trace.buffers[b].producer != kNoOp || placed[b]) continue;
          placed[b] = 1;
          plan.placements.push_back({b, nvme[op.device]});
          state[op.id].push_back(b);
        }
        if (j >= static_cast<std::size_t>(prefetch_))
          for (BufferId b : state[op.id]) fetch_before[host_ops[j - prefetch_]].push_back(b);
        else
          for (BufferId b : state[op.id]) plan.steps.push_back({StepKind::swap_in, b, host_tier[op.device]});
      }
    }

    std::vector<std::vector<Step>> after(trace.ops.size());
    if (nvme_ && params_)  // the steps' new weights then go to NVMe, below
      plan_parameter_reads(trace, is_host, nvme, tier_of, plan, fetch_before_device, after);
    // A state buffer is read into the DRAM of the host whose step reads it.
    std::vector<std::uint32_t> state_host(n, 0);
    for (OpId o : host_ops)
      for (BufferId b : state[o]) state_host[b] = trace.ops[o].device;

    for (const Op& op : trace.ops) {
      for (const Step& s : fetch_before_device[op.id]) plan.steps.push_back(s);
      for (BufferId b : fetch_before[op.id]) plan.steps.push_back({StepKind::swap_in, b, host_tier[state_host[b]]});
      plan.steps.push_back({StepKind::compute, op.id, 0});
      if (is_host(op.device)) {
        // The new weights go back to their accelerator (for the next iteration's forward).
        for (const auto* list : {&op.outputs, &op.updates})
          for (BufferId b : *list)
            if (list == &op.outputs && trace.buffers[b].category == Category::weight && nvme_ && params_)
              plan.steps.push_back({StepKind::swap_out, b, nvme[op.device]});
            else if ((list == &op.outputs && trace.buffers[b].category == Category::weight) ||
                     (list == &op.updates && device_use[b]))
              plan.steps.push_back({StepKind::swap_in, b, tier_of(accelerator[b])});
        for (BufferId b : state[op.id]) plan.steps.push_back({StepKind::swap_out, b, nvme[op.device]});
      } else {
        // Gradients go to the DRAM of the host of their accelerator's node.
        for (BufferId b : out_after[op.id]) plan.steps.push_back({StepKind::swap_out, b, host_tier[op.device]});
        for (const Step& s : after[op.id]) plan.steps.push_back(s);
      }
      for (BufferId b : liveness.dies_after[op.id]) plan.steps.push_back({StepKind::free, b, 0});
    }
    return plan;
  }

  // Where the last allocation failed, for the OOM report.
  class Hooks final : public RuntimeHooks {
   public:
    explicit Hooks(const ZeroPolicy& policy) : policy_(policy) {}
    void on_alloc_failure(const RuntimeView& view, const AllocationFailure& failure,
                          std::vector<Action>&) override {
      failed_ = view.platform().tiers[failure.tier].role == TierRole::compute ? Failed::accelerator
                                                                             : Failed::host;
    }
    std::string oom_reason() const override {
      const std::string name = policy_.name();
      if (failed_ == Failed::none)  // the resident buffers at the start did not fit
        return fmt::format("{} keeps the half weights on the accelerator and the master weights "
                           "and optimizer state in {}; they do not fit",
                           name, policy_.nvme_ ? "NVMe" : "host memory");
      if (failed_ == Failed::accelerator)
        return fmt::format("{} keeps only the half weights, activations and gradients not yet "
                           "copied out on the accelerator; they do not fit",
                           name);
      return fmt::format("{} stages the master weights, optimizer state{}, gradients and new "
                         "half weights in host memory; they do not fit",
                         name, policy_.nvme_ ? fmt::format(" (of {} step(s) ahead)", policy_.prefetch_) : "");
    }

   private:
    enum class Failed { none, accelerator, host };
    const ZeroPolicy& policy_;
    Failed failed_ = Failed::none;
  };

  std::string label() const {
    if (!nvme_) return "zero-offload";
    return fmt::format("zero-infinity(prefetch {}{})", prefetch_, params_ ? ", params on NVMe" : "");
  }
  std::string name() const { return nvme_ ? "zero-infinity" : "zero-offload"; }

  // ZeRO-Infinity's parameter offload: the fp16 weights the steps replace (the old copies,
  // which die after backward) start on NVMe. Each run of uses on the accelerator reads the
  // weight `prefetch` of that device's ops ahead; after a run it is evicted (NVMe still
  // holds it: no copy back). Reads go to `fetch_before_device` (or the start of the plan),
  // evictions to `after`, per accelerator op.
  void plan_parameter_reads(const Trace& trace, const std::function<bool(std::uint32_t)>& is_host,
                            const std::vector<std::uint32_t>& nvme,
                            const std::function<std::uint32_t(std::uint32_t)>& tier_of,
                            Plan& plan, std::vector<std::vector<Step>>& fetch_before_device,
                            std::vector<std::vector<Step>>& after) const {
    const std::size_t n = trace.buffers.size();
    std::uint32_t devices = 0;
    for (const Op& op : trace.ops) devices = std::max(devices, op.device + 1);
    std::vector<std::vector<OpId>> sequence(devices);
    std::vector<std::size_t> position(trace.ops.size(), 0);
    std::vector<std::vector<OpId>> uses(n);
    for (const Op& op : trace.ops) {
      if (is_host(op.device)) continue;
      position[op.id] = sequence[op.device].size();
      sequence[op.device].push_back(op.id);
      for (BufferId b : op.reads())
        if (uses[b].empty() || uses[b].back() != op.id) uses[b].push_back(op.id);
    }
    std::vector<Step> at_start;
    for (const Buffer& b : trace.buffers) {
      if (b.producer != kNoOp || b.persistent || b.category != Category::weight ||
          uses[b.id].empty())
        continue;
      const std::uint32_t d = trace.ops[uses[b.id].front()].device;
      plan.placements.push_back({b.id, nvme[d]});
      const auto& ops = sequence[d];
      std::size_t previous = SIZE_MAX;
      for (OpId u : uses[b.id]) {
        const std::size_t p = position[u];
        if (previous != SIZE_MAX && p - previous <= 1) {
          previous = p;  // the next op reads it too: keep it
          continue;
        }
        if (previous != SIZE_MAX) after[ops[previous]].push_back({StepKind::evict, b.id, nvme[d]});
        const std::size_t earliest = previous == SIZE_MAX ? 0 : previous + 1;
        const std::size_t ahead = p >= static_cast<std::size_t>(prefetch_) ? p - prefetch_ : 0;
        const std::size_t at = std::max(earliest, ahead);
        // Steps before a device's first op would run on the stream before it: issue those
        // at the start of the iteration instead.
        const Step read{StepKind::swap_in, b.id, tier_of(d)};
        if (at == 0)
          at_start.push_back(read);
        else
          fetch_before_device[ops[at]].push_back(read);
        previous = p;
      }
    }
    plan.steps.insert(plan.steps.begin(), at_start.begin(), at_start.end());
  }

  /// The NVMe tier: the one named (on several nodes, the host's node's copy of it), else the
  /// host's first tier after its DRAM that is an offload tier.
  std::uint32_t nvme_tier(const PlatformSpec& platform, std::uint32_t host) const {
    const DeviceSpec& d = platform.devices[platform.op_devices()[host]];
    if (!nvme_tier_.name.empty()) {
      auto t = platform.find_tier(nvme_tier_.name);
      if (!t || platform.tiers[*t].role != TierRole::offload)
        throw InputError(nvme_tier_.at + fmt::format("zero-infinity: platform '{}' has no offload tier '{}'",
                                     platform.name, nvme_tier_.name));
      // The device that holds it, and where among that device's tiers.
      for (std::size_t o = 0; o < platform.devices.size(); ++o) {
        const auto& tiers = platform.devices[o].tiers;
        const auto k = std::find(tiers.begin(), tiers.end(), *t);
        if (k == tiers.end()) continue;
        const std::size_t home = on_node(platform, o, 0);
        require_node_zero(platform, o, nvme_tier_, "tier",
                          platform.tiers[platform.devices[home].tiers[k - tiers.begin()]].name, "zero-infinity");
        const DeviceSpec& copy = platform.devices[on_node(platform, o, d.node)];
        return static_cast<std::uint32_t>(copy.tiers[k - tiers.begin()]);
      }
      return static_cast<std::uint32_t>(*t);
    }
    for (std::size_t t : d.tiers)
      if (t != *d.operand_tier() && platform.tiers[t].role == TierRole::offload)
        return static_cast<std::uint32_t>(t);
    throw InputError(where(platform) + fmt::format("zero-infinity: host '{}' of platform '{}' has no NVMe tier "
                                 "(a second offload tier, e.g. `nvme: {{role: offload, ...}}`)",
                                 d.name, platform.name));
  }

  bool nvme_;
  Given host_;
  Given nvme_tier_;
  int prefetch_;
  bool params_;  // zero-infinity: the fp16 weights on NVMe too
};

ParamSpec host_param() {
  return {"host", "the CPU device that runs the optimizer step; auto: each node's first device with a "
                  "compute rate and no compute tier; on several nodes a host named as node 0 has it "
                  "(host0) stands for each node's copy", "auto"};
}

// "auto" (the default) is empty: chosen from the platform.
Given named(const Params& p, const std::string& key) {
  const ConfigNode value = p.get(key);
  std::string v = value.as_string();
  if (v == "auto") return {};
  return {std::move(v), fmt::format("{}: {}: ", value.where(), value.key_path())};
}

}  // namespace

PolicyInfo zero_offload_policy() {
  return {"zero-offload",
          "ZeRO-Offload (Ren et al. 2021): gradients streamed to host memory, master weights and "
          "optimizer state in host DRAM, the optimizer step on the host CPU, fp16 weights copied back",
          {host_param()},
          [](const Params& p) {
            return std::make_unique<ZeroPolicy>(false, named(p, "host"), Given{}, 0, false);
          }};
}

PolicyInfo zero_infinity_policy() {
  return {"zero-infinity",
          "ZeRO-Infinity (Rajbhandari et al. 2021): zero-offload with master weights and "
          "optimizer state on the host's NVMe, read into DRAM ahead of each step and written back",
          {host_param(),
           {"nvme", "the offload tier holding the optimizer state; auto: the host's second "
                    "offload tier (host.nvme); on several nodes a tier named as node 0 has it "
                    "(host0.nvme) stands for each node's copy", "auto"},
           {"prefetch", "steps ahead that state is read from NVMe: optimizer steps for the "
                        "optimizer state, the accelerator's ops for offloaded weights (>= 1)", "1"},
           {"offload_params", "true: the fp16 weights live on NVMe too, read before each run of "
                              "uses and evicted after it (no write back)", "false"}},
          [](const Params& p) {
            return std::make_unique<ZeroPolicy>(true, named(p, "host"), named(p, "nvme"),
                                                static_cast<int>(p.get("prefetch").as_int_in(1, 1 << 20)),
                                                p.get("offload_params").as_bool());
          }};
}

}  // namespace memsim
