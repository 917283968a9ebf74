#include "sim/workload/parallel.h"

#include <algorithm>
#include <limits>
#include <map>
#include <span>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/parallel/mesh.h"
#include "sim/parallel/scheme.h"
#include "sim/workload/pipeline.h"

namespace memsim {

std::string_view to_string(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::gpipe: return "gpipe";
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved: return "interleaved";
  }
  return "?";
}

ParallelSettings read_parallel_settings(const Params& params, std::int64_t batch) {
  ParallelSettings s;
  s.dp = static_cast<std::uint32_t>(params.get("dp").as_int_in(1, 1 << 20));
  s.micro_batches = static_cast<std::uint32_t>(params.get("micro_batches").as_int_in(1, 4096));
  if (params.given("global_batch")) {
    const ConfigNode g = params.get("global_batch");
    const std::int64_t global = g.as_int_in(1, std::int64_t{1} << 40);
    if (params.given("micro_batches"))
      g.fail("give micro_batches or global_batch, not both (global_batch sets micro_batches)");
    if (batch <= 0) g.fail("this model has no batch to divide the global batch by");
    const std::int64_t per_step = batch * static_cast<std::int64_t>(s.dp);
    const std::int64_t m = (global + per_step - 1) / per_step;
    if (m > 4096) g.fail_expected(fmt::format("at most 4096 micro-batches of {} x {} ranks", batch, s.dp));
    s.micro_batches = static_cast<std::uint32_t>(m);
    s.global_batch = global;
  }
  s.tp = static_cast<std::uint32_t>(params.get("tp").as_int_in(1, 1024));
  const ConfigNode sp = params.get("sp");
  s.sp = sp.as_bool();
  if (s.sp && s.tp == 1) sp.fail("sequence parallelism needs tp > 1");
  const ConfigNode overlap_tp = params.get("tp_comm_overlap");
  s.tp_comm_overlap = overlap_tp.as_bool();
  if (s.tp_comm_overlap && !s.sp)
    overlap_tp.fail("overlaps the all-gathers and reduce-scatters of sequence parallelism with their GEMMs, as "
                    "Megatron's --tp-comm-overlap does: it needs sp: true (and tp > 1)");
  s.pp = static_cast<std::uint32_t>(params.get("pp").as_int_in(1, 1024));
  s.cp = static_cast<std::uint32_t>(params.get("cp").as_int_in(1, 1024));
  // Ranks are 32-bit device numbers; a million is past any platform.
  constexpr std::uint64_t kMostRanks = std::uint64_t{1} << 20;
  if (const std::uint64_t ranks = std::uint64_t{s.tp} * s.cp * s.dp * s.pp; ranks > kMostRanks)
    params.get(s.pp > 1 ? "pp" : s.cp > 1 ? "cp" : "tp")
        .fail(fmt::format("tp x cp x dp x pp is {} ranks, more than the {} a step may run on", ranks, kMostRanks));
  const ConfigNode ep = params.get("ep");
  s.ep = static_cast<std::uint32_t>(ep.as_int_in(1, 1024));
  if (s.ep > 1 && s.dp % s.ep != 0)
    ep.fail_expected(fmt::format("a divisor of dp ({}): expert-parallel ranks are data-parallel ranks", s.dp));
  const ConfigNode schedule = params.get("schedule");
  const std::string name = schedule.as_choice({"gpipe", "1f1b", "interleaved"});
  s.schedule = name == "gpipe" ? PipelineSchedule::gpipe
               : name == "1f1b" ? PipelineSchedule::one_f_one_b
                                : PipelineSchedule::interleaved;
  if (s.schedule == PipelineSchedule::interleaved && s.pp == 1)
    schedule.fail("the interleaved schedule spreads virtual_stages chunks over the pipeline's stages: it needs pp of 2 "
                  "or more");
  const ConfigNode chunks = params.get("virtual_stages");
  s.virtual_stages = static_cast<std::uint32_t>(chunks.as_int_in(1, 64));
  if (s.virtual_stages > 1 && s.schedule != PipelineSchedule::interleaved)
    chunks.fail("virtual stages need schedule: interleaved");
  if (s.schedule == PipelineSchedule::interleaved && s.virtual_stages < 2)
    schedule.fail("the interleaved schedule needs virtual_stages of 2 or more");
  s.fused_accumulation = params.get("fused_accumulation").as_bool();
  s.scatter_gather = params.get("scatter_gather").as_bool();
  auto stage_layers = [&](const char* key) {
    const ConfigNode n = params.get(key);
    const auto layers = static_cast<std::uint32_t>(n.as_int_in(0, 1 << 20));
    if (layers > 0 && s.pp < 2) n.fail("sets the layers of one pipeline stage: it needs pp of 2 or more");
    if (layers > 0 && s.virtual_stages > 1)
      n.fail("uneven stages with the interleaved schedule's chunks are not modelled: use virtual_stages 1");
    return layers;
  };
  s.first_stage_layers = stage_layers("first_stage_layers");
  s.last_stage_layers = stage_layers("last_stage_layers");
  s.zero = static_cast<int>(params.get("zero").as_int_in(0, 3));
  s.bucket_bytes = params.get("bucket").as_positive_bytes();
  s.bucket_view = params.get("bucket_view").as_bool();
  const ConfigNode overlap = params.get("overlap_param_gather");
  s.overlap_param_gather = overlap.as_bool();
  if (s.overlap_param_gather && s.zero != 1 && s.zero != 2)
    overlap.fail(fmt::format("gathers the updated weight shards of zero 1 or 2 (the distributed optimizer) during the "
                             "next forward; got zero {}",
                             s.zero));
  const ConfigNode ddp = params.get("ddp");
  s.ddp_local = ddp.as_choice({"overlapped", "local"}) == "local";
  if (s.ddp_local && s.zero == 3)
    ddp.fail("local (one reduction after the backward) needs zero 0, 1 or 2, got zero 3 (which gathers and reduces "
             "per unit)");
  s.prefetch = params.get("prefetch").as_bool();
  s.reshard_after_forward = params.get("reshard_after_forward").as_bool();
  const ConfigNode hsdp = params.get("hsdp");
  s.hsdp = static_cast<std::uint32_t>(hsdp.as_int_in(0, 1 << 20));
  if (s.hsdp > 0) {
    if (s.zero != 3)
      hsdp.fail(fmt::format("shards the model state within groups of data-parallel ranks as zero 3 does (FSDP's "
                            "HYBRID_SHARD): it needs zero 3, got zero {}",
                            s.zero));
    if (s.dp % s.hsdp != 0)
      hsdp.fail_expected(fmt::format("a divisor of dp ({}): the ranks of one shard group", s.dp));
    if (s.ep > 1) hsdp.fail(fmt::format("with expert parallelism (ep {}) is not modelled", s.ep));
  }
  s.symmetric = params.get("symmetric").as_bool();
  return s;
}

std::string parallel_summary(const ParallelSettings& s) {
  std::string out;
  if (s.tp > 1) out = fmt::format("tp {}{}{}", s.tp, s.sp ? " sp" : "", s.tp_comm_overlap ? " overlapped" : "");
  if (s.cp > 1) out += fmt::format("{}cp {}", out.empty() ? "" : ", ", s.cp);
  if (s.ep > 1) out += fmt::format("{}ep {}", out.empty() ? "" : ", ", s.ep);
  if (s.pp > 1) {
    out += fmt::format("{}pp {} {}", out.empty() ? "" : ", ", s.pp, to_string(s.schedule));
    if (s.virtual_stages > 1) out += fmt::format(" x {} chunks", s.virtual_stages);
  }
  if (s.dp > 1 || out.empty()) out += fmt::format("{}dp {}, zero {}", out.empty() ? "" : ", ", s.dp, s.zero);
  if (s.dp_replicas() > 1) out += fmt::format(", hsdp {} x {} replicas", s.hsdp, s.dp_replicas());
  if (s.micro_batches > 1) out += fmt::format(", {} micro-batches", s.micro_batches);
  return out;
}

namespace {

constexpr std::uint64_t kFirstBucketBytes = 1ull << 20;  // DDP's _DEFAULT_FIRST_BUCKET_BYTES

struct Param {
  BufferId weight = 0, grad = 0;
  std::vector<BufferId> master, state;
  OpId step = kNoOp;
  OpId ready = kNoOp;  // the last op before the optimizer that writes the gradient
  /// An expert's parameter under expert parallelism: reduced and sharded over the expert
  /// data-parallel group (the dp / ep ranks that hold the same experts), not all of dp.
  bool expert = false;
};

std::uint64_t shard(std::uint64_t bytes, std::uint32_t n) { return (bytes + n - 1) / n; }

}  // namespace

Trace run_micro_batches(const Trace& step, const std::vector<MicroBatchBlock>& order, std::uint32_t m,
                        std::vector<std::uint32_t>& mb, const std::vector<std::uint32_t>& chunk_of,
                        bool fused_accumulation, bool exchange_after_pairs, std::size_t name_room) {
  mb.clear();
  // The parameters' gradients: what the optimizer steps read.
  std::vector<bool> param_grad(step.buffers.size(), false);
  for (const Op& op : step.ops)
    if (op.phase == Phase::optimizer)
      for (BufferId b : op.inputs)
        if (step.buffers[b].category == Category::gradient) param_grad[b] = true;
  Trace out = step.without_ops();
  out.samples *= m;
  // Each op and each output once per micro-batch (a large step is copied, not grown by
  // doubling: a tenth of a 3-D step's build was reallocation and its page faults).
  std::size_t outputs = 0;
  for (const Op& op : step.ops) outputs += op.outputs.size();
  out.ops.reserve(step.ops.size() * m);
  out.buffers.reserve(step.buffers.size() + outputs * (m - 1));
  std::uint32_t chunks = 1;
  for (const MicroBatchBlock& block : order) chunks = std::max(chunks, block.chunk + 1);
  // The ops of each block kind: (chunk, forward or backward), in step order.
  std::vector<std::vector<OpId>> ops_of(2 * chunks);
  for (const Op& op : step.ops) {
    if (op.phase == Phase::optimizer) continue;
    const std::uint32_t chunk = op.id < chunk_of.size() ? chunk_of[op.id] : 0;
    ops_of[2 * chunk + (op.phase == Phase::forward ? 0 : 1)].push_back(op.id);
  }
  std::vector<std::vector<BufferId>> copy(m);
  std::vector<std::vector<OpId>> op_copy(m);
  auto block_ops = [&](std::size_t i) -> const std::vector<OpId>& {
    return ops_of[2 * order[i].chunk + (order[i].forward ? 0 : 1)];
  };
  std::vector<OpId> received(order.size(), kNoOp);  // per block: its last receive so far
  // NAME (NAME + SUFFIX), or NAME@mbK in micro-batch k > 0, made once with room for what a
  // later pass puts before it (name_room).
  const auto named = [&](const std::string& name, std::uint32_t k, std::string_view suffix = {}) {
    const fmt::format_int digits(k);
    std::string full;
    full.reserve(name.size() + suffix.size() + (k > 0 ? 3 + digits.size() : 0) + name_room);
    full += name;
    full += suffix;
    if (k > 0) full.append("@mb").append(digits.data(), digits.size());
    return full;
  };
  // Block i's ops (of step), or those of one part of it, copied for its micro-batch.
  auto emit = [&](std::size_t i, std::span<const OpId> ids) {
    const MicroBatchBlock& block = order[i];
    const std::uint32_t k = block.mb;
    if (copy[k].empty()) {
      copy[k].resize(step.buffers.size());
      for (BufferId b = 0; b < copy[k].size(); ++b) copy[k][b] = b;
      op_copy[k].assign(step.ops.size(), kNoOp);
    }
    // The last computation before these ops: a receive is posted only when the schedule
    // gets here (waiting for a send instead could close a cycle between two stages).
    OpId previous = kNoOp;
    for (auto j = static_cast<OpId>(out.ops.size()); j-- > 0;)
      if (out.ops[j].group.empty()) {  // not a communication
        previous = j;
        break;
      }
    for (OpId id : ids) {
      Op op = with_name(step.ops[id], named(step.ops[id].name, k));
      std::vector<std::pair<BufferId, BufferId>> accumulate;  // (this micro-batch's, .grad)
      if (k > 0) {
        for (BufferId& b : op.inputs) b = copy[k][b];
        for (BufferId& b : op.updates) b = copy[k][b];
        if (fused_accumulation) {
          // The parameter gradients are written in place, added to what .grad holds.
          for (BufferId b : op.outputs)
            if (param_grad[b]) op.updates.push_back(b);
          erase_if(op.outputs, [&](BufferId b) { return param_grad[b]; });
        }
        for (BufferId& b : op.outputs) {
          const Buffer& orig = step.buffers[b];
          const BufferId fresh = out.add_buffer(named(orig.name, k), orig.bytes, orig.category, orig.persistent);
          out.buffers[fresh].device = orig.device;
          if (param_grad[b])
            accumulate.emplace_back(fresh, b);
          else
            copy[k][b] = fresh;
          b = fresh;
        }
      }
      for (OpId& w : op.waits_for) w = op_copy[k][w];
      erase(op.waits_for, kNoOp);
      const bool recv = op.kind == "recv";
      if (recv && previous != kNoOp) op.waits_for.push_back(previous);
      // Megatron waits for a receive on the CPU (batch_isend_irecv, then wait()), so the
      // block's collectives are not issued before it has arrived.
      if (!recv && !op.group.empty() && op.kind != "send" && received[i] != kNoOp) op.waits_for.push_back(received[i]);
      op_copy[k][id] = out.add_op(std::move(op));
      if (recv) received[i] = op_copy[k][id];
      mb.push_back(k);
      for (const auto& [fresh, grad] : accumulate) {
        Op add;
        add.name = named(step.buffers[grad].name, k, ".accumulate");
        add.kind = "accumulate_grad";
        add.phase = Phase::backward;
        add.device = step.ops[id].device;
        add.dtype = step.ops[id].dtype;
        add.inputs = {fresh};
        add.updates = {grad};
        add.bytes_moved = 3.0 * static_cast<double>(step.buffers[grad].bytes);
        out.add_op(std::move(add));
        mb.push_back(k);
      }
    }
  };
  if (!exchange_after_pairs) {
    for (std::size_t i = 0; i < order.size(); ++i) emit(i, block_ops(i));
  } else {
    // Megatron-LM's interleaved schedule: each block's receives, the all-gathers of the
    // scattered ones, its other ops and its sends. A forward followed by a backward is
    // one step of the steady state, the other blocks a step each; a step's computation runs
    // first, then one batch_isend_irecv sends what its blocks made and receives what the
    // next step's blocks need (p2p_communication's send_forward_backward_recv_forward_backward).
    struct Parts {
      std::vector<OpId> recvs, gathers, body, sends;
    };
    std::vector<Parts> parts(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      // A backward block recomputes its forward before it reads the gradient it receives: in
      // the step trace its receive comes after the recomputation, here before it.
      std::vector<BufferId> got;  // the received buffers
      for (OpId id : block_ops(i)) {
        const Op& op = step.ops[id];
        if (op.kind == "recv") {
          parts[i].recvs.push_back(id);
          got.insert(got.end(), op.outputs.begin(), op.outputs.end());
        } else if (op.kind == "all_gather" && op.inputs.size() == 1 &&
                   std::find(got.begin(), got.end(), op.inputs[0]) != got.end()) {
          parts[i].gathers.push_back(id);
        } else {
          (op.kind == "send" ? parts[i].sends : parts[i].body).push_back(id);
        }
      }
    }
    // A stage whose warm-up is every forward (more warm-up than chunk forwards) has no steady
    // state: its last forward is the warm-up's and its first backward the cool-down's, each a
    // step of its own, as Megatron runs them.
    std::size_t forwards = 0, leading = 0;
    for (const MicroBatchBlock& block : order) forwards += block.forward;
    while (leading < order.size() && order[leading].forward) ++leading;
    const bool steady = leading < forwards;
    std::vector<std::pair<std::size_t, std::size_t>> steps;  // [first block, last block]
    for (std::size_t i = 0; i < order.size(); ++i) {
      const bool pair = steady && order[i].forward && i + 1 < order.size() && !order[i + 1].forward;
      steps.emplace_back(i, pair ? i + 1 : i);
      if (pair) ++i;
    }
    auto receive = [&](std::size_t t) {
      for (std::size_t i = steps[t].first; i <= steps[t].second; ++i) emit(i, parts[i].recvs);
    };
    if (!steps.empty()) receive(0);
    for (std::size_t t = 0; t < steps.size(); ++t) {
      // A scattered tensor is gathered over the tensor-parallel group just before the block
      // that reads it: the backward's gather ahead of the forward's collectives on the same
      // stream would hold them until the gradient came, which a neighbour sends only once
      // this forward has reached it.
      for (std::size_t i = steps[t].first; i <= steps[t].second; ++i) {
        emit(i, parts[i].gathers);
        emit(i, parts[i].body);
      }
      for (std::size_t i = steps[t].first; i <= steps[t].second; ++i) emit(i, parts[i].sends);
      if (t + 1 < steps.size()) receive(t + 1);
    }
  }
  for (const Op& op : step.ops)
    if (op.phase == Phase::optimizer) {
      out.add_op(op);
      mb.push_back(m - 1);
    }
  return out;
}

namespace {

// The step with its forward and backward run `m` times in turn (gradient accumulation).
Trace accumulate(const Trace& step, std::uint32_t m, std::vector<std::uint32_t>& mb, bool fused) {
  if (m <= 1) {
    mb.assign(step.ops.size(), 0);
    return step;
  }
  std::vector<MicroBatchBlock> order;
  for (std::uint32_t k = 0; k < m; ++k) {
    order.push_back({true, k, 0});
    order.push_back({false, k, 0});
  }
  return run_micro_batches(step, order, m, mb, {}, fused);
}

class Sharder {
 public:
  // The step is taken, not copied: its ops become this rank's (ops_), changed in place.
  Sharder(Trace step, const ParallelSettings& s, std::vector<std::uint32_t> mb)
      : in_(std::move(step)), s_(s), mb_(std::move(mb)) {}

  Trace run() {
    // The step's buffers become the output's (moved, not copied): the sharding only shrinks
    // the state it shards, each buffer once and after reading its whole size, and adds the
    // shards and communication buffers after them.
    std::vector<Buffer> buffers = std::move(in_.buffers);
    in_.buffers.clear();
    out_ = in_.without_ops();
    out_.buffers = std::move(buffers);
    for (Buffer& buffer : out_.buffers) buffer.producer = kNoOp;
    find_parameters();
    out_.ops.reserve(in_.ops.size() + in_.ops.size() / 4);  // the step's ops and its collectives
    // Rank 0's groups (a pipeline's stage: its first rank's); each rank's instance is the
    // mesh's group around it.
    const Mesh mesh = Mesh::megatron(s_.tp, s_.dp, s_.ep, 1, s_.cp, s_.dp_replicas());
    out_.groups.push_back({"dp", mesh.group("dp", 0)});
    // HSDP: the group sharding rank 0's state, and the ranks holding the same shard.
    if (hybrid()) {
      out_.groups.push_back({"dp_shard", mesh.group("dp_shard", 0)});
      out_.groups.push_back({"dp_replica", mesh.group("dp_replica", 0)});
    }
    // The ranks holding rank 0's experts: every ep-th of its data-parallel group.
    if (expert_replicas()) out_.groups.push_back({"edp", mesh.group("edp", 0)});
    out_.parallel = ParallelLayout{};
    out_.parallel.ranks = mesh.size();
    out_.parallel.symmetric = s_.symmetric;
    out_.parallel.summary = summary();
    out_.parallel.tp = s_.tp;
    out_.parallel.cp = s_.cp;
    out_.parallel.dp = s_.dp;
    out_.parallel.ep = s_.ep;
    out_.parallel.dp_replicas = s_.dp_replicas();
    before_.resize(in_.ops.size());
    after_.resize(in_.ops.size());
    if (s_.zero == 3 && s_.ep > 1)
      throw ParallelKeyError({"zero", "ep"},
                             fmt::format("{}: zero 3 with expert parallelism (parallel.ep {}) is not modelled; use zero 1 or 2",
                                   in_.name, s_.ep));
    if (s_.zero >= 1) shard_optimizer();
    if (s_.zero == 3)
      shard_parameters();
    else
      bucket_gradients();
    emit_all();
    return std::move(out_);
  }

 private:
  std::string summary() const { return parallel_summary(s_); }

  void find_parameters() {
    std::map<BufferId, std::size_t> by_grad;
    for (const Op& op : in_.ops) {
      if (op.phase != Phase::optimizer || op.updates.empty()) continue;
      Param p;
      bool have_grad = false;
      for (BufferId b : op.inputs)
        if (out_.buffers[b].category == Category::gradient) {
          p.grad = b;
          have_grad = true;
          break;
        }
      if (!have_grad || out_.buffers[op.updates[0]].category != Category::weight) continue;
      p.weight = op.updates[0];
      for (std::size_t i = 1; i < op.updates.size(); ++i) {
        const BufferId b = op.updates[i];
        if (out_.buffers[b].category == Category::weight) p.master.push_back(b);
        if (out_.buffers[b].category == Category::optimizer_state) p.state.push_back(b);
      }
      p.step = op.id;
      p.expert = s_.ep > 1 && out_.buffers[p.weight].name.find(".experts.") != std::string::npos;
      by_grad[p.grad] = params_.size();
      params_.push_back(std::move(p));
    }
    if (params_.empty())
      throw ParallelKeyError({"dp"}, fmt::format("{}: parallel.dp {} needs the step's optimizer steps (an op per "
                                   "parameter that reads its gradient and updates its weight) to "
                                   "find the parameters, and the step has none",
                                   in_.name, s_.dp));
    for (const Op& op : in_.ops) {
      if (op.phase == Phase::optimizer) continue;
      for (const auto* list : {&op.outputs, &op.updates})
        for (BufferId b : *list)
          if (auto it = by_grad.find(b); it != by_grad.end()) params_[it->second].ready = op.id;
    }
  }

  BufferId add_buffer(std::string name, std::uint64_t bytes, Category c, bool persistent) {
    return out_.add_buffer(std::move(name), bytes, c, persistent);
  }

  // How many ranks share a parameter's gradient and shard its state: dp, or for an expert's
  // dp / ep; and over which group.
  // With context parallelism the weights are replicated over cp too: dp x cp ways; with HSDP
  // the state is sharded within a group of dp / replicas ranks (x cp).
  std::uint32_t ways(const Param& p) const {
    return (p.expert ? s_.dp / s_.ep : s_.dp) / s_.dp_replicas() * s_.cp;
  }
  // HSDP: ZeRO-3's gathers and reduce-scatters run within "dp_shard", and each gradient shard
  // is all-reduced over "dp_replica"; else they run over "dp".
  bool hybrid() const { return s_.dp_replicas() > 1; }
  const char* shard_group() const { return hybrid() ? "dp_shard" : "dp"; }
  // Whether other ranks hold this rank's experts (an expert data-parallel group of 2 or more).
  bool expert_replicas() const { return s_.ep > 1 && (s_.dp > s_.ep || s_.cp > 1); }
  static const char* group_of(const Param& p) { return p.expert ? "edp" : "dp"; }

  static Op comm_op(std::string name, std::string kind, Phase phase, std::uint64_t message,
                    const char* group = "dp") {
    Op op;
    op.name = std::move(name);
    op.kind = std::move(kind);
    op.phase = phase;
    op.message_bytes = message;
    op.group = group;
    return op;
  }

  // ZeRO-1 and up: master weights and optimizer state hold this rank's shard; the step
  // updates only it (its FLOPs in proportion) and reads the gradient's shard.
  void shard_optimizer() {
    for (Param& p : params_) {
      const std::uint32_t n = ways(p);
      for (BufferId b : p.master) out_.buffers[b].bytes = shard(out_.buffers[b].bytes, n);
      for (BufferId b : p.state) out_.buffers[b].bytes = shard(out_.buffers[b].bytes, n);
      Op& step = ops_[p.step];
      step.flops /= n;
      step.bytes_moved /= n;
    }
  }

  // ZeRO-2 and 3: this rank's shard of a gradient, which its step reads instead.
  BufferId grad_shard(const Param& p) {
    const Buffer& g = out_.buffers[p.grad];
    const BufferId b = add_buffer(g.name + ".shard", shard(g.bytes, ways(p)), Category::gradient, false);
    for (BufferId& in : ops_[p.step].inputs)
      if (in == p.grad) in = b;
    return b;
  }

  // Buckets in the order backward makes the gradients; each is reduced once its last
  // gradient is ready.
  void bucket_gradients() {
    bucket_gradients(false);
    // Experts' gradients over their own group; with ep = dp no other rank holds them.
    if (expert_replicas()) bucket_gradients(true);
  }

  void bucket_gradients(bool experts) {
    const char* group = experts ? "edp" : "dp";
    const std::string prefix = experts ? "expert_bucket" : "bucket";
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].ready != kNoOp && params_[i].expert == experts) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return params_[a].ready < params_[b].ready; });
    std::vector<std::vector<std::size_t>> buckets;
    std::uint64_t filled = 0;
    for (std::size_t i : order) {
      const std::uint64_t bytes = out_.buffers[params_[i].grad].bytes;
      // The bucket being filled: DDP caps its first at 1 MiB, so that communication starts early.
      // Megatron's local DDP: one bucket of everything.
      const std::uint64_t cap =
          s_.ddp_local ? std::numeric_limits<std::uint64_t>::max()
          : s_.zero == 0 && buckets.size() == 1 ? std::min(kFirstBucketBytes, s_.bucket_bytes)
                                                : s_.bucket_bytes;
      if (buckets.empty() || (filled > 0 && filled + bytes > cap)) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(i);
      filled += bytes;
    }
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      const auto& bucket = buckets[k];
      std::uint64_t grad_bytes = 0, weight_bytes = 0;
      OpId ready = 0, last_step = 0;
      for (std::size_t i : bucket) {
        grad_bytes += out_.buffers[params_[i].grad].bytes;
        weight_bytes += out_.buffers[params_[i].weight].bytes;
        ready = std::max(ready, params_[i].ready);
        last_step = std::max(last_step, params_[i].step);
      }
      const std::string name = fmt::format("{}{}", prefix, k);
      if (s_.zero == 0) {
        Op ar = comm_op(name + ".all_reduce", "all_reduce", Phase::backward, grad_bytes, group);
        for (std::size_t i : bucket) ar.updates.push_back(params_[i].grad);
        if (!s_.bucket_view && !s_.ddp_local)  // local: the gradients are the buffer
          ar.updates.push_back(add_buffer("ddp." + name, grad_bytes, Category::comm, true));
        after_[ready].push_back(std::move(ar));
        continue;
      }
      // ZeRO-1 reduces into the full gradients (the step reads its slice of them); ZeRO-2
      // into a shard, and the full gradients die.
      Op rs = comm_op(name + ".reduce_scatter", "reduce_scatter", Phase::backward, grad_bytes, group);
      for (std::size_t i : bucket) {
        if (s_.zero == 1) {
          rs.updates.push_back(params_[i].grad);
        } else {
          rs.inputs.push_back(params_[i].grad);
          rs.outputs.push_back(grad_shard(params_[i]));
        }
      }
      after_[ready].push_back(std::move(rs));
      // The updated shards of the (full) weights are gathered after the step; with
      // overlap_param_gather (Megatron's distributed optimizer) before the bucket's first use
      // in the forward instead, on the communication stream: in the steady state the next
      // step's forward hides the gather of this step's update.
      const OpId first_use = s_.overlap_param_gather ? first_forward_reader(bucket) : kNoOp;
      Op ag = comm_op(name + ".all_gather", "all_gather", first_use == kNoOp ? Phase::optimizer : Phase::forward,
                      weight_bytes, group);
      for (std::size_t i : bucket) ag.updates.push_back(params_[i].weight);
      (first_use == kNoOp ? after_[last_step] : before_[first_use]).push_back(std::move(ag));
    }
  }

  // The first forward op that reads a weight of `bucket` (kNoOp: none does).
  OpId first_forward_reader(const std::vector<std::size_t>& bucket) const {
    for (const Op& op : in_.ops) {
      if (op.phase != Phase::forward) continue;
      for (std::size_t i : bucket)
        if (std::find(op.inputs.begin(), op.inputs.end(), params_[i].weight) != op.inputs.end()) return op.id;
    }
    return kNoOp;
  }

  struct Unit {
    std::string name;
    std::vector<std::size_t> params;
    std::uint64_t weight_bytes = 0, grad_bytes = 0;
    OpId ready = 0;
    // Per micro-batch: the first forward and backward reader, and the gathered buffers.
    std::vector<OpId> first_forward, first_backward;
    std::vector<BufferId> gathered_forward, gathered_backward;
  };

  // ZeRO-3 / FSDP: each unit's weights are gathered before use and resharded after (in each
  // micro-batch), its gradients reduce-scattered after its (last) backward.
  void shard_parameters() {
    const std::uint32_t m = s_.micro_batches;
    std::map<UnitId, std::size_t> index;
    std::vector<Unit> units;
    std::map<BufferId, std::size_t> unit_of_weight;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Param& p = params_[i];
      const UnitId u = in_.ops[p.step].unit;  // the parameter's module
      if (u == kNoUnit || u >= in_.units.size())
        throw std::logic_error(fmt::format("the step of weight '{}' belongs to no unit", out_.buffers[p.weight].name));
      auto [it, fresh] = index.try_emplace(u, units.size());
      if (fresh) {
        Unit unit;
        unit.name = in_.units[u].name;
        unit.first_forward.assign(m, kNoOp);
        unit.first_backward.assign(m, kNoOp);
        unit.gathered_forward.assign(m, kNoOp);
        unit.gathered_backward.assign(m, kNoOp);
        units.push_back(std::move(unit));
      }
      Unit& unit = units[it->second];
      unit.params.push_back(i);
      unit.weight_bytes += out_.buffers[p.weight].bytes;
      unit.grad_bytes += out_.buffers[p.grad].bytes;
      if (p.ready != kNoOp) unit.ready = std::max(unit.ready, p.ready);
      unit_of_weight[p.weight] = it->second;
      out_.buffers[p.weight].bytes = shard(out_.buffers[p.weight].bytes, ways(p));
    }
    for (const Op& op : in_.ops) {
      if (op.phase == Phase::optimizer) continue;
      for (BufferId b : op.inputs)
        if (auto it = unit_of_weight.find(b); it != unit_of_weight.end()) {
          Unit& u = units[it->second];
          OpId& first = (op.phase == Phase::forward ? u.first_forward : u.first_backward)[mb_[op.id]];
          if (first == kNoOp) first = op.id;
        }
    }
    for (Unit& u : units)
      for (std::uint32_t k = 0; k < m; ++k) {
        const std::string at = m > 1 ? fmt::format("@mb{}", k) : std::string();
        if (u.first_forward[k] != kNoOp)
          u.gathered_forward[k] = add_buffer(u.name + ".gathered" + at, u.weight_bytes, Category::comm, false);
        if (u.first_backward[k] != kNoOp)
          u.gathered_backward[k] = s_.reshard_after_forward || u.gathered_forward[k] == kNoOp
                                       ? add_buffer(u.name + ".gathered.backward" + at, u.weight_bytes,
                                                    Category::comm, false)
                                       : u.gathered_forward[k];
      }
    // Gathers: in the order the units are used; the next waits for the current one to start
    // (prefetch) or for the op before its own first use.
    struct Use {
      std::size_t unit;
      std::uint32_t mb;
      OpId first;
    };
    auto gather = [&](Phase phase) {
      std::vector<Use> order;
      for (std::size_t i = 0; i < units.size(); ++i)
        for (std::uint32_t k = 0; k < m; ++k) {
          const Unit& u = units[i];
          const OpId first = phase == Phase::forward ? u.first_forward[k] : u.first_backward[k];
          const bool needed = phase == Phase::forward
                                  ? first != kNoOp
                                  : first != kNoOp && u.gathered_backward[k] != u.gathered_forward[k];
          if (needed) order.push_back({i, k, first});
        }
      std::stable_sort(order.begin(), order.end(), [](const Use& a, const Use& b) { return a.first < b.first; });
      for (std::size_t k = 0; k < order.size(); ++k) {
        const Unit& u = units[order[k].unit];
        // Issued where FSDP issues it: with prefetch, when the unit before it starts (its
        // pre-forward or pre-backward hook), so that it is ahead of that unit's
        // reduce-scatter on the communication stream; else when the unit itself starts.
        // Either way it waits for the op before that moment.
        const OpId at = s_.prefetch && k > 0 ? order[k - 1].first : order[k].first;
        const std::string mb = m > 1 ? fmt::format("@mb{}", order[k].mb) : std::string();
        Op ag = comm_op(u.name + (phase == Phase::forward ? ".all_gather" : ".all_gather.backward") + mb,
                        "all_gather", phase, u.weight_bytes, shard_group());
        for (std::size_t i : u.params) ag.inputs.push_back(params_[i].weight);
        ag.outputs.push_back(phase == Phase::forward ? u.gathered_forward[order[k].mb]
                                                     : u.gathered_backward[order[k].mb]);
        if (at > 0) ag.waits_for.push_back(at - 1);
        before_[at].push_back(std::move(ag));
      }
    };
    gather(Phase::forward);
    gather(Phase::backward);
    // Readers of a weight read the unit's gathered buffer of their micro-batch (once per op).
    for (Op& op : ops_) {
      if (op.phase == Phase::optimizer) continue;
      std::vector<BufferId> inputs;
      for (BufferId b : op.inputs) {
        BufferId to = b;
        if (auto it = unit_of_weight.find(b); it != unit_of_weight.end()) {
          const Unit& u = units[it->second];
          const std::uint32_t k = mb_[op.id];
          to = op.phase == Phase::forward ? u.gathered_forward[k] : u.gathered_backward[k];
        }
        if (std::find(inputs.begin(), inputs.end(), to) == inputs.end()) inputs.push_back(to);
      }
      op.inputs = std::move(inputs);
    }
    for (const Unit& u : units) {
      Op rs = comm_op(u.name + ".reduce_scatter", "reduce_scatter", Phase::backward, u.grad_bytes, shard_group());
      // HSDP: the shard is then all-reduced with the replicas' (FSDP's all-reduce over its
      // replicate group, right after the reduce-scatter, on the same stream).
      bool any = false;
      for (std::size_t i : u.params) {
        if (params_[i].ready == kNoOp) continue;
        rs.inputs.push_back(params_[i].grad);
        rs.outputs.push_back(grad_shard(params_[i]));
        any = true;
      }
      if (!any) continue;
      const std::vector<BufferId> shards(rs.outputs.begin(), rs.outputs.end());
      after_[u.ready].push_back(std::move(rs));
      if (!hybrid()) continue;
      Op ar = comm_op(u.name + ".all_reduce", "all_reduce", Phase::backward, 0, "dp_replica");
      for (BufferId shard : shards) {
        ar.updates.push_back(shard);
        ar.message_bytes += out_.buffers[shard].bytes;
      }
      after_[u.ready].push_back(std::move(ar));
    }
  }

  void emit_all() {
    std::vector<OpId> new_id(in_.ops.size(), kNoOp);
    // The last reduction or gather placed here that reads each buffer: a collective of the
    // step that later writes the buffer (a pipeline's all-reduce of a tied embedding's
    // gradient between its stages, as Megatron's finalize_model_grads runs it after the
    // data-parallel reduction) waits for it, on whatever stream each runs.
    std::vector<OpId> read_by(out_.buffers.size(), kNoOp);  // per buffer (every buffer is made by now)
    auto emit = [&](Op op) {
      for (OpId& w : op.waits_for) w = new_id[w];
      const OpId id = out_.add_op(std::move(op));
      for (const auto* list : {&out_.ops[id].inputs, &out_.ops[id].updates})
        for (BufferId b : *list) read_by.at(b) = id;
      return id;
    };
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      for (Op& op : before_[i]) emit(std::move(op));
      Op op = std::move(ops_[i]);
      for (OpId& w : op.waits_for) w = new_id[w];
      if (!op.group.empty())
        for (BufferId b : op.updates)
          if (const OpId by = read_by.at(b);
              by != kNoOp && std::find(op.waits_for.begin(), op.waits_for.end(), by) == op.waits_for.end())
            op.waits_for.push_back(by);
      new_id[i] = out_.add_op(std::move(op));
      for (Op& op2 : after_[i]) emit(std::move(op2));
    }
  }

  // The step. Its ops are ops_, which the sharding changes (an optimizer step's FLOPs and
  // inputs, ZeRO-3's readers of a weight) only where nothing reads the step's own any more,
  // and which emit_all() moves out, last.
  Trace in_;
  const ParallelSettings& s_;
  std::vector<std::uint32_t> mb_;  // each op's micro-batch
  Trace out_;
  std::vector<Param> params_;
  std::vector<Op>& ops_ = in_.ops;  // the step's ops, as this rank runs them
  std::vector<std::vector<Op>> before_, after_;  // communication placed around each op
};

}  // namespace

Trace shard_over_dp(Trace step, const ParallelSettings& settings, std::vector<std::uint32_t> mb) {
  return Sharder(std::move(step), settings, std::move(mb)).run();
}

double parallel_op_estimate(const Trace& step, const ParallelSettings& settings) {
  double passes = 0, steps = 0;  // forward and backward ops; optimizer steps (one per parameter)
  for (const Op& op : step.ops) ++(op.phase == Phase::optimizer ? steps : passes);
  const double m = settings.micro_batches;
  double rank = m * passes + (m - 1) * steps + 2 * steps;  // accumulations; the steps and their buckets
  if (settings.zero == 3) rank += 2 * m * steps;         // at most a gather per parameter, twice
  // A pipeline's stages split the step; without symmetric ranks each of a stage's tp x dp
  // ranks is simulated.
  const double simulated =
      settings.symmetric ? 1.0 : static_cast<double>(settings.dp) * settings.cp * settings.tp;
  return rank * simulated;
}

void place_rank_groups(Trace& placed) {
  const Mesh mesh = Mesh::of(placed.parallel);
  std::map<std::pair<std::string, std::uint32_t>, std::string> instance;  // (group, rank) -> its name
  std::vector<ProcessGroup> groups;
  for (Op& op : placed.ops) {
    if (op.group.empty() || Mesh::dims_of(op.group).empty()) continue;
    const std::string kind(op.group);
    const auto made = instance.try_emplace({kind, op.device});
    std::string& name = made.first->second;
    if (made.second) {
      std::vector<std::uint32_t> ranks = mesh.group(kind, op.device);
      name = fmt::format("{}@{}", kind, ranks.front());
      if (std::none_of(groups.begin(), groups.end(), [&](const ProcessGroup& g) { return g.name == name; }))
        groups.push_back({name, std::move(ranks)});
    }
    op.group = name;
  }
  // Groups no op names (rank 0's, kept for the record) go; others stay as they were.
  for (ProcessGroup& g : placed.groups)
    if (Mesh::dims_of(g.name).empty()) groups.push_back(std::move(g));
  placed.groups = std::move(groups);
}

namespace {

// The data-parallel scheme without a pipeline (with one, the pipeline scheme runs the
// micro-batches and shards each stage over its data-parallel group itself).
Trace parallelize_data(const Trace& step, const ParallelSettings& settings) {
  for (const Op& op : step.ops)
    if (op.device != 0)
      throw InputError(fmt::format("{}: parallel needs a single-device step; op '{}' runs on device {}",
                                   step.name, op.name, op.device));
  std::vector<std::uint32_t> mb;
  Trace accumulated = accumulate(step, settings.micro_batches, mb, settings.fused_accumulation);
  Trace out;
  if (settings.weight_replicas() <= 1) {
    out = std::move(accumulated);
    if (settings.tp <= 1) {
      out.description = fmt::format("{}, {} micro-batches", step.description.empty() ? step.name : step.description,
                                    settings.micro_batches);
      return out;
    }
    out.parallel = ParallelLayout{};
    out.parallel.ranks = settings.tp;
    out.parallel.symmetric = settings.symmetric;
    out.parallel.summary = parallel_summary(settings);
    out.parallel.tp = settings.tp;
  } else {
    out = Sharder(std::move(accumulated), settings, std::move(mb)).run();
  }
  // The model generator split the layers and named the groups; their ranks are rank 0's
  // tensor-parallel peers and its expert-parallel peers (the first ep ranks of its
  // data-parallel group).
  const Mesh mesh = Mesh::of(settings);
  if (settings.tp > 1) out.groups.push_back({"tp", mesh.group("tp", 0)});
  if (settings.cp > 1) out.groups.push_back({"cp", mesh.group("cp", 0)});
  if (settings.ep > 1) out.groups.push_back({"ep", mesh.group("ep", 0)});
  out.description = fmt::format("{}, {}", step.description.empty() ? step.name : step.description,
                                out.parallel.summary);
  return out;
}

}  // namespace

ParallelScheme data_parallel_scheme() {
  return {"data",
          "data parallelism and gradient accumulation: PyTorch DDP's bucketed all-reduce, DeepSpeed ZeRO 1-3 and "
          "FSDP over dp ranks, micro-batches accumulated before one reduction and one optimizer step (with pp, "
          "the pipeline runs them on each stage)",
          {{"dp", "data-parallel ranks: the step is one of dp, each on its own device", "1"},
           {"zero", "0 DDP (all-reduce), 1 optimizer state sharded, 2 and gradients, 3 and parameters (FSDP's full "
                    "shard)", "0"},
           {"bucket", "gradient bucket: DDP's bucket_cap_mb (its first bucket is 1 MiB), ZeRO-1/2's reduce and "
                      "all-gather bucket", "25MiB"},
           {"bucket_view", "zero 0: gradients are views into the buckets (gradient_as_bucket_view), no bucket "
                           "memory", "false"},
           {"ddp", "overlapped: gradients reduced in buckets as the backward makes them (PyTorch DDP, ZeRO 1-2); "
                   "local: Megatron-LM's --DDP-impl local, one reduction of the whole contiguous gradient buffer "
                   "after the backward, not overlapped (zero 0-2)", "overlapped"},
           {"overlap_param_gather", "zero 1-2: the updated weight shards are all-gathered before each bucket's first "
                                    "use in the forward, overlapping it (Megatron's --overlap-param-gather), not "
                                    "after the optimizer step", "false"},
           {"prefetch", "zero 3: the next unit's all-gather starts when the current unit starts (false: when it "
                        "ends)", "true"},
           {"reshard_after_forward", "zero 3: free a unit's gathered parameters after its forward and gather them "
                                     "again for backward", "true"},
           {"hsdp", "zero 3 as FSDP's HYBRID_SHARD: the model state sharded within groups of hsdp consecutive "
                    "data-parallel ranks (a node), replicated over the dp / hsdp groups; gradients reduce-scattered "
                    "within the group, then all-reduced across; 0: sharded over all dp (FULL_SHARD)", "0"},
           {"micro_batches", "gradient accumulation: forward and backward passes of the batch per optimizer step",
            "1"},
           {"global_batch", "samples per optimizer step over all ranks (0: batch x micro_batches x dp); sets "
                            "micro_batches to global_batch / (batch x dp), rounded up", "0"},
           {"fused_accumulation", "micro-batches add their weight gradients into .grad inside the backward op "
                                  "(Megatron's gradient_accumulation_fusion), not through a gradient of their own "
                                  "and an accumulate_grad", "false"}},
          [](const ParallelSettings& s, const Params&) {
            return s.pp <= 1 && (s.weight_replicas() > 1 || s.micro_batches > 1 || s.tp > 1 || s.ep > 1);
          },
          [](const Trace& step, const ParallelSettings& s, const Params&) { return parallelize_data(step, s); }};
}

}  // namespace memsim
