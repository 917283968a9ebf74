#pragma once
// The training step as data: buffers (units of memory) and ops (units of work) in issue
// order. Everything downstream — planning passes, the engine, the reports — reads a Trace.
//
// A Buffer is one allocation (a PyTorch storage): views and aliases share it, so memory is
// counted per buffer. An Op reads `inputs`, creates `outputs` (allocated just before it runs)
// and may overwrite some existing buffers in place (`updates`: an in-place ReLU, an
// optimizer step writing the weights). Data dependencies form a DAG; validate() proves it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/interned.h"
#include "sim/core/small_vec.h"

namespace memsim {

using BufferId = std::uint32_t;  // index into Trace::buffers
using OpId = std::uint32_t;      // index into Trace::ops (issue order)
inline constexpr OpId kNoOp = std::numeric_limits<OpId>::max();
using UnitId = std::uint32_t;    // index into Trace::units
inline constexpr UnitId kNoUnit = std::numeric_limits<UnitId>::max();

/// A module the parallel schemes treat as a whole (Trace::units): ZeRO-3 / FSDP gathers a
/// unit's weights together and reduce-scatters its gradients together; pipeline parallelism
/// splits a model between its layers, the units marked `layer`.
struct ModelUnit {
  std::string name;    // "model.layers.3", "lm_head"
  bool layer = false;  // one of the model's repeated layers (transformer or residual blocks)
};

/// What a buffer holds, for the per-category memory split.
enum class Category : std::uint8_t {
  weight,           // parameters (and fp32 master copies)
  gradient,         // gradients of the parameters
  optimizer_state,  // momentum, Adam moments
  activation,       // forward outputs, kept for backward until their last use
  activation_grad,  // gradients flowing back through the activations
  input,            // the mini-batch: samples and labels
  workspace,        // per-op scratch (also the category of Op::workspace_bytes)
  other,
  comm,             // communication buffers: DDP's buckets, FSDP's gathered parameters
  runtime,          // memory outside the allocator: the CUDA context, NCCL's channel buffers
};
inline constexpr int kCategoryCount = 10;
std::string_view to_string(Category c);
std::optional<Category> category_from_string(std::string_view s);

enum class Phase : std::uint8_t { forward, backward, optimizer };
std::string_view to_string(Phase p);
std::optional<Phase> phase_from_string(std::string_view s);

enum class DType : std::uint8_t { fp32, tf32, fp16, bf16, fp8, int64, int32, int8, boolean };
inline constexpr int kDTypeCount = 9;
std::string_view to_string(DType d);
std::optional<DType> dtype_from_string(std::string_view s);
/// Bytes per element (tf32 is stored as fp32).
int dtype_bytes(DType d);

// Fields ordered so that no padding is left: a step of a million layers holds four million
// buffers and ops, so each byte of either is four megabytes.
struct Buffer {
  BufferId id = 0;
  OpId producer = kNoOp;    // kNoOp: resident when the iteration starts
  std::uint32_t device = 0; // compute device whose memory holds it when the iteration starts
  Category category = Category::other;
  bool persistent = false;  // lives across iterations (weights, optimizer state)
  std::uint64_t bytes = 0;
  std::string name;
};

/// The buffers an op reads, walked in place: its inputs, then its updates (see Op::reads()).
class OpReads {
 public:
  class iterator {
   public:
    using value_type = BufferId;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    BufferId operator*() const {
      return at_ < inputs_.size() ? inputs_[at_] : updates_[at_ - inputs_.size()];
    }
    iterator& operator++() {
      ++at_;
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++at_;
      return before;
    }
    bool operator==(const iterator& other) const { return at_ == other.at_; }

   private:
    friend class OpReads;
    iterator(std::span<const BufferId> inputs, std::span<const BufferId> updates, std::size_t at)
        : inputs_(inputs), updates_(updates), at_(at) {}
    std::span<const BufferId> inputs_, updates_;
    std::size_t at_ = 0;
  };

  OpReads(std::span<const BufferId> inputs, std::span<const BufferId> updates)
      : inputs_(inputs), updates_(updates) {}
  iterator begin() const { return {inputs_, updates_, 0}; }
  iterator end() const { return {inputs_, updates_, size()}; }
  std::size_t size() const { return inputs_.size() + updates_.size(); }
  bool empty() const { return size() == 0; }

 private:
  std::span<const BufferId> inputs_, updates_;
};

/// A duration that may be absent, in 8 bytes (std::optional<double> takes 16): absent is a
/// NaN, which no measured duration is. Reads like an optional.
class MaybeSeconds {
 public:
  MaybeSeconds() = default;
  MaybeSeconds(std::nullopt_t) {}  // NOLINT: implicit, as an optional's
  MaybeSeconds(double s) : s_(s) {}  // NOLINT
  bool has_value() const { return !std::isnan(s_); }
  explicit operator bool() const { return has_value(); }
  double operator*() const { return s_; }
  double value_or(double other) const { return has_value() ? s_ : other; }
  void reset() { s_ = std::numeric_limits<double>::quiet_NaN(); }

 private:
  double s_ = std::numeric_limits<double>::quiet_NaN();
};

struct Op {
  OpId id = 0;
  std::uint32_t device = 0;  // index of the compute device in the platform
  /// The module it runs for (Trace::units), as the model's generator or the trace's module
  /// paths say: what ZeRO-3's gathers and the pipeline's split go by, never the op's name.
  UnitId unit = kNoUnit;
  std::uint16_t stream = 0;  // up to 65,535 per device (a trace file's `stream`)
  Phase phase = Phase::forward;
  DType dtype = DType::fp32;
  std::string name;
  Interned kind;  // conv2d, matmul, relu, batch_norm, sgd_step, ...
  // Up to two ids each without a heap block (SmallVec): most ops read two buffers, make one
  // and update at most one.
  SmallVec<BufferId, 2> inputs;   // read
  SmallVec<BufferId, 2> outputs;  // created by this op
  SmallVec<BufferId, 2> updates;  // existing buffers overwritten in place
  double flops = 0;
  double bytes_moved = 0;  // bytes read and written in the compute tier
  std::uint64_t workspace_bytes = 0;     // transient, freed right after the op
  MaybeSeconds measured_s;               // a duration measured on real hardware
  // Communication ops (kind all_reduce, all_gather, ...): the message and who takes part.
  /// The whole tensor the collective works on, per rank: an all-reduce's buffer, an
  /// all-gather's gathered output, a reduce-scatter's unreduced input; a send's message.
  std::uint64_t message_bytes = 0;
  /// The process group, by name: one of Trace::groups (then the engine runs it over the
  /// group's devices), or an imported group it knows only by name ("0 (default_pg)").
  Interned group;
  /// Ops on other streams this one waits for (a CUDA event): FSDP's all-gather of the next
  /// layer waits until the current layer starts, so that prefetching stays one layer ahead.
  SmallVec<OpId, 2> waits_for;

  /// What the op reads: `inputs`, then `updates` (an in-place target is read too).
  OpReads reads() const { return {inputs, updates}; }
};

/// A copy of `op` but for its name, which is `name` (built once at its final size by a pass
/// that renames every op it copies: the name of the copy is not made only to be replaced).
/// Lists every field of Op: one added there and not here is a -Wmissing-field-initializers
/// warning.
inline Op with_name(const Op& op, std::string name) {
  return Op{op.id,        op.device,   op.unit,          op.stream,     op.phase,         op.dtype,
            std::move(name), op.kind,  op.inputs,        op.outputs,    op.updates,       op.flops,
            op.bytes_moved, op.workspace_bytes, op.measured_s, op.message_bytes, op.group, op.waits_for};
}

/// A process group: the compute devices (as Op::device numbers them) a collective runs over,
/// in ring order. In a rank's step (one device's trace) they are the ranks, which become
/// devices when the step is placed (combine_per_device).
struct ProcessGroup {
  std::string name;  // "dp"
  std::vector<std::uint32_t> ranks;
};

/// How a step is trained across devices (the workload's `parallel:` section), for the run
/// to lay it out: how many ranks, and whether one of them stands for all (symmetric ranks).
struct ParallelLayout {
  std::uint32_t ranks = 1;      // data-parallel ranks the step is one of
  bool symmetric = true;        // simulate rank 0 only, with its peers' traffic on the links
  std::string summary;          // "dp 8, zero 3" for the description
  /// Imported: the ranks are the trace's process groups, not a request; on a platform with
  /// fewer devices the step runs alone and its collectives take the cost model's time.
  bool from_trace = false;
  /// A step already placed on its ranks (a pipeline's stages): the ranks whose ops the trace
  /// holds (Op::device is the rank), and for every rank the simulated one that stands for
  /// it. Empty: the trace is one rank's, for the run to place.
  std::vector<std::uint32_t> simulated;
  std::vector<std::uint32_t> speaker;
  /// A pipeline: its stages (rank / (ranks / stages) is a rank's stage), schedule and
  /// micro-batches.
  std::uint32_t stages = 1;
  std::string schedule;
  std::uint32_t micro_batches = 1;
  /// The tensor-, context-, data- and expert-parallel sizes: with the stages, the step's
  /// Mesh (sim/parallel/mesh.h: rank = tp_rank + tp x (cp_rank + cp x (dp_rank + dp x stage))).
  std::uint32_t tp = 1, cp = 1, dp = 1, ep = 1;
  /// HSDP (FSDP's hybrid shard): the data-parallel ranks in dp_replicas groups that each
  /// shard the model state over dp / dp_replicas of them; 1: one group (the Mesh's hdp).
  std::uint32_t dp_replicas = 1;
  /// Where the rank count was asked for: the location of each parallel key that multiplies
  /// to it ("w.yaml:4:7: parallel.dp", "--set parallel.pp=3: parallel.pp"), for messages
  /// about the ranks; empty for a step whose ranks no key set (an imported trace's).
  std::string origin;
};

struct Trace {
  std::string name;                  // "resnet50"
  std::string description;           // "resnet50 (batch 64, fp32, momentum)"
  std::string measured_on;           // platform name the ops' measured_s come from, if any
  std::uint64_t parameters = 0;      // trainable parameters, when the source knows (0: unknown)
  /// The samples one data-parallel replica's step trains on, its micro-batches' together
  /// (0: unknown, as in an imported trace), and the tokens of each: a sequence model's
  /// sequence length (0: not a sequence model, or unknown). Throughput is counted in these.
  std::uint64_t samples = 0;
  std::uint64_t sample_tokens = 0;
  /// What an importer could not use or chose on the user's behalf (a dropped op, a tensor
  /// without a size, the step it picked), one line each, for stderr and summary.json.
  std::vector<std::string> import_notes;
  std::vector<Buffer> buffers;
  std::vector<Op> ops;
  std::vector<ProcessGroup> groups;
  ParallelLayout parallel;
  /// The model's modules the parallel schemes treat as wholes (Op::unit).
  std::vector<ModelUnit> units;

  /// The group named `name`, or null.
  const ProcessGroup* find_group(const std::string& name) const;
  /// Whether some op communicates over a group the trace defines (then NCCL's buffers are
  /// reserved on its devices).
  bool communicates() const;
  /// Per op, where a file defines it ("trace.json:12:5: ops[3]"), for messages about the op;
  /// empty for generated traces.
  std::vector<std::string> op_sources;

  /// Everything but the ops: the same buffers, none of them produced yet (a pass that emits
  /// the ops anew, adding its own, starts from it).
  Trace without_ops() const;

  /// Appends a buffer and returns its id.
  BufferId add_buffer(std::string name, std::uint64_t bytes, Category category,
                      bool persistent = false);
  /// Appends an op, sets its id, and records it as the producer of its outputs.
  OpId add_op(Op&& op);  // moved in once (by value, an op was moved twice)
  OpId add_op(const Op& op) { return add_op(Op(op)); }

  std::uint64_t total_bytes(Category c) const;
};

/// Checks ids, that every output has exactly this op as producer, that no op reads a buffer
/// before it exists, and that the dependencies are acyclic (naming the cycle if not).
/// Where messages about op `id` start: the file, line and column defining it when the trace
/// was read from a file, else the trace's name.
std::string op_where(const Trace& trace, OpId id);

/// `source` prefixes the messages; `op_location`, when given, says where an op is defined
/// ("file:line:col: ops[3]") so a message about an op points at it. Throws InputError.
void validate(const Trace& trace, const std::string& source,
              const std::function<std::string(OpId)>& op_location = {});

/// Gives every op that has no unit the module its name is a path into (as PyTorch names
/// modules): the name up to its first numeric component, a layer
/// ("model.layers.3.mlp.down_proj" -> "model.layers.3"), or else its first component, not a
/// layer ("lm_head" -> "lm_head"); an optimizer step goes by the name of the weight it
/// updates, its parameter's module. For traces that do not say (a trace file, an importer's,
/// a hand-built one) and the ops a generator emits outside its layers; a unit a generator set
/// is kept. Units of the same name are one unit. A parameter's unit is its optimizer step's.
void assign_units_from_names(Trace& trace);

/// One trace per compute device, run side by side (data-parallel replicas, or different
/// workloads): buffers and ops are copied with their names prefixed by the device name
/// ("gpu3:layer1.0.conv1") and their ops placed on device k. Each input must be a
/// single-device trace (every op on device 0); throws InputError otherwise. `slots`, when
/// given, is each trace's compute-device index (a subset of the platform's devices, the rest
/// idle); by default trace k goes on device k.
Trace combine_per_device(const std::vector<Trace>& traces, const std::vector<std::string>& devices,
                         const std::vector<std::uint32_t>& slots = {});

/// Appends `t`'s buffers and ops to `out`, their names prefixed with `prefix`, every op and
/// buffer on compute device `device`, ids shifted past what `out` holds; an op's group is
/// renamed by `group_names` where it has an entry; units are not carried (the copies have
/// none). (combine_per_device and a pipeline's placement share it.) A Trace&& gives up its
/// ops (moved, not copied: the last rank placed from a stage's step).
void append_on_device(Trace& out, const Trace& t, const std::string& prefix, std::uint32_t device,
                      const std::map<std::string, std::string>& group_names = {});
void append_on_device(Trace& out, Trace&& t, const std::string& prefix, std::uint32_t device,
                      const std::map<std::string, std::string>& group_names = {});

/// When each buffer is live, in op indices.
/// A list of ids for each index (each op's buffers, say), in one block: offsets into one
/// flat vector, not a vector (and a heap block) per index.
class IdLists {
 public:
  IdLists() = default;
  /// For each of `owners` indices, the ids whose owner it is, in `ids` order: owner_of[k]
  /// (below `owners`) is ids[k]'s.
  IdLists(std::size_t owners, const std::vector<std::uint32_t>& owner_of, const std::vector<std::uint32_t>& ids);
  std::span<const std::uint32_t> operator[](std::size_t i) const {
    return {ids_.data() + at_[i], ids_.data() + at_[i + 1]};
  }
  std::size_t size() const { return at_.empty() ? 0 : at_.size() - 1; }

 private:
  std::vector<std::uint32_t> at_;  // index i's ids are ids_[at_[i], at_[i + 1])
  std::vector<std::uint32_t> ids_;
};

struct Liveness {
  /// Op index that creates the buffer; kNoOp when resident at the start.
  std::vector<OpId> first;
  /// Last op that reads or updates the buffer; kNoOp when nothing uses it after creation
  /// (its producer's output is then dead at once).
  std::vector<OpId> last_use;
  /// For each op, the non-persistent buffers whose last use it is, in id order.
  IdLists dies_after;
};
Liveness compute_liveness(const Trace& trace);

}  // namespace memsim
