#include "sim/plan/bounds.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/cost/cost_model.h"
#include "sim/plan/path_bound.h"
#include "sim/workload/models/models.h"
#include "sim/workload/parallel.h"

namespace memsim {
namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A parameter of the workload after the --set overrides: as written, else the model's default.
std::string param_text(const ConfigNode& doc, const ModelInfo& model, const std::string& name) {
  if (auto n = doc.find(name)) return n->as_string();
  for (const ParamSpec& p : model.params)
    if (p.name == name && p.default_value) return *p.default_value;
  return "";
}

}  // namespace

PlanBounds::PlanBounds(std::string platform, std::string workload, std::vector<Override> overrides)
    : platform_arg_(std::move(platform)), workload_arg_(std::move(workload)), overrides_(std::move(overrides)) {
  platform_ = load_platform_arg(platform_arg_, overrides_);
  const auto compute = platform_.compute_devices();
  if (compute.empty()) throw InputError(fmt::format("{}: platform '{}' has no compute device", platform_arg_, platform_.name));
  const DeviceSpec& gpu = platform_.devices[compute.front()];
  const TierSpec& tier = platform_.tiers[*gpu.compute_tier];
  facts_.tier = tier.name;
  facts_.capacity_bytes = tier.capacity_bytes;
  facts_.platform_gpus = static_cast<std::uint32_t>(compute.size());
  for (std::size_t d : compute) facts_.gpus_per_node += platform_.devices[d].node == gpu.node;
  for (const TierSpec& t : platform_.tiers) facts_.has_offload_tier |= t.role == TierRole::offload;

  // The workload must be a model spec whose generator takes the keys a layout sets.
  ConfigNode doc = open_input(workload_arg_, "workloads");
  if (classify(doc) != InputKind::workload_spec)
    throw InputError(fmt::format("{}: memsim plan needs a model spec (a map with 'model:'), not a trace: a trace's "
                                 "layout is fixed where it was recorded",
                                 doc.file()));
  const ModelInfo* model = find_model(doc.at("model").as_string());
  if (!model) doc.at("model").fail_expected("a model `memsim list models` shows");
  const bool transformer = std::any_of(model->params.begin(), model->params.end(),
                                       [](const ParamSpec& p) { return p.name == "recompute"; });
  if (!transformer)
    doc.at("model").fail(fmt::format("memsim plan lays out transformers (gpt, gpt2, llama, bert, hf); model {} has no "
                                     "layers to split over tensor and pipeline ranks",
                                     model->name));
  for (const Override& o : overrides_)
    if (o.target == "workload") doc.override_value(split_dots(o.key), o.value, o.origin);
  const std::string seq = param_text(doc, *model, "seq_len");
  facts_.seq_len = all_digits(seq) && seq.size() < 12 ? std::stoll(seq) : 0;
  const std::string impl = param_text(doc, *model, "attention_impl");
  facts_.materialized = impl == "materialized" || impl == "selective";

  // The model once, on one device, one sample, without recomputation: its layers and the
  // dtype of most of its FLOPs (whose peak the MFU line names). The workload's own checks
  // run here too.
  std::vector<Override> base = overrides_;
  for (std::string s : {"workload.batch=1", "workload.recompute=none"}) base.push_back(parse_override(s));
  if (facts_.materialized) base.push_back(parse_override("workload.attention_impl=materialized"));
  for (Override& o : base)
    if (o.origin.empty()) o.origin = "memsim plan (" + o.target + "." + o.key + "=" + o.value + ")";
  const Trace trace = load_workload_arg(workload_arg_, base);
  facts_.workload_name = trace.name;
  std::set<UnitId> layers;  // the layers with parameters (their optimizer steps')
  for (const Op& op : trace.ops)
    if (op.phase == Phase::optimizer && op.unit != kNoUnit && trace.units.at(op.unit).layer) layers.insert(op.unit);
  facts_.layers = static_cast<std::uint32_t>(layers.size());
  std::array<double, kDTypeCount> by_dtype{};
  for (const Op& op : trace.ops)
    if (op.phase == Phase::forward && op.group.empty()) by_dtype[static_cast<int>(op.dtype)] += op.flops;
  const auto most = std::max_element(by_dtype.begin(), by_dtype.end());
  facts_.dtype = static_cast<DType>(most - by_dtype.begin());
  facts_.peak_flops = gpu.peak_flops[static_cast<int>(facts_.dtype)];
}

PlanBounds::Entry PlanBounds::generate(const std::vector<std::string>& sets, bool time) {
  std::vector<Override> ov = overrides_;
  for (const std::string& s : sets) {
    Override o = parse_override(s);
    o.origin = "memsim plan (" + s + ")";
    ov.push_back(std::move(o));
  }
  Entry e;
  try {
    const Trace trace = load_workload_arg(workload_arg_, ov);
    if (time) {
      const std::vector<double> durations = op_durations(trace, platform_);
      std::vector<double> per_stream;
      struct Block {
        std::vector<double> forward, backward;
        double chain = 0;
      };
      std::map<UnitId, Block> blocks;
      const HostOverhead& host = platform_.devices[platform_.op_devices().front()].host;
      for (const Op& op : trace.ops) {
        if (op.phase == Phase::optimizer || op.device != 0) continue;
        e.host += host_time_at_least(host, op.kind);
        if (!op.group.empty()) continue;
        if (per_stream.size() <= op.stream) per_stream.resize(op.stream + 1, 0.0);
        per_stream[op.stream] += durations[op.id];
        if (op.unit == kNoUnit || !trace.units.at(op.unit).layer) continue;
        Block& b = blocks[op.unit];
        auto& side = op.phase == Phase::forward ? b.forward : b.backward;
        if (side.size() <= op.stream) side.resize(op.stream + 1, 0.0);
        side[op.stream] += durations[op.id];
        const std::string_view kind = op.kind;
        if (op.phase == Phase::forward && (kind == "linear" || kind == "matmul")) b.chain += durations[op.id];
      }
      for (double s : per_stream) e.value = std::max(e.value, s);
      // What each block's forward keeps for its own backward: a buffer its forward makes and a
      // backward op of the same block reads (whatever else reads it, on whichever stage).
      std::map<UnitId, double> saved;
      std::vector<bool> counted(trace.buffers.size(), false);
      for (const Op& op : trace.ops) {
        if (op.phase != Phase::backward || op.device != 0 || op.unit == kNoUnit || !trace.units.at(op.unit).layer)
          continue;
        for (BufferId id : op.reads()) {
          const Buffer& b = trace.buffers[id];
          if (counted[id] || b.persistent || b.producer == kNoOp) continue;
          const Op& producer = trace.ops[b.producer];
          if (producer.phase != Phase::forward || producer.unit != op.unit) continue;
          counted[id] = true;
          saved[op.unit] += static_cast<double>(b.bytes);
        }
      }
      // The least of the blocks: a stage's blocks take no less than that each.
      bool first = true;
      for (auto& [unit, b] : blocks) {
        b.forward.resize(per_stream.size(), 0.0);
        b.backward.resize(per_stream.size(), 0.0);
        const double kept = saved.contains(unit) ? saved.at(unit) : 0.0;
        if (first) {
          e.block_saved = kept;
          e.block_forward = b.forward;
          e.block_backward = b.backward;
          e.block_chain = b.chain;
          first = false;
          continue;
        }
        for (std::size_t s = 0; s < per_stream.size(); ++s) {
          e.block_forward[s] = std::min(e.block_forward[s], b.forward[s]);
          e.block_backward[s] = std::min(e.block_backward[s], b.backward[s]);
        }
        e.block_chain = std::min(e.block_chain, b.chain);
        e.block_saved = std::min(e.block_saved, kept);
      }
    } else {
      // Each shard may be rounded up by a byte (ceil(bytes / dp)); a stage's own shards are
      // no smaller than its share of the unrounded bytes, so the rounding is taken back.
      double bytes = 0, count = 0;
      for (const Buffer& b : trace.buffers)
        if (b.persistent && b.device == 0 && b.producer == kNoOp) {  // resident when the step starts
          bytes += static_cast<double>(b.bytes);
          ++count;
        }
      e.value = std::max(0.0, bytes - count);
    }
  } catch (const InputError& err) {
    e.error = err.what();
  }
  return e;
}

const PlanBounds::Entry& PlanBounds::time_entry(const Layout& l) {
  const auto key = std::tuple{l.tp, l.sp, static_cast<int>(l.recompute), l.micro_batch};
  auto it = time_.find(key);
  if (it == time_.end()) {
    std::vector<std::string> sets{
        fmt::format("workload.batch={}", l.micro_batch),
        fmt::format("workload.recompute={}", l.recompute == Recompute::full ? "full" : "none"),
        fmt::format("parallel.tp={}", l.tp)};
    if (facts_.materialized)
      sets.push_back(fmt::format("workload.attention_impl={}",
                                 l.recompute == Recompute::selective ? "selective" : "materialized"));
    if (l.sp) sets.push_back("parallel.sp=true");
    it = time_.emplace(key, generate(sets, true)).first;
  }
  return it->second;
}

std::optional<double> PlanBounds::time_s(const Layout& l, std::string* why) {
  const Entry& e = time_entry(l);
  if (!e.error.empty()) {
    if (why) *why = e.error;
    return std::nullopt;
  }
  double bound = e.value * l.micro_batches / l.pp;
  // The host issues every op of a stage in turn, after its per-step work.
  const HostOverhead& host = platform_.devices[platform_.op_devices().front()].host;
  bound = std::max(bound, host.per_step_s + e.host * l.micro_batches / l.pp);
  if (l.pp > 1 && facts_.layers > 0) {
    const double per_stage = static_cast<double>(facts_.layers) / l.pp;  // blocks on each stage
    const double fill = static_cast<double>(l.pp - 1) / l.virtual_stages * e.block_chain;
    for (std::size_t s = 0; s < e.block_forward.size(); ++s)
      bound = std::max(bound, per_stage * (l.micro_batches * (e.block_forward[s] + e.block_backward[s]) + fill));
  }
  return bound;
}

std::optional<std::uint64_t> PlanBounds::memory_bytes(const Layout& l, std::string* why) {
  if (l.offload) return 0;  // the policy may move any of it to the host
  const auto key = std::tuple{l.tp, l.zero, l.dp, l.hsdp};
  auto it = memory_.find(key);
  if (it == memory_.end()) {
    std::vector<std::string> sets{"workload.batch=1", "workload.recompute=none", fmt::format("parallel.tp={}", l.tp),
                                  fmt::format("parallel.dp={}", l.dp), fmt::format("parallel.zero={}", l.zero)};
    if (l.hsdp > 0) sets.push_back(fmt::format("parallel.hsdp={}", l.hsdp));
    it = memory_.emplace(key, generate(sets, false)).first;
  }
  if (!it->second.error.empty()) {
    if (why) *why = it->second.error;
    return std::nullopt;
  }
  // The first stage's activations: min(micro-batches, pp) forwards of its layers / pp blocks
  // before its first backward.
  const Entry& t = time_entry(l);
  if (!t.error.empty()) {
    if (why) *why = t.error;
    return std::nullopt;
  }
  const double activations =
      std::min(l.micro_batches, l.pp) * std::floor(static_cast<double>(facts_.layers) / l.pp) * t.block_saved;
  // The memory the runtime keeps (CUDA context; NCCL's buffers in a step that communicates).
  const DeviceSpec& gpu = platform_.devices[platform_.compute_devices().front()];
  const bool communicates = std::uint64_t{l.tp} * l.pp * l.dp > 1;
  return static_cast<std::uint64_t>(it->second.value / l.pp + activations) + gpu.reserved_bytes(communicates);
}

}  // namespace memsim

namespace memsim {

std::optional<double> PlanBounds::path_time_s(const Layout& l, std::int64_t global_batch) const {
  if (l.offload) return std::nullopt;
  std::vector<Override> ov = overrides_;
  for (Override& o : layout_overrides(l, global_batch, facts_.materialized)) ov.push_back(std::move(o));
  try {
    // Less a part in a billion: the engine's clock adds the same durations in another order.
    if (auto t = longest_path_s(load_workload_arg(workload_arg_, ov), platform_)) return *t * (1 - 1e-9);
    return std::nullopt;
  } catch (const InputError&) {
    return std::nullopt;  // the run will say what is wrong
  }
}

}  // namespace memsim
