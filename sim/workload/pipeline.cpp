#include "sim/workload/pipeline.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/parallel/mesh.h"
#include "sim/parallel/scheme.h"

namespace memsim {

std::vector<MicroBatchBlock> pipeline_order(PipelineSchedule schedule, std::uint32_t stages, std::uint32_t stage,
                                            std::uint32_t m, std::uint32_t chunks) {
  std::vector<MicroBatchBlock> order;
  if (schedule == PipelineSchedule::gpipe) {
    for (std::uint32_t k = 0; k < m; ++k) order.push_back({true, k, 0});
    for (std::uint32_t k = 0; k < m; ++k) order.push_back({false, k, 0});
    return order;
  }
  if (schedule == PipelineSchedule::one_f_one_b) {
    // Warm-up forwards, then one forward and one backward in turn, then the last backwards.
    const std::uint32_t warmup = std::min(stages - stage - 1, m);
    for (std::uint32_t k = 0; k < warmup; ++k) order.push_back({true, k, 0});
    for (std::uint32_t k = 0; k < m - warmup; ++k) {
      order.push_back({true, warmup + k, 0});
      order.push_back({false, k, 0});
    }
    for (std::uint32_t k = m - warmup; k < m; ++k) order.push_back({false, k, 0});
    return order;
  }
  // Megatron-LM's interleaved 1F1B: virtual micro-batch k is micro-batch
  // (k / (p v)) p + k mod p of chunk (k mod p v) / p (backward: the chunks in reverse), and
  // stage s warms up with 2 (p - s - 1) + (v - 1) p of them.
  if (m % stages != 0)
    throw ParallelKeyError({"micro_batches", "global_batch", "pp"},
                           fmt::format("the interleaved schedule runs micro-batches in groups of the {} stages; {} "
                                 "micro-batches are not a multiple of it",
                                 stages, m));
  const std::uint32_t total = m * chunks, group = stages * chunks;
  const std::uint32_t warmup = std::min(total, 2 * (stages - stage - 1) + (chunks - 1) * stages);
  auto block = [&](std::uint32_t k, bool forward) {
    const std::uint32_t chunk = (k % group) / stages;
    return MicroBatchBlock{forward, (k / group) * stages + k % stages, forward ? chunk : chunks - 1 - chunk};
  };
  for (std::uint32_t k = 0; k < warmup; ++k) order.push_back(block(k, true));
  for (std::uint32_t k = 0; k < total - warmup; ++k) {
    order.push_back(block(warmup + k, true));
    order.push_back(block(k, false));
  }
  for (std::uint32_t k = total - warmup; k < total; ++k) order.push_back(block(k, false));
  return order;
}

namespace {

constexpr std::uint32_t kNone = 0xffffffffu;

class Pipeliner {
 public:
  Pipeliner(const Trace& step, const ParallelSettings& s) : in_(step), s_(s), mesh_(Mesh::of(s)) {}

  Trace run() {
    assign_chunks();
    find_crossings();
    return place();
  }

 private:
  std::uint32_t chunks() const { return s_.pp * s_.virtual_stages; }
  std::uint32_t stage_of(std::uint32_t chunk) const { return chunk % s_.pp; }
  // Whether a tensor of `bytes` crosses as 1/tp from each tp rank, gathered on arrival: with
  // scatter_gather_, when it splits evenly (Megatron sends the whole tensor otherwise; it
  // counts elements, memsim the bytes).
  bool scattered(std::uint64_t bytes) const { return scatter_gather_ && bytes % s_.tp == 0; }

  // Each layer's chunk: an even split, or the first and last stage's counts given
  // and the rest shared evenly by the other stages.
  std::vector<std::uint32_t> split_layers(std::uint32_t layers) const {
    const std::uint32_t first = s_.first_stage_layers, last = s_.last_stage_layers;
    std::vector<std::uint32_t> count(chunks(), 0);
    if (first == 0 && last == 0) {
      if (layers % chunks() != 0)
        throw ParallelKeyError({"pp", "virtual_stages"},
                               fmt::format("{}: its {} layers do not split evenly into {} pipeline stage(s){}", in_.name,
                                           layers, s_.pp,
                                           s_.virtual_stages > 1 ? fmt::format(" of {} chunks each", s_.virtual_stages)
                                                                 : std::string()));
      std::fill(count.begin(), count.end(), layers / chunks());
    } else {
      const std::uint32_t others = s_.pp - (first > 0) - (last > 0);
      const std::uint64_t given = std::uint64_t{first} + last;
      const std::uint64_t rest = given < layers ? layers - given : 0;
      const std::string what = fmt::format(
          "{}: {} layers, {} on the first stage and {} on the last", in_.name, layers,
          first > 0 ? std::to_string(first) : "the even share", last > 0 ? std::to_string(last) : "the even share");
      const std::vector<std::string> keys{first > 0 ? "first_stage_layers" : "last_stage_layers"};
      if (others == 0 && given != layers)
        throw ParallelKeyError(keys, fmt::format("{}: with pp {} those are all the stages, expected {} in all", what,
                                                 s_.pp, layers));
      if (others > 0 && (rest == 0 || rest % others != 0))
        throw ParallelKeyError(keys, fmt::format("{}, leave {} for the other {} stage(s): expected a positive multiple "
                                                 "of {} (the same on each)",
                                                 what, rest == 0 ? std::string("none") : std::to_string(rest), others,
                                                 others));
      const auto share = static_cast<std::uint32_t>(others > 0 ? rest / others : 0);
      std::fill(count.begin(), count.end(), share);
      if (first > 0) count.front() = first;
      if (last > 0) count.back() = last;
    }
    std::vector<std::uint32_t> chunk_of;
    for (std::uint32_t c = 0; c < count.size(); ++c) chunk_of.insert(chunk_of.end(), count[c], c);
    return chunk_of;
  }

  // Each op's model chunk: its layer's, else the chunk of the layer before it (forward: the
  // first chunk before any layer; backward: the last chunk before any layer's backward).
  void assign_chunks() {
    // The layers in the order the forward first runs them.
    std::vector<std::uint32_t> index(in_.units.size(), kNone);
    std::uint32_t layers = 0;
    auto layer_of = [&](const Op& op) {
      return op.unit != kNoUnit && in_.units.at(op.unit).layer ? op.unit : kNoUnit;
    };
    for (const Op& op : in_.ops)
      if (op.phase == Phase::forward)
        if (const UnitId u = layer_of(op); u != kNoUnit && index[u] == kNone) index[u] = layers++;
    if (layers == 0)
      throw ParallelKeyError({"pp"}, fmt::format("{}: pipeline parallelism splits a model by its layers (transformer "
                                   "blocks, residual blocks), and no op of this model belongs to one",
                                   in_.name));
    const std::vector<std::uint32_t> chunk_of_layer = split_layers(layers);
    chunk_.assign(in_.ops.size(), kNone);
    std::uint32_t forward = 0, backward = chunks() - 1;
    for (const Op& op : in_.ops) {
      if (op.phase == Phase::optimizer) continue;
      std::uint32_t& current = op.phase == Phase::forward ? forward : backward;
      if (const UnitId u = layer_of(op); u != kNoUnit && index[u] != kNone) current = chunk_of_layer[index[u]];
      chunk_[op.id] = current;
    }
    // Which stages use each buffer outside the optimizer, and which write it.
    users_.assign(in_.buffers.size(), {});
    std::vector<std::set<std::uint32_t>> writers(in_.buffers.size());
    for (const Op& op : in_.ops) {
      if (op.phase == Phase::optimizer) continue;
      const std::uint32_t d = stage_of(chunk_[op.id]);
      for (const auto* list : {&op.inputs, &op.outputs, &op.updates})
        for (BufferId b : *list) users_[b].insert(d);
      for (const auto* list : {&op.outputs, &op.updates})
        for (BufferId b : *list) writers[b].insert(d);
    }
    // A parameter's gradient that several stages add to (a tied embedding's: the head's part
    // on the last stage, the embedding's on the first) is each stage's own, accumulated over
    // its micro-batches and all-reduced once over those stages before the optimizer steps
    // (Megatron's embedding group, _allreduce_embedding_grads), never sent stage to stage.
    for (const Op& op : in_.ops)
      if (op.phase == Phase::optimizer)
        for (BufferId b : op.inputs)
          if (in_.buffers[b].category == Category::gradient && writers[b].size() > 1 && !shared_grad_.count(b))
            shared_grad_.emplace(b, std::vector<std::uint32_t>(writers[b].begin(), writers[b].end()));
    // Readers of each buffer, for shared_grad_start(): a part only the add reads can be stolen.
    if (!shared_grad_.empty()) {
      reads_.assign(in_.buffers.size(), 0);
      for (const Op& op : in_.ops)
        for (BufferId b : op.reads()) ++reads_[b];
    }
  }

  // A buffer written on one stage and then used on another: sent after that last write,
  // received before the use. The writer is the last one, not the maker: a gradient that
  // residual connections accumulate in place is made by the last layer and updated by every
  // layer before it, so each stage sends on what the stage after it sent and it added to.
  // A stage that received a buffer holds that version until another stage writes it again:
  // the gradient of the residual stream under the interleaved schedule comes back to a stage
  // once per chunk it holds, and is received each time.
  void find_crossings() {
    std::vector<OpId> last_write(in_.buffers.size(), kNoOp);
    std::map<std::pair<BufferId, std::uint32_t>, OpId> holds;  // (buffer, stage) -> the write it received
    for (const Op& op : in_.ops) {
      if (op.phase == Phase::optimizer) continue;
      const std::uint32_t d = stage_of(chunk_[op.id]);
      for (const auto* list : {&op.inputs, &op.updates})
        for (BufferId b : *list) {
          const OpId last = last_write[b];
          if (last == kNoOp) continue;  // resident at the start (an input, a weight): each stage holds it
          if (shared_grad_.count(b)) continue;  // each stage's own, reduced before the step
          const std::uint32_t from = stage_of(chunk_[last]);
          if (from == d) continue;
          const auto [held, fresh] = holds.try_emplace({b, d}, last);
          if (!fresh && held->second == last) continue;
          held->second = last;
          // A group of its own (a stream of its own on each side): sends and receives of
          // different tensors between the same stages need not come in the same order.
          const std::string group = fmt::format("pp.{}>{}:{}", chunk_[last], chunk_[op.id], in_.buffers[b].name);
          crossing_[{b, op.id}] = Crossing{from, d, group};
          sends_after_[last].push_back({b, op.id});
          recvs_before_[op.id].push_back({b, op.id});
        }
      for (const auto* list : {&op.outputs, &op.updates})
        for (BufferId b : *list) last_write[b] = op.id;
    }
  }

  // What place() puts before the names of stage `stage`'s ops and buffers on rank `r`.
  std::string name_prefix(std::uint32_t stage, std::uint32_t r) const {
    return s_.symmetric ? fmt::format("stage{}:", stage) : fmt::format("rank{}:", r);
  }
  // Its length at most, for the names stage_step() makes (the last rank's is the longest).
  std::size_t prefix_room(std::uint32_t stage) const { return name_prefix(stage, mesh_.size() - 1).size(); }

  // Stage d's step: its ops (and the sends and receives between stages) for one micro-batch,
  // then the schedule's micro-batches, then data parallelism.
  Trace stage_step(std::uint32_t d) {
    Trace t;
    t.name = in_.name;
    t.units = in_.units;
    t.description = in_.description;
    t.parameters = in_.parameters;
    t.samples = in_.samples;
    t.sample_tokens = in_.sample_tokens;
    std::vector<BufferId> id(in_.buffers.size(), kNoOp);
    const SharedGradStart start = shared_grad_start(d);
    auto buffer = [&](BufferId b) {
      if (const auto it = start.stolen.find(b); it != start.stolen.end()) b = it->second;
      if (id[b] == kNoOp) {
        const Buffer& orig = in_.buffers[b];
        id[b] = t.add_buffer(orig.name, orig.bytes, orig.category, orig.persistent);
      }
      return id[b];
    };
    std::map<BufferId, BufferId> received;  // on this stage, the received copy of a buffer
    std::vector<std::uint32_t> chunk_of;    // per op of t: its chunk on this stage
    auto local = [&](BufferId b) {
      const auto it = received.find(b);
      return it != received.end() ? it->second : buffer(b);
    };
    auto add = [&](Op op, std::uint32_t chunk) {
      chunk_of.push_back(chunk / s_.pp);
      t.add_op(std::move(op));
    };
    std::vector<OpId> new_id(in_.ops.size(), kNoOp);
    for (const Op& orig : in_.ops) {
      if (orig.phase == Phase::optimizer) continue;
      const std::uint32_t chunk = chunk_[orig.id];
      if (auto it = recvs_before_.find(orig.id); it != recvs_before_.end() && stage_of(chunk) == d)
        for (const auto& [b, use] : it->second) {
          const Buffer& src = in_.buffers[b];
          // Interleaved, a buffer may come to a stage once per chunk it holds: named by chunk.
          const std::string name =
              s_.virtual_stages > 1 ? fmt::format("{}.recv.{}", src.name, chunk) : src.name + ".recv";
          const BufferId copy = t.add_buffer(name, src.bytes, src.category, false);
          received[b] = copy;
          Op recv;
          recv.name = name;
          recv.kind = "recv";
          recv.phase = orig.phase;
          recv.dtype = orig.dtype;
          // Scattered: this rank's 1/tp of the tensor, then the whole of it gathered from the tp group.
          const bool split = scattered(src.bytes);
          recv.message_bytes = split ? src.bytes / s_.tp : src.bytes;
          recv.outputs = {split ? t.add_buffer(name + ".part", recv.message_bytes, src.category, false) : copy};
          recv.group = crossing_.at({b, use}).group;
          Op gather;
          if (split) {
            gather.name = name + ".gather";
            gather.kind = "all_gather";
            gather.phase = orig.phase;
            gather.dtype = orig.dtype;
            gather.inputs = recv.outputs;
            gather.outputs = {copy};
            gather.message_bytes = src.bytes;
            gather.group = "tp";
          }
          add(std::move(recv), chunk);
          if (split) add(std::move(gather), chunk);
        }
      if (stage_of(chunk) == d && !start.dropped.count(orig.id)) {
        Op op = orig;
        if (const auto it = start.made_by.find(orig.id); it != start.made_by.end()) {
          // The first write of a shared gradient on this stage makes it.
          erase(op.updates, it->second);
          erase(op.inputs, it->second);
          op.outputs.push_back(it->second);
        }
        for (BufferId& b : op.inputs) b = local(b);
        for (BufferId& b : op.updates) b = local(b);
        for (BufferId& b : op.outputs) b = buffer(b);
        for (OpId& w : op.waits_for) w = new_id[w];
        erase(op.waits_for, kNoOp);
        new_id[orig.id] = static_cast<OpId>(t.ops.size());
        add(std::move(op), chunk);
      }
      if (auto it = sends_after_.find(orig.id); it != sends_after_.end() && stage_of(chunk) == d)
        for (const auto& [b, use] : it->second) {
          const Crossing& c = crossing_.at({b, use});
          Op send;
          send.name = s_.virtual_stages > 1
                          ? fmt::format("{}.send.{}.{}", in_.buffers[b].name, c.to, chunk_[use])
                          : fmt::format("{}.send.{}", in_.buffers[b].name, c.to);
          send.kind = "send";
          send.phase = orig.phase;
          send.dtype = orig.dtype;
          send.inputs = {local(b)};
          const std::uint64_t bytes = in_.buffers[b].bytes;
          send.message_bytes = scattered(bytes) ? bytes / s_.tp : bytes;
          send.group = c.group;
          add(std::move(send), chunk);
        }
    }
    // The optimizer steps of the parameters this stage uses, on the gradient it has.
    for (const Op& orig : in_.ops) {
      if (orig.phase != Phase::optimizer || orig.updates.empty() || !users_[orig.updates[0]].count(d)) continue;
      for (BufferId b : orig.inputs)
        if (const auto it = shared_grad_.find(b); it != shared_grad_.end()) {
          Op reduce;
          reduce.name = in_.buffers[b].name + ".all_reduce";
          reduce.kind = "all_reduce";
          reduce.phase = Phase::optimizer;
          reduce.dtype = orig.dtype;
          reduce.updates = {local(b)};
          reduce.message_bytes = in_.buffers[b].bytes;
          reduce.group = shared_group(b);
          add(std::move(reduce), 0);
        }
      Op op = orig;
      for (BufferId& b : op.inputs) b = local(b);
      for (BufferId& b : op.updates) b = local(b);
      op.waits_for.clear();
      add(std::move(op), 0);
    }
    // Groups by stage; place() names each rank's instance and its ranks.
    if (s_.ep > 1) t.groups.push_back({"ep", mesh_.group("ep", 0)});
    if (s_.tp > 1) t.groups.push_back({"tp", mesh_.group("tp", 0)});
    if (s_.cp > 1) t.groups.push_back({"cp", mesh_.group("cp", 0)});
    for (const auto& [key, c] : crossing_)
      if (c.from == d || c.to == d) t.groups.push_back({c.group, {c.from, c.to}});
    for (const auto& [b, holders] : shared_grad_)
      if (std::find(holders.begin(), holders.end(), d) != holders.end()) t.groups.push_back({shared_group(b), holders});
    validate(t, fmt::format("{} (pipeline stage {})", in_.name, d));

    const std::vector<MicroBatchBlock> order =
        pipeline_order(s_.schedule, s_.pp, d, s_.micro_batches, s_.virtual_stages);
    std::vector<std::uint32_t> mb;
    Trace run = run_micro_batches(t, order, s_.micro_batches, mb, chunk_of, s_.fused_accumulation,
                                  s_.schedule == PipelineSchedule::interleaved, prefix_room(d));
    if (s_.weight_replicas() > 1) run = shard_over_dp(std::move(run), s_, std::move(mb));
    return run;
  }

  // The stages' steps on their ranks: each simulated rank's copy with its groups' ranks.
  // A stage is built when its first rank is placed and freed after its last, so that the
  // next stage is built in the memory it leaves: the whole step and every stage's own copy
  // are never held at once (each page a run faults in is time on a virtual machine).
  Trace place() {
    const std::uint32_t ranks = mesh_.size();
    Trace out;
    out.name = in_.name;
    out.description = in_.description;
    out.parameters = in_.parameters;
    out.sample_tokens = in_.sample_tokens;
    out.parallel = ParallelLayout{};
    out.parallel.ranks = ranks;
    out.parallel.symmetric = s_.symmetric;
    out.parallel.summary = parallel_summary(s_);
    out.parallel.speaker.assign(ranks, 0);
    // Symmetric: the first rank of each stage stands for the stage's tp x dp ranks.
    const std::vector<std::string_view>& in_stage = Mesh::stage_dims();
    std::vector<std::uint32_t> simulated;
    for (std::uint32_t stage = 0; stage < s_.pp; ++stage) {
      const std::uint32_t first = mesh_.with(0, "pp", stage);
      if (s_.symmetric)
        simulated.push_back(first);
      else
        for (std::uint32_t r : mesh_.group(in_stage, first)) simulated.push_back(r);
    }
    for (std::uint32_t r = 0; r < ranks; ++r) out.parallel.speaker[r] = s_.symmetric ? mesh_.first(r, in_stage) : r;
    out.parallel.simulated = simulated;
    out.parallel.stages = s_.pp;
    out.parallel.schedule = std::string(to_string(s_.schedule));
    out.parallel.micro_batches = s_.micro_batches;
    out.parallel.tp = s_.tp;
    out.parallel.cp = s_.cp;
    out.parallel.dp = s_.dp;
    out.parallel.ep = s_.ep;
    out.parallel.dp_replicas = s_.dp_replicas();
    std::set<std::string> defined;
    std::vector<std::uint32_t> uses(s_.pp, 0);  // per stage: the simulated ranks still to place
    for (const std::uint32_t r : simulated) ++uses[mesh_.coord(r, "pp")];
    // The simulated ranks come stage by stage (the mesh's stage is its outermost dimension).
    Trace t;
    std::uint32_t built = s_.pp;  // the stage t holds (none yet)
    for (const std::uint32_t r : simulated) {
      const std::uint32_t stage = mesh_.coord(r, "pp");
      if (stage != built) {
        t = stage_step(stage);
        if (built == s_.pp) {
          out.samples = t.samples;  // its micro-batches'
          // Room for every rank's ops and buffers from the first stage's count, the stages
          // differing by a few layers at most (a reservation only takes address space: its
          // pages are faulted in as they are filled, and a larger step grows as vectors do).
          const std::size_t n = simulated.size();
          out.ops.reserve(t.ops.size() * n + t.ops.size() * n / 4);
          out.buffers.reserve(t.buffers.size() * n + t.buffers.size() * n / 4);
        }
        built = stage;
      }
      const std::string prefix = name_prefix(stage, r);
      // This rank's instance of each group of its stage's step: a mesh group named by its
      // first rank, or a point-to-point group between stages (its ranks are the stages).
      std::map<std::string, std::string> group_name;
      for (const ProcessGroup& g : t.groups) {
        ProcessGroup placed;
        if (!Mesh::dims_of(g.name).empty()) {
          placed.ranks = mesh_.group(g.name, r);
          placed.name = fmt::format("{}@{}", g.name, placed.ranks.front());
        } else {
          const std::uint32_t dp =
              mesh_.coord(r, "ep") + s_.ep * (mesh_.coord(r, "edp") + mesh_.size("edp") * mesh_.coord(r, "hdp"));
          // dp.tp, or dp.cp.tp with context parallelism: one name per rank of the stage.
          placed.name = s_.cp > 1 ? fmt::format("{}@{}.{}.{}", g.name, dp, mesh_.coord(r, "cp"), mesh_.coord(r, "tp"))
                                  : fmt::format("{}@{}.{}", g.name, dp, mesh_.coord(r, "tp"));
          for (std::uint32_t st : g.ranks) placed.ranks.push_back(mesh_.with(r, "pp", st));
        }
        group_name[g.name] = placed.name;
        if (defined.insert(placed.name).second) out.groups.push_back(std::move(placed));
      }
      // The stage's last rank takes its ops (a symmetric run's only one).
      if (--uses[stage] == 0)
        append_on_device(out, std::move(t), prefix, r, group_name);
      else
        append_on_device(out, t, prefix, r, group_name);
    }
    out.description = fmt::format("{}, {}", in_.description.empty() ? in_.name : in_.description, out.parallel.summary);
    return out;
  }

  // How stage d comes to hold its own copy of each shared gradient that is made in the step
  // (not resident): where its first write there adds a part into it (accumulate_grad, as
  // the second user of a tied weight does), the part is the gradient, as PyTorch's
  // AccumulateGrad steals a gradient into an empty .grad (`stolen`: part -> gradient; the
  // add `dropped`); any other first write that updates it makes it instead (`made_by`).
  struct SharedGradStart {
    std::map<BufferId, BufferId> stolen;
    std::set<OpId> dropped;
    std::map<OpId, BufferId> made_by;
  };
  SharedGradStart shared_grad_start(std::uint32_t d) const {
    SharedGradStart start;
    if (shared_grad_.empty()) return start;
    std::set<BufferId> written;
    for (const Op& op : in_.ops) {
      if (op.phase == Phase::optimizer || stage_of(chunk_[op.id]) != d) continue;
      for (const auto* list : {&op.outputs, &op.updates})
        for (BufferId g : *list) {
          if (!shared_grad_.count(g) || in_.buffers[g].persistent || !written.insert(g).second) continue;
          if (list == &op.outputs) continue;  // made here already
          const bool steal = op.kind == "accumulate_grad" && op.inputs.size() == 1 && op.updates.size() == 1 &&
                             op.outputs.empty() && reads_[op.inputs[0]] == 1 &&
                             in_.buffers[op.inputs[0]].producer != kNoOp &&
                             stage_of(chunk_[in_.buffers[op.inputs[0]].producer]) == d;
          if (steal) {
            start.stolen.emplace(op.inputs[0], g);
            start.dropped.insert(op.id);
          } else {
            start.made_by.emplace(op.id, g);
          }
        }
    }
    return start;
  }

  // The group over which the stages holding shared gradient `b` reduce it.
  std::string shared_group(BufferId b) const { return "pp.shared:" + in_.buffers[b].name; }

  struct Crossing {
    std::uint32_t from;  // the stage that makes it
    std::uint32_t to;    // the stage that reads it
    std::string group;   // its point-to-point group
  };

  const Trace& in_;
  const ParallelSettings& s_;
  const Mesh mesh_;
  // Megatron's scatter-gather of the pipeline's tensors: only where the tp ranks hold the
  // whole tensor (with sp each already holds 1/tp of the tokens).
  const bool scatter_gather_ = s_.scatter_gather && s_.tp > 1 && !s_.sp;
  std::vector<std::uint32_t> chunk_;          // per op of in_: its model chunk
  std::vector<std::set<std::uint32_t>> users_;  // per buffer: the stages that use it
  std::map<BufferId, std::vector<std::uint32_t>> shared_grad_;  // gradient -> the stages adding to it
  std::vector<std::uint32_t> reads_;  // per buffer: the ops reading it (with shared gradients only)
  std::map<std::pair<BufferId, OpId>, Crossing> crossing_;  // (buffer, its first use there)
  std::map<OpId, std::vector<std::pair<BufferId, OpId>>> sends_after_, recvs_before_;
};

}  // namespace

Trace pipeline(const Trace& step, const ParallelSettings& settings) {
  for (const Op& op : step.ops)
    if (op.device != 0)
      throw InputError(fmt::format("{}: parallel needs a single-device step; op '{}' runs on device {}",
                                   step.name, op.name, op.device));
  return Pipeliner(step, settings).run();
}

ParallelScheme pipeline_scheme() {
  return {"pipeline",
          "pipeline parallelism: the layers split over pp stages on different devices, activations and their "
          "gradients sent between them, micro-batches in GPipe, 1F1B or Megatron's interleaved order",
          {{"pp", "pipeline stages: the layers split evenly over pp devices, activations and their gradients sent "
                  "between them (PP outermost: rank = tp_rank + tp x (dp_rank + dp x stage))", "1"},
           {"schedule", "pipeline schedule: gpipe, 1f1b (PipeDream-Flush) or interleaved (Megatron's, over "
                        "virtual_stages chunks per device)", "1f1b"},
           {"virtual_stages", "interleaved: model chunks per device", "1"},
           {"first_stage_layers", "layers on the first pipeline stage, the other stages sharing the rest evenly "
                                  "(Megatron's --decoder-first-pipeline-num-layers); 0: the even share", "0"},
           {"last_stage_layers", "layers on the last pipeline stage (--decoder-last-pipeline-num-layers); 0: the "
                                 "even share", "0"},
           {"scatter_gather", "pipeline sends with tp > 1 and no sp: each tensor-parallel rank sends 1/tp of the "
                              "tensor and the receiving stage all-gathers it over its tp group (Megatron-LM's "
                              "scatter_gather_tensors_in_pipeline); false: every rank sends the whole tensor", "false"}},
          [](const ParallelSettings& s, const Params&) { return s.pp > 1; },
          [](const Trace& step, const ParallelSettings& s, const Params&) { return pipeline(step, s); }};
}

}  // namespace memsim
