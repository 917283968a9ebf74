#pragma once
// The machine a step runs on, as plain data: devices (each with compute rates, streams and
// copy engines), the memory tiers they own, and the links between tiers. Loaded from YAML
// (configs/devices/*.yaml); every value carries a unit and is checked on load.
//
//   name: a100-40gb
//   devices:
//     gpu0:
//       kind: gpu
//       compute: {fp32: 19.5TFLOPS, tf32: 156TFLOPS, fp16: 312TFLOPS, bf16: 312TFLOPS}
//       launch_overhead: 5us
//       efficiency: {default: 0.7, matmul: 0.8}   # fraction of peak FLOP/s per op kind
//       memory_efficiency: {default: 0.6}         # fraction of bandwidth (optional)
//       tiers:
//         hbm: {role: compute, capacity: 40GiB, bandwidth: 1555GB/s}
//     host:
//       kind: cpu
//       tiers:
//         dram: {role: offload, capacity: 512GiB, bandwidth: 204.8GB/s}
//   switches: [pcie-sw0]          # optional: nodes that only forward (PCIe switches, NVSwitch)
//   links:
//     pcie0: {endpoints: [gpu0.hbm, host.dram], bandwidth: 31.5GB/s, latency: 1us}
//
// A multi-node platform describes one node as above and says how many there are, and the
// fabric between them:
//
//   nodes: 4                 # the node, 4 times: gpu0-7 on node 0, gpu8-15 on node 1, ...
//   fabric:
//     switches: [rail0, spine]           # shared by every node
//     links:                             # made once per node where an end is in the node
//       ib0: {endpoints: [gpu0.hbm, rail0], bandwidth: 50GB/s, latency: 2us}
//       up0: {endpoints: [rail0, spine], bandwidth: 1600GB/s}   # fabric-only: made once
//
// In node k a name that ends in a number is renumbered across the nodes (gpu8 is node 1's
// gpu0, pcie-sw4 node 1's pcie-sw0), and one that does not gets the node's number (host1,
// nvswitch1); the links of a node and of the fabric are renamed alike (ib8 is node 1's ib0).
// With one node nothing is renamed.
//
// Tier roles: `compute` (an op's operands must be here; one per device that runs ops),
// `offload` (a place to swap to), `scratch` (on-chip memory that takes an op's workspace
// when it fits). A tier's entry also holds its allocator's parameters (`memsim list`); a
// tiled tier gives `tiles` and `tile_capacity` instead of (or as well as) `capacity`. A
// device with `exchange` runs its ops bulk-synchronously: compute, sync, then an exchange of
// the op's input bytes at the exchange bandwidth.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/config.h"
#include "sim/core/interned.h"
#include "sim/core/params.h"
#include "sim/core/shared_table.h"
#include "sim/workload/trace.h"

namespace memsim {

enum class DeviceKind : std::uint8_t { gpu, tpu, ipu, cpu };
enum class TierRole : std::uint8_t { compute, offload, scratch };
std::string_view to_string(DeviceKind k);
std::string_view to_string(TierRole r);

struct TierSpec {
  std::string name;  // "gpu0.hbm"
  std::string device;
  TierRole role = TierRole::compute;
  std::uint64_t capacity_bytes = 0;
  double bandwidth_Bps = 0;  // the tier's own bandwidth, for the memory-bound roofline term
  double latency_s = 0;
  Interned allocator = "ideal";
  /// The allocator's parameters from the tier's entry (null: a tier built in code, every
  /// parameter at its default), shared by the tier's copies on the other nodes.
  std::shared_ptr<const Params> allocator_params;
};

/// The host's cost of issuing work to a device, for an eager framework (PyTorch, Megatron-LM):
/// op i cannot start on the device before the host has issued it, and the host issues ops in
/// program order, each taking `per_op` (per kind, else its default) of host time; it runs ahead
/// of the device freely, except after a call of ops whose kinds are in `sync_after`: such ops
/// that follow each other in a device's program order are one call (Megatron's
/// batch_isend_irecv of the sends and receives between two computations, then
/// torch.cuda.synchronize()), which costs the host its first op's time, and the host issues
/// nothing after it before every op of it has ended on the device (a blocking exchange that
/// posted its sends and receives one call at a time would deadlock 1F1B's neighbours).
/// `per_step` is host time before the step's first op (the iteration's fixed work: the loss
/// scaler's and gradient clipping's checks, the optimizer's launch).
struct HostOverhead {
  double per_op_s = 0;
  SharedMap<std::string, double> per_kind_s;
  double per_step_s = 0;
  SharedVector<std::string> sync_after;
  double per_op_for(const std::string& kind) const {
    auto it = per_kind_s.find(kind);
    return it == per_kind_s.end() ? per_op_s : it->second;
  }
  bool syncs_after(std::string_view kind) const {
    for (const auto& k : sync_after)
      if (k == kind) return true;
    return false;
  }
  bool any() const { return per_op_s > 0 || per_step_s > 0 || !per_kind_s.empty(); }
};

/// Wave quantization of a GEMM (a `linear`, `bmm` or `matmul` with its shape, Op::gemm): the
/// M x N output (per batch) is cut into tile_m x tile_n tiles, one per streaming
/// multiprocessor at a time; the compute term is the FLOPs over peak x efficiency x
/// tiles / (waves x sms), with waves = ceil(tiles / sms). sms 0: off.
struct GemmModel {
  std::uint32_t sms = 0;
  std::uint32_t tile_m = 128, tile_n = 128;
  /// The fraction of an op's ideal wave efficiency that applies (1: all of it).
  double wave_factor(double m, double n, double batch) const;
};

/// FlashAttention's rate by the work of a query block (`flash_attention: {fixed_keys: [forward,
/// backward]}`): a kernel whose queries attend to w keys on average (w = FLOPs / (4 x the
/// query's elements), a backward's FLOPs counted as 2.5 forwards: the sequence, halved under
/// a causal mask) runs at w / (w + fixed_keys) of its `efficiency` entry, which is then the rate
/// of a long sequence. Each block of queries pays a fixed part (loading it, the masked
/// diagonal block, writing its output) that a short sequence does not amortize. 0: off.
struct FlashModel {
  double fixed_keys_forward = 0, fixed_keys_backward = 0;
  /// The fraction of the efficiency entry a kernel of `keys` keys per query reaches.
  double factor(double keys, bool backward) const;
};

struct DeviceSpec {
  std::string name;  // "gpu0"
  DeviceKind kind = DeviceKind::gpu;
  /// Peak dense FLOP/s per dtype; 0 means the device has no rate for it.
  std::array<double, kDTypeCount> peak_flops{};
  double launch_overhead_s = 0;
  int streams = 1;
  int copy_engines = 1;  // per direction
  double default_efficiency = 1.0;
  /// Per op kind, overrides the default. This and the other tables are shared by a node's
  /// copies (sim/core/shared_table.h).
  SharedMap<std::string, double> efficiency;
  /// The memory-bound term's own table (`memory_efficiency`); where it says nothing for a
  /// kind (no entry, no default, or no table), the kind's `efficiency` applies to both terms.
  std::optional<double> default_memory_efficiency;
  SharedMap<std::string, double> memory_efficiency;
  std::vector<std::size_t> tiers;            // indices into PlatformSpec::tiers
  std::optional<std::size_t> compute_tier;   // where operands must be; none for a pure store
  std::optional<std::size_t> scratch_tier;   // takes op workspace when it fits
  double exchange_Bps = 0;                   // > 0: bulk-synchronous ops (IPU-like)
  double sync_s = 0;                         // the sync step of each bulk-synchronous op
  /// Memory of the compute tier the allocator never gets (`reserved: {cuda_context: 500MiB,
  /// nccl: 256MiB}`), by name in file order. An entry named `nccl` (the communicator's
  /// channel buffers) is taken only by a step that communicates.
  SharedVector<std::pair<std::string, std::uint64_t>> reserved;
  /// The node it belongs to on a multi-node platform (`nodes: N`), else 0.
  std::uint32_t node = 0;
  /// What the host that drives the device spends issuing its work (`host_overhead:`): an
  /// eager framework launches each op from Python, and a device whose ops are shorter than
  /// that waits for its host (docs/time-model.md).
  HostOverhead host;
  /// Shape-aware GEMMs (`gemm:`): the output is cut into tiles, run in waves over the
  /// streaming multiprocessors; a last wave that fills only part of them wastes the rest.
  GemmModel gemm;
  /// FlashAttention's short-sequence cost (`flash_attention:`).
  FlashModel flash;

  /// The reserved bytes of a step that communicates (`communicates`) or not.
  std::uint64_t reserved_bytes(bool communicates) const;

  /// Fraction of peak FLOP/s an op of this kind reaches: efficiency[kind], else its default.
  double efficiency_for(const std::string& op_kind) const;
  /// Fraction of bandwidth: memory_efficiency[kind], else memory_efficiency's default, else
  /// efficiency_for(kind).
  double memory_efficiency_for(const std::string& op_kind) const;
  /// Where the operands of the ops it runs must be: its compute tier; for a host CPU that
  /// has compute rates but no compute tier, its first tier (host DRAM) — a host runs ops
  /// handed to it (an offloaded optimizer step) in its own memory. None for a pure store.
  std::optional<std::size_t> operand_tier() const;
};

struct LinkSpec {
  std::string name;
  Interned from, to;  // tier or switch names (each name kept once: a tier has several links)
  double bandwidth_Bps = 0;
  double latency_s = 0;
  bool full_duplex = true;  // each direction has the full bandwidth
  /// The node whose copy it is (a link of the node description, or a fabric link with an end
  /// in the node); none for a fabric link between switches, made once and shared by all.
  std::optional<std::uint32_t> node;
};

/// NCCL's collectives as nccl-tests measures them (`collectives:` of a platform; absent: the
/// plain model of sim/collectives/collectives.h). Each protocol p (NCCL's LL128 and Simple) takes
/// latency_p + steps x per_step_p + its bandwidth term, the flows' bytes over the route at
/// efficiency_p x (1 - ring_fill / n) of its narrowest link; NCCL picks the faster protocol
/// for the message, and no collective of `steps` latency-bound steps is shorter than
/// floor_per_step x steps. Fitted to measured curves (docs/time-model.md).
struct CollectiveModel {
  struct Protocol {
    std::string name;
    double latency_s = 0, per_step_s = 0, efficiency = 1;
  };
  std::vector<Protocol> protocols;  // empty: the plain model
  double floor_per_step_s = 0;
  double ring_fill = 0;
  /// The share of a GPU's SMs a running collective's kernels hold: a compute op that starts
  /// on a device while one of its collectives runs takes 1 / (1 - sm_share) of its time.
  double sm_share = 0;
  /// Which algorithm (sim/collectives/) runs a kind, as NCCL's tuner picks one by message size
  /// (`algorithms:`): per kind, rules tried in order; the first whose `below` the message is
  /// under (0: any size) and whose algorithm runs on the group wins, "auto" the registered
  /// algorithm predicted fastest on idle links. No rule that applies: ring, or direct
  /// (sim/collectives/choose.h).
  struct Rule {
    std::uint64_t below = 0;
    std::string use;  // an algorithm's name, or "auto"
  };
  std::map<std::string, std::vector<Rule>> algorithms;
  bool on() const { return !protocols.empty(); }
};

struct PlatformSpec {
  std::string name;
  CollectiveModel collectives;
  std::string source;  // the file it came from
  std::uint32_t nodes = 1;  // copies of the node description (multi-node platforms)
  bool cluster = false;     // has a fabric: `--set nodes=N` makes more nodes
  std::vector<DeviceSpec> devices;
  std::vector<TierSpec> tiers;
  std::vector<LinkSpec> links;
  std::vector<std::string> switches;
  /// Switches that reduce what passes through them (`{name: nvswitch, reduces: true}` in a
  /// `switches:` list: NVLink SHARP, InfiniBand SHARP), by name.
  std::vector<std::string> reducing_switches;

  std::optional<std::size_t> find_device(const std::string& name) const;
  std::optional<std::size_t> find_tier(const std::string& name) const;
  /// Devices that run ops (those with a compute tier), in file order.
  std::vector<std::size_t> compute_devices() const;
  /// Devices an op can name (Op::device indexes this list): the compute devices, then the
  /// hosts (CPUs with compute rates but no compute tier), each in file order. Workloads are
  /// replicated over the compute devices only; a policy moves ops to a host (ZeRO-Offload).
  std::vector<std::size_t> op_devices() const;
};

/// Per tier: the reserved bytes (DeviceSpec::reserved) the compute devices that run ops of
/// `trace` take, NCCL's only where the step communicates; 0 elsewhere. The engine allocates
/// them at the start and the planners plan without them.
std::vector<std::uint64_t> reserved_per_tier(const PlatformSpec& platform, const Trace& trace);

/// How to get `needed` compute devices where `platform` has too few, for an error that
/// stops there: "; --set nodes=2 makes 16" on a cluster, else the built-in presets with
/// enough ("; for 4: a preset with more (dgx-a100 8, ...) or a cluster preset with
/// --set nodes=N (...)").
std::string more_devices_hint(const PlatformSpec& platform, std::size_t needed);

/// Reads and checks a platform. Throws InputError naming file, line, key.
PlatformSpec load_platform(const ConfigNode& root);

/// Why a --set KEY of the platform cannot apply, when it names a tier its device lacks
/// ("no tier 'hbm9' on gpu0 (tiers: hbm)"); nullopt otherwise.
std::optional<std::string> platform_override_problem(const ConfigNode& root, const std::string& key);

/// Turns a --set key for a platform ("gpu0.hbm.capacity", "gpu0.launch_overhead",
/// "pcie0.bandwidth") into its path in the YAML document; nullopt if it names nothing.
std::optional<std::vector<std::string>> platform_override_path(const ConfigNode& root,
                                                               const std::string& key);

/// Whether `name` matches `glob`, where '*' stands for any run of characters ("gpu*").
bool glob_matches(const std::string& glob, const std::string& name);

/// The keys a platform key stands for: where its first part is a glob over device names
/// ("gpu*.hbm.capacity"), the key with that part replaced by each of `devices` it matches,
/// in their order (empty when it matches none); otherwise the key itself. Only the first
/// part is a glob: a '*' after it is a name ("host_overhead.per_op.*_backward").
std::vector<std::string> expand_device_glob(const std::string& key, const std::vector<std::string>& devices);

/// The device names of a platform document (its `devices:` map, one node's), in its order.
std::vector<std::string> platform_document_devices(const ConfigNode& root);

}  // namespace memsim
