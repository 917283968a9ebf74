#include "sim/workload/importers/pytorch_et.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/workload/importers/archive.h"
#include "sim/workload/importers/aten_cost.h"
#include "sim/workload/importers/collectives.h"
#include "sim/workload/importers/et_reader.h"
#include "sim/workload/importers/importers.h"
#include "sim/workload/importers/kineto.h"
#include "sim/workload/importers/scopes.h"

namespace memsim {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view base_name(std::string_view name) {
  if (starts_with(name, "aten::")) name.remove_prefix(6);
  return name;
}

bool is_collective_node(const EtNode& n) {
  return starts_with(n.name, "c10d::") || starts_with(n.name, "nccl:") || n.name == "record_param_comms";
}
bool is_triton_kernel(const EtNode& n) { return n.kernel_backend == "triton" || starts_with(n.name, "triton_"); }
bool has_tensors(const std::vector<std::vector<EtTensor>>& side) {
  return std::any_of(side.begin(), side.end(), [](const auto& arg) { return !arg.empty(); });
}

// "ProfilerStep#7" -> 7.
std::optional<std::int64_t> profiler_step(const std::string& name) {
  if (!starts_with(name, "ProfilerStep#")) return std::nullopt;
  try {
    std::size_t used = 0;
    const std::int64_t n = std::stoll(name.substr(13), &used);
    if (used + 13 == name.size()) return n;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// Counted things for the notes, with a few names as examples.
struct Tally {
  std::size_t count = 0;
  std::map<std::string, std::size_t> names;
  void add(const std::string& name) {
    ++count;
    ++names[name];
  }
  std::string examples() const {
    std::vector<std::pair<std::size_t, std::string>> by;
    for (const auto& [n, c] : names) by.emplace_back(c, n);
    std::stable_sort(by.begin(), by.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string s;
    for (std::size_t i = 0; i < by.size() && i < 3; ++i)
      s += fmt::format("{}{} x{}", i ? ", " : "", by[i].second, by[i].first);
    if (by.size() > 3) s += ", ...";
    return s;
  }
};

class Importer {
 public:
  Importer(ExecutionTrace et, std::string source, std::string name, std::optional<std::int64_t> step)
      : source_(std::move(source)), name_(std::move(name)), requested_step_(step), et_(std::move(et)) {
    const std::size_t n = et_.nodes.size();
    in_optimizer_step_.assign(n, false);
    in_autograd_.assign(n, false);
    accumulate_grad_.assign(n, SIZE_MAX);
    accumulate_updated_.assign(n, false);
    scope_.assign(n, SIZE_MAX);
    forward_.assign(n, SIZE_MAX);
    // Forward ops by (thread, autograd sequence number). Every op records the number the
    // next backward function will take, and the op that makes one takes it: so the op a
    // backward function undoes is the last to start with its number (or one under it).
    std::map<std::pair<std::int64_t, std::int64_t>, std::size_t> forward_by_seq;
    // Which optimizer step, backward function, AccumulateGrad and scope each node runs
    // under; children start after their parents, so one pass in id order passes it down.
    for (std::size_t i = 0; i < n; ++i) {
      const EtNode& node = et_.nodes[i];
      if (!in_autograd_[i] && node.seq_id >= 0) forward_by_seq[std::pair(node.tid, node.seq_id)] = i;
      const bool evaluate = starts_with(node.name, "autograd::engine::evaluate_function");
      if (evaluate)  // its children are the backward function: the forward op it undoes
        for (std::size_t c : node.children) {
          const EtNode& f = et_.nodes[c];
          const auto it = forward_by_seq.find(std::pair(f.fw_tid ? f.fw_tid : f.tid, f.seq_id));
          if (f.seq_id >= 0 && it != forward_by_seq.end()) forward_[c] = it->second;
        }
      const bool scope = node.op_schema.empty() && !starts_with(node.name, "aten::") && !is_collective_node(node) &&
                         !is_triton_kernel(node) && !evaluate && is_scope_label(node.name);
      if (starts_with(node.name, "Optimizer.step")) in_optimizer_step_[i] = true;
      if (starts_with(node.name, "autograd::engine::evaluate_function")) in_autograd_[i] = true;
      if (node.name.find("AccumulateGrad") != std::string::npos && accumulate_grad_[i] == SIZE_MAX &&
          !starts_with(node.name, "autograd::engine"))
        accumulate_grad_[i] = i;
      for (std::size_t c : node.children) {
        in_optimizer_step_[c] = in_optimizer_step_[c] || in_optimizer_step_[i];
        in_autograd_[c] = in_autograd_[c] || in_autograd_[i];
        if (accumulate_grad_[c] == SIZE_MAX) accumulate_grad_[c] = accumulate_grad_[i];
        scope_[c] = scope ? i : scope_[i];
        if (forward_[c] == SIZE_MAX) forward_[c] = forward_[i];
      }
    }
  }

  PytorchEtImport run();

 private:
  struct Unit {
    std::size_t root;
    bool accumulation = false;  // an AccumulateGrad node: what it receives is a gradient
    Phase phase = Phase::forward;
  };

  /// Host tensors do not count in a trace that has device tensors.
  bool counts(const EtTensor& t) const { return !et_.has_device_tensors || starts_with(t.device, "cuda"); }
  void collect_units();
  void choose_step();
  void emit_unit(std::size_t root);
  void emit_collective(std::size_t root);
  /// The node and everything under it, in start order (depth first, children in order).
  std::vector<std::size_t> subtree(std::size_t root) const {
    std::vector<std::size_t> out, stack{root};
    while (!stack.empty()) {
      const std::size_t i = stack.back();
      stack.pop_back();
      out.push_back(i);
      const auto& ch = et_.nodes[i].children;
      stack.insert(stack.end(), ch.rbegin(), ch.rend());
    }
    return out;
  }
  /// The scope an op of unit `root` is named in: a backward op's is its forward op's (by
  /// autograd's sequence number), else the nearest label around it; empty for none.
  std::string scope_of(std::size_t root);
  /// Names the buffers `op` allocates after it, when it is named in a scope.
  void name_outputs(const Op& op, const std::string& scope);
  EtOpOrigin origin(std::size_t root) const;
  void note_accumulation(std::size_t node);
  bool descend_into(std::size_t index) const;
  BufferId buffer_for(const EtTensor& t, bool sized);
  BufferId new_buffer(const std::string& name, const EtTensor& t, bool resident);
  void settle_categories();

  std::string source_, name_;
  std::optional<std::int64_t> requested_step_;
  ExecutionTrace et_;
  std::vector<bool> in_optimizer_step_, in_autograd_;
  std::vector<std::size_t> accumulate_grad_;  // the enclosing AccumulateGrad node, if any
  std::vector<std::size_t> scope_;    // the nearest enclosing scope label, if any
  std::vector<std::size_t> forward_;  // under a backward function: the forward op it undoes
  std::vector<Unit> units_;                   // in start order, the chosen step's only after choose_step
  Trace trace_;
  std::vector<EtOpOrigin> origins_;
  std::map<std::string, std::uint32_t> group_ranks_;  // a collective's group -> its size
  std::vector<std::string> notes_;
  std::unordered_map<std::int64_t, BufferId> buffer_of_storage_;
  // Per buffer.
  std::vector<bool> resident_sized_;  // size still grows with what is seen
  std::vector<bool> read_outside_optimizer_, updated_by_step_, gradient_;
  std::vector<std::uint8_t> fused_;  // 1: a table a fused-optimizer kernel updates, 2: its state
  std::vector<int> element_bytes_;
  std::unordered_set<std::uint64_t> broadcast_;  // (tensor id, storage id) of expand outputs
  std::vector<bool> accumulate_updated_;
  std::vector<std::pair<std::size_t, std::vector<BufferId>>> accumulations_;
  Tally not_operators_, waits_, fused_tables_;
  std::vector<BufferId> unsized_;  // named in the notes once the ops have named them
  std::set<std::size_t> long_scopes_;  // scope labels too long to name anything (kMaxScopeName)
};

std::uint64_t pair_key(std::int64_t tensor, std::int64_t storage) {
  return (static_cast<std::uint64_t>(tensor) << 32) ^ static_cast<std::uint64_t>(storage);
}

// A node that is not a kernel is split into its children, unless they only make views and
// allocate (the node does the work itself: index_select over select views), or it returns
// a tensor of a storage it did not read and none of its descendants returns.
bool Importer::descend_into(std::size_t index) const {
  const EtNode& node = et_.nodes[index];
  if (node.children.empty() || is_cost_kernel(base_name(node.name))) return false;
  {
    bool working_descendant = false;
    std::vector<std::size_t> stack(node.children.begin(), node.children.end());
    while (!stack.empty() && !working_descendant) {
      const EtNode& d = et_.nodes[stack.back()];
      stack.pop_back();
      const std::string_view b = base_name(d.name);
      if (is_cost_kernel(b) || (d.children.empty() && !is_view_op(b) && !is_allocation_op(b)))
        working_descendant = true;
      stack.insert(stack.end(), d.children.begin(), d.children.end());
    }
    if (!working_descendant) return false;
  }
  std::unordered_set<std::int64_t> read;
  for (const auto& arg : node.inputs)
    for (const auto& t : arg) read.insert(t.storage);
  std::unordered_set<std::int64_t> missing;
  for (const auto& arg : node.outputs)
    for (const auto& t : arg)
      if (!read.count(t.storage)) missing.insert(t.storage);
  if (missing.empty()) return true;
  std::vector<std::size_t> stack(node.children.begin(), node.children.end());
  while (!stack.empty() && !missing.empty()) {
    const EtNode& d = et_.nodes[stack.back()];
    stack.pop_back();
    for (const auto& arg : d.outputs)
      for (const auto& t : arg) missing.erase(t.storage);
    stack.insert(stack.end(), d.children.begin(), d.children.end());
  }
  return missing.empty();
}

BufferId Importer::new_buffer(const std::string& name, const EtTensor& t, bool resident) {
  const BufferId b = trace_.add_buffer(name, t.extent_bytes, Category::other, resident);
  buffer_of_storage_[t.storage] = b;
  resident_sized_.push_back(resident);
  read_outside_optimizer_.push_back(false);
  updated_by_step_.push_back(false);
  gradient_.push_back(false);
  fused_.push_back(0);
  element_bytes_.push_back(std::max(t.itemsize, 1));
  if (t.itemsize == 0 || (t.numel == 0 && !t.shape.empty() &&
                          std::all_of(t.shape.begin(), t.shape.end(), [](std::int64_t d) { return d > 0; })))
    unsized_.push_back(b);
  return b;
}

BufferId Importer::buffer_for(const EtTensor& t, bool sized) {
  auto it = buffer_of_storage_.find(t.storage);
  if (it != buffer_of_storage_.end()) {
    const BufferId b = it->second;
    if (resident_sized_[b] && sized) trace_.buffers[b].bytes = std::max(trace_.buffers[b].bytes, t.extent_bytes);
    return b;
  }
  // First seen as an input: resident when the step starts.
  EtTensor sized_t = t;
  if (!sized) sized_t.extent_bytes = 0;
  return new_buffer(fmt::format("storage{}", t.storage), sized_t, true);
}

// The units of work, in start order: what the walk from the roots does not split further.
void Importer::collect_units() {
  std::vector<std::size_t> stack;
  {
    std::vector<bool> is_child(et_.nodes.size(), false);
    for (const auto& n : et_.nodes)
      for (std::size_t c : n.children) is_child[c] = true;
    for (std::size_t i = et_.nodes.size(); i-- > 0;)
      if (!is_child[i]) stack.push_back(i);
  }
  while (!stack.empty()) {
    const std::size_t i = stack.back();
    stack.pop_back();
    const EtNode& n = et_.nodes[i];
    if (accumulate_grad_[i] == i) units_.push_back({i, true});
    if (is_collective_node(n) || is_triton_kernel(n)) {  // the outermost of a collective's nodes
      units_.push_back({i});
      continue;
    }
    // Labels (the thread, record_function ranges, autograd's wrappers of a backward
    // function) do no work of their own: what runs under them does. A childless one that
    // still names tensors is no operator memsim knows: counted, not silently lost.
    const bool label = n.op_schema.empty() && !starts_with(n.name, "aten::");
    if (label && n.children.empty()) {
      if (has_tensors(n.outputs) && accumulate_grad_[i] != i) not_operators_.add(n.name);
      continue;
    }
    if (label || descend_into(i)) {
      stack.insert(stack.end(), n.children.rbegin(), n.children.rend());
      continue;
    }
    units_.push_back({i});
  }
  // Across threads, in the order they started (node ids count up as ops start).
  std::stable_sort(units_.begin(), units_.end(), [&](const Unit& a, const Unit& b) { return a.root < b.root; });
}

// Phases within each step, the step to import, and what is left out.
void Importer::choose_step() {
  std::vector<std::size_t> steps;  // ProfilerStep nodes, in start order
  for (std::size_t i = 0; i < et_.nodes.size(); ++i)
    if (profiler_step(et_.nodes[i].name)) steps.push_back(i);
  auto step_of = [&](std::size_t node) -> std::ptrdiff_t {
    const auto it = std::upper_bound(steps.begin(), steps.end(), node);
    return it == steps.begin() ? -1 : (it - steps.begin()) - 1;
  };
  // Phases, per step: they only move forward, from where backward and the optimizer start.
  const std::size_t n_steps = std::max<std::size_t>(steps.size(), 1);
  std::vector<std::array<std::size_t, 3>> by_phase(n_steps, {0, 0, 0});
  std::ptrdiff_t current = -2;
  bool backward = false, optimizer = false;
  for (Unit& u : units_) {
    const std::ptrdiff_t s = steps.empty() ? 0 : step_of(u.root);
    if (s != current) {
      current = s;
      backward = optimizer = false;
    }
    if (in_optimizer_step_[u.root]) optimizer = true;
    if (in_autograd_[u.root]) backward = true;
    u.phase = optimizer ? Phase::optimizer : backward ? Phase::backward : Phase::forward;
    if (s >= 0 && !u.accumulation) ++by_phase[static_cast<std::size_t>(s)][static_cast<int>(u.phase)];
  }
  if (steps.empty()) {
    std::size_t optimizer_steps = 0;
    for (const auto& n : et_.nodes)
      if (starts_with(n.name, "Optimizer.step#")) ++optimizer_steps;
    if (requested_step_)
      throw InputError(fmt::format("{}: --step {}: the trace marks no ProfilerStep (it is one step)", source_,
                                   *requested_step_));
    if (optimizer_steps > 1)
      notes_.push_back(fmt::format("the trace marks no ProfilerStep but holds {} optimizer steps; imported as one step",
                                   optimizer_steps));
    return;
  }
  bool any_backward = false, any_optimizer = false;
  for (const auto& c : by_phase) {
    any_backward |= c[1] > 0;
    any_optimizer |= c[2] > 0;
  }
  auto complete = [&](std::size_t s) {
    const auto& c = by_phase[s];
    return c[0] > 0 && (c[1] > 0 || !any_backward) && (c[2] > 0 || !any_optimizer);
  };
  auto label = [&](std::size_t s) { return fmt::format("#{}", *profiler_step(et_.nodes[steps[s]].name)); };
  std::string all;
  for (std::size_t s = 0; s < steps.size(); ++s) all += (s ? ", " : "") + label(s);
  std::ptrdiff_t chosen = -1;
  if (requested_step_) {
    for (std::size_t s = 0; s < steps.size(); ++s)
      if (*profiler_step(et_.nodes[steps[s]].name) == *requested_step_) chosen = static_cast<std::ptrdiff_t>(s);
    if (chosen < 0)
      throw InputError(fmt::format("{}: --step {}: the trace has ProfilerStep {}", source_, *requested_step_, all));
    if (!complete(static_cast<std::size_t>(chosen)))
      notes_.push_back(fmt::format("ProfilerStep{} (--step {}) is incomplete: {} forward, {} backward, {} optimizer ops",
                                   label(static_cast<std::size_t>(chosen)), *requested_step_, by_phase[chosen][0],
                                   by_phase[chosen][1], by_phase[chosen][2]));
  } else {
    for (std::size_t s = steps.size(); s-- > 0;)
      if (complete(s)) {
        chosen = static_cast<std::ptrdiff_t>(s);
        break;
      }
    if (chosen < 0)
      throw InputError(fmt::format("{}: none of its ProfilerSteps ({}) is a complete step (forward{}{}); pick one with --step N",
                                   source_, all, any_backward ? ", backward" : "", any_optimizer ? ", optimizer" : ""));
  }
  std::size_t left_out = 0;
  std::vector<Unit> kept;
  for (const Unit& u : units_) {
    if (step_of(u.root) == chosen)
      kept.push_back(u);
    else if (!u.accumulation)
      ++left_out;
  }
  units_ = std::move(kept);
  if (steps.size() > 1 || left_out > 0) {
    std::string why = requested_step_ ? fmt::format("--step {}", *requested_step_)
                                      : steps.size() > 1 ? "the last complete one; --step N picks another"
                                                         : "the only one";
    notes_.push_back(fmt::format("imported ProfilerStep{} of {} ({}: {}){}", label(static_cast<std::size_t>(chosen)),
                                 steps.size(), all, why,
                                 left_out ? fmt::format("; {} ops of the other steps and outside them left out", left_out)
                                          : std::string()));
  }
}

void Importer::note_accumulation(std::size_t node) {
  std::vector<BufferId> received;
  for (const auto& arg : et_.nodes[node].inputs)
    for (const auto& t : arg)
      if (counts(t)) received.push_back(buffer_for(t, true));
  accumulations_.emplace_back(node, std::move(received));
}

void Importer::emit_unit(std::size_t root_index) {
  const EtNode& root = et_.nodes[root_index];
  const std::vector<std::size_t> members = subtree(root_index);  // in start order
  auto sized = [&](const EtTensor& t) { return et_.has_strides || !broadcast_.count(pair_key(t.tensor, t.storage)); };

  // Broadcast views say nothing about their storage's size (schema 1.0.1 has no strides).
  if (!et_.has_strides)
    for (std::size_t i : members) {
      const EtNode& n = et_.nodes[i];
      const std::string_view b = base_name(n.name);
      const bool broadcast = b == "expand" || b == "expand_as" || b == "broadcast_to" || n.zero_stride_argument;
      if (broadcast)
        for (const auto& arg : n.outputs)
          for (const auto& t : arg) broadcast_.insert(pair_key(t.tensor, t.storage));
    }

  const bool triton = is_triton_kernel(root);
  std::unordered_set<std::int64_t> root_reads;
  if (!triton)
    for (const auto& arg : root.inputs)
      for (const auto& t : arg) root_reads.insert(t.storage);
  // Storages the unit returns that its root did not read: new allocations (a storage id seen
  // before was recycled at a freed address). A Triton kernel names its outputs among its
  // arguments: those whose storage nothing made before.
  std::unordered_set<std::int64_t> fresh;
  for (std::size_t i : members)
    for (const auto& arg : et_.nodes[i].outputs)
      for (const auto& t : arg)
        if (counts(t) && !root_reads.count(t.storage)) fresh.insert(t.storage);
  if (triton)
    for (const auto& arg : root.inputs)
      for (const auto& t : arg)
        if (counts(t) && !buffer_of_storage_.count(t.storage)) fresh.insert(t.storage);

  Op op;
  const std::string scope = scope_of(root_index);
  op.name = scoped_op_name(scope, fmt::format("{}#{}", root.name, root.id));
  if (root.duration_us) op.measured_s = *root.duration_us * 1e-6;
  std::unordered_map<std::int64_t, BufferId> made;
  auto add_unique = [](auto& v, BufferId b) {
    if (std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
  };
  for (std::size_t i : members) {
    const EtNode& n = et_.nodes[i];
    const std::vector<bool> mutated = mutated_arguments(n.op_schema, base_name(n.name), n.inputs.size());
    auto touch = [&](const EtTensor& t, bool write) {
      if (!counts(t)) return;
      if (fresh.count(t.storage)) {
        auto [it, inserted] = made.emplace(t.storage, 0);
        if (inserted) {
          it->second = new_buffer(fmt::format("storage{}@{}", t.storage, root.id), t, false);
          op.outputs.push_back(it->second);
        } else {
          trace_.buffers[it->second].bytes = std::max(trace_.buffers[it->second].bytes, t.extent_bytes);
        }
        return;
      }
      const BufferId b = buffer_for(t, sized(t));
      add_unique(write ? op.updates : op.inputs, b);
    };
    for (std::size_t a = 0; a < n.inputs.size(); ++a)
      for (const auto& t : n.inputs[a]) touch(t, a < mutated.size() && mutated[a]);
    for (const auto& arg : n.outputs)
      for (const auto& t : arg)
        if (fresh.count(t.storage)) touch(t, false);
  }
  erase_if(op.inputs, [&](BufferId b) {
    return std::find(op.updates.begin(), op.updates.end(), b) != op.updates.end();
  });

  if (op.outputs.empty() && op.updates.empty() && (is_view_op(base_name(root.name)) || op.inputs.empty()))
    return;  // a view, or an op on nothing memsim counts: no work, no memory
  name_outputs(op, scope);

  // FBGEMM's table-batched embeddings with a fused optimizer (TorchRec): the backward
  // updates the tables and their optimizer state in place, out of the trace's sight; the
  // lookup's arguments say which tensors they are.
  if (starts_with(root.name, "fbgemm::split_embedding_codegen_lookup_")) {
    const auto names = argument_names(root.op_schema);
    bool any = false;
    for (std::size_t a = 0; a < root.inputs.size() && a < names.size(); ++a) {
      const std::string& n = names[a];
      const std::uint8_t role = (n == "dev_weights" || n == "uvm_weights" || n == "lxu_cache_weights") ? 1
                                : (starts_with(n, "momentum") && (n.ends_with("_dev") || n.ends_with("_uvm"))) ? 2
                                                                                                              : 0;
      if (!role) continue;
      for (const auto& t : root.inputs[a])
        if (counts(t) && t.numel > 0)
          if (auto it = buffer_of_storage_.find(t.storage); it != buffer_of_storage_.end()) {
            fused_[it->second] = role;
            any = true;
          }
    }
    if (any) fused_tables_.add(root.name);
  }

  // Cost, from the root's arguments.
  std::vector<std::vector<const EtTensor*>> in_args, out_args;
  for (const auto* side : {&root.inputs, &root.outputs}) {
    auto& into = side == &root.inputs ? in_args : out_args;
    for (const auto& arg : *side) {
      into.emplace_back();
      for (const auto& t : arg)
        if (counts(t)) into.back().push_back(&t);
    }
  }
  const AtenCost cost = triton ? triton_cost(root.name, in_args) : aten_cost(base_name(root.name), in_args, out_args);
  op.kind = cost.kind;
  op.dtype = cost.dtype;
  op.flops = cost.flops;
  op.bytes_moved = cost.bytes;
  if (!op.outputs.empty() && op.bytes_moved == 0 && cost.kind != "allocate") {
    for (BufferId b : op.outputs) op.bytes_moved += static_cast<double>(trace_.buffers[b].bytes);
  }
  trace_.add_op(std::move(op));
  origins_.push_back(origin(root_index));
}

// A collective: the outermost of c10d::X, record_param_comms and nccl:X; what it names
// comes from all three.
void Importer::emit_collective(std::size_t root_index) {
  const EtNode& root = et_.nodes[root_index];
  const std::vector<std::size_t> members = subtree(root_index);
  std::string name_hint = root.name, group;
  std::int64_t group_size = 0;
  for (std::size_t i : members) {
    const EtNode& n = et_.nodes[i];
    if (n.name == "record_param_comms") {
      if (!n.collective.empty()) name_hint = n.collective;
      if (!n.process_group.empty()) group = n.process_group;
      if (n.group_size) group_size = n.group_size;
    }
  }
  if (name_hint == root.name)
    for (std::size_t i : members)
      if (starts_with(et_.nodes[i].name, "nccl:")) name_hint = et_.nodes[i].name;
  const std::string kind = collective_kind(name_hint);
  // The written tensors: what the collective receives into (its first argument; a
  // record_param_comms or nccl:X alone names what it sends as inputs, what it receives as
  // outputs); every other tensor is read.
  std::vector<const EtTensor*> written, read;
  const bool c10d = starts_with(root.name, "c10d::");
  for (std::size_t a = 0; a < root.inputs.size(); ++a)
    for (const auto& t : root.inputs[a])
      if (counts(t)) ((c10d && a == 0 && kind != "send") ? written : read).push_back(&t);
  for (std::size_t i : members)
    for (const auto& arg : et_.nodes[i].outputs)
      for (const auto& t : arg)
        if (counts(t)) written.push_back(&t);
  if (kind.empty() || kind == "wait" || kind == "barrier" || (written.empty() && read.empty())) {
    waits_.add(kind.empty() ? root.name : kind);
    return;
  }
  Op op;
  const std::string scope = scope_of(root_index);
  op.name = scoped_op_name(scope, fmt::format("{}#{}", root.name, root.id));
  op.kind = kind;
  if (root.duration_us) op.measured_s = *root.duration_us * 1e-6;
  auto add_unique = [](auto& v, BufferId b) {
    if (std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
  };
  std::uint64_t sent = 0, received = 0;
  std::unordered_set<std::uint64_t> seen_sent, seen_received;
  for (const EtTensor* t : read) {
    add_unique(op.inputs, buffer_for(*t, true));
    if (seen_sent.insert(pair_key(t->tensor, t->storage)).second) sent += t->bytes;
  }
  for (const EtTensor* t : written) {
    BufferId b;
    if (auto it = buffer_of_storage_.find(t->storage); it != buffer_of_storage_.end()) {
      b = it->second;
      if (std::find(op.outputs.begin(), op.outputs.end(), b) == op.outputs.end()) add_unique(op.updates, b);
    } else {  // received into a storage nothing made before: the collective allocates it
      b = new_buffer(fmt::format("storage{}@{}", t->storage, root.id), *t, false);
      op.outputs.push_back(b);
    }
    if (seen_received.insert(pair_key(t->tensor, t->storage)).second) received += t->bytes;
  }
  erase_if(op.inputs, [&](BufferId b) {
    return std::find(op.updates.begin(), op.updates.end(), b) != op.updates.end();
  });
  name_outputs(op, scope);
  op.message_bytes = std::max(sent, received);
  op.bytes_moved = static_cast<double>(sent + received);
  if (!written.empty()) op.dtype = dtype_from_tensor_type(written.front()->type);
  else if (!read.empty()) op.dtype = dtype_from_tensor_type(read.front()->type);
  if (group_size == 0)
    if (auto g = et_.group_sizes.find(group); g != et_.group_sizes.end()) group_size = g->second;
  op.group = group.empty()     ? std::string()
             : group_size > 0 ? fmt::format("{}, {} rank{}", group, group_size, group_size == 1 ? "" : "s")
                              : group;
  if (group_size > 1 && group_size < (1 << 20)) group_ranks_[op.group] = static_cast<std::uint32_t>(group_size);
  trace_.add_op(std::move(op));
  origins_.push_back(origin(root_index));
}

EtOpOrigin Importer::origin(std::size_t root) const {
  const EtNode& n = et_.nodes[root];
  EtOpOrigin o{n.rf_id, n.name, n.tid, -1, {}};
  if (forward_[root] != SIZE_MAX) {
    o.forward_rf_id = et_.nodes[forward_[root]].rf_id;
    o.forward_name = et_.nodes[forward_[root]].name;
  }
  return o;
}

std::string Importer::scope_of(std::size_t root) {
  std::size_t s = forward_[root] != SIZE_MAX ? scope_[forward_[root]] : SIZE_MAX;
  if (s == SIZE_MAX) s = scope_[root];
  if (s == SIZE_MAX) return {};
  const std::string_view name = scope_name(et_.nodes[s].name);
  if (name.size() > kMaxScopeName) {
    long_scopes_.insert(s);
    return {};
  }
  return std::string(name);
}

void Importer::name_outputs(const Op& op, const std::string& scope) {
  if (scope.empty()) return;  // storageS@N, as a trace without scopes names them
  for (std::size_t k = 0; k < op.outputs.size(); ++k)
    trace_.buffers[op.outputs[k]].name = output_buffer_name(op.name, k, op.outputs.size());
}

void Importer::settle_categories() {
  // AccumulateGrad adds into the existing gradient, or (the first time) keeps the incoming one.
  for (const auto& [node, received] : accumulations_)
    if (!accumulate_updated_[node])
      for (BufferId b : received) gradient_[b] = true;
  for (const Op& op : trace_.ops) {
    for (BufferId b : op.inputs)
      if (op.phase != Phase::optimizer) read_outside_optimizer_[b] = true;
    for (BufferId b : op.updates)
      if (op.phase != Phase::optimizer) read_outside_optimizer_[b] = true;
  }
  std::uint64_t parameters = 0;
  for (Buffer& b : trace_.buffers) {
    const bool resident = b.producer == kNoOp;
    if (gradient_[b.id]) {
      b.category = Category::gradient;
      b.persistent = true;  // kept after the step, until the next zero_grad
    } else if (resident && fused_[b.id]) {
      b.category = fused_[b.id] == 1 ? Category::weight : Category::optimizer_state;
    } else if (resident) {
      if (updated_by_step_[b.id])
        b.category = read_outside_optimizer_[b.id] ? Category::weight : Category::optimizer_state;
      else
        b.category = read_outside_optimizer_[b.id] ? Category::input : Category::other;
    } else {
      const Op& producer = trace_.ops[b.producer];
      switch (producer.phase) {
        case Phase::forward: b.category = Category::activation; break;
        case Phase::backward: b.category = Category::activation_grad; break;
        case Phase::optimizer:
          // State the step creates (zeros_like, clone: Adam's moments, SGD's momentum on the
          // first step) and then updates lives on; its temporaries do not.
          if (updated_by_step_[b.id] && (producer.kind == "allocate" || producer.kind == "fill" || producer.kind == "copy")) {
            b.category = Category::optimizer_state;
            b.persistent = true;
          } else {
            b.category = Category::other;
          }
          break;
      }
    }
    if (b.category == Category::weight) parameters += b.bytes / static_cast<std::uint64_t>(element_bytes_[b.id]);
  }
  trace_.parameters = parameters;
}

PytorchEtImport Importer::run() {
  trace_.name = name_;
  trace_.description = fmt::format("{} (PyTorch Execution Trace, schema {})", name_, et_.schema);
  notes_ = et_.notes;
  collect_units();
  choose_step();
  for (const Unit& u : units_) {
    if (u.accumulation) {
      note_accumulation(u.root);
      continue;
    }
    const std::size_t before = trace_.ops.size();
    if (is_collective_node(et_.nodes[u.root]))
      emit_collective(u.root);
    else
      emit_unit(u.root);
    if (trace_.ops.size() == before) continue;
    Op& op = trace_.ops.back();
    op.phase = u.phase;
    for (BufferId b : op.updates) {
      if (in_optimizer_step_[u.root]) updated_by_step_[b] = true;
      if (accumulate_grad_[u.root] != SIZE_MAX) {
        gradient_[b] = true;
        accumulate_updated_[accumulate_grad_[u.root]] = true;
      }
    }
  }
  settle_categories();
  // Groups whose size the trace records: the traced rank is rank 0 of each, its peers the
  // next devices, and the collectives run on the network where the platform has that many
  // devices (run() says so where it has not).
  for (const auto& [group, ranks] : group_ranks_) {
    ProcessGroup g{group, {}};
    for (std::uint32_t r = 0; r < ranks; ++r) g.ranks.push_back(r);
    trace_.groups.push_back(std::move(g));
    trace_.parallel.ranks = std::max(trace_.parallel.ranks, ranks);
  }
  if (!group_ranks_.empty()) {
    trace_.parallel.symmetric = true;
    trace_.parallel.from_trace = true;
    trace_.parallel.summary = fmt::format("{} ranks (the trace's process groups)", trace_.parallel.ranks);
  }
  if (not_operators_.count)
    notes_.push_back(fmt::format("{} childless nodes that name tensors but are no operator memsim models left out ({})",
                                 not_operators_.count, not_operators_.examples()));
  if (waits_.count)
    notes_.push_back(fmt::format("{} collective calls that move no data (waits, barriers) are no ops ({})", waits_.count,
                                 waits_.examples()));
  if (fused_tables_.count)
    notes_.push_back(fmt::format("{} embedding lookups with a fused optimizer ({}) update their tables in the backward, "
                                 "which the trace does not record: the tables counted as weights, their state as "
                                 "optimizer state, no update op",
                                 fused_tables_.count, fused_tables_.examples()));
  if (!long_scopes_.empty())
    notes_.push_back(fmt::format("{} record_function labels over {} characters name no ops (the ops under them keep "
                                 "their nodes' names)",
                                 long_scopes_.size(), kMaxScopeName));
  if (!unsized_.empty()) {
    Tally unsized;
    for (BufferId b : unsized_) unsized.add(trace_.buffers[b].name);
    notes_.push_back(fmt::format("{} tensors without a size (0 elements or 0-byte items) counted as 0 bytes ({})",
                                 unsized.count, unsized.examples()));
  }
  trace_.import_notes = std::move(notes_);
  validate(trace_, source_);
  return {std::move(trace_), std::move(origins_)};
}

}  // namespace

bool looks_like_pytorch_et(std::string_view head) {
  const auto first = head.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || head[first] != '{') return false;
  return head.find("\"schema\"") != std::string_view::npos &&
         (head.find("\"nodes\"") != std::string_view::npos || head.find("\"pid\"") != std::string_view::npos);
}

PytorchEtImport import_pytorch_et_with_origins(const std::string& text, const std::string& source,
                                               const std::string& name, std::optional<std::int64_t> step) {
  return Importer(read_execution_trace(text, source), source, name, step).run();
}

Trace import_pytorch_et(const std::string& text, const std::string& source, std::optional<std::int64_t> step) {
  std::string stem = std::filesystem::path(source).filename().string();
  for (const char* ext : {".json", ".et"})
    if (stem.size() > std::string_view(ext).size() && stem.ends_with(ext)) stem.resize(stem.size() - std::string_view(ext).size());
  return import_pytorch_et_with_origins(text, source, stem, step).trace;
}

ImporterInfo pytorch_et_importer() {
  return {"pytorch-et",
          "a PyTorch Execution Trace (torch.profiler's ExecutionTraceObserver JSON: schema and nodes), one "
          "ProfilerStep of it (--step), with the ops' times from a Kineto trace of the same run (--kineto)",
          looks_like_pytorch_et,
          [](TraceFile& f, const std::string& name, const ImportOptions& options) {
            PytorchEtImport imported = import_pytorch_et_with_origins(f.bytes, f.source, name, options.step);
            Trace t = std::move(imported.trace);
            if (options.kineto.empty()) return t;
            if (!trace_file_exists(options.kineto))
              throw InputError(fmt::format("--kineto {}: no such file", options.kineto));
            const ForeignTrace k = sniff_foreign_trace(options.kineto);
            if (k != find_importer("kineto"))
              throw InputError(fmt::format(
                  "--kineto {}: not a Kineto trace (expected torch.profiler's JSON with traceEvents{})", options.kineto,
                  k == find_importer("pytorch-et") ? "; this is an Execution Trace: pass it as the workload" : ""));
            f.bytes = std::string();  // the ET's text is done with; the Kineto trace takes its place
            TraceFile kf = read_trace_file(options.kineto);
            const KinetoTimes times = read_kineto(kf.bytes, kf.source);
            for (std::string& n : kf.notes) t.import_notes.push_back(std::move(n));
            for (std::string& n : apply_kineto(t, imported.origins, times, kf.source))
              t.import_notes.push_back(std::move(n));
            return t;
          }};
}

}  // namespace memsim
