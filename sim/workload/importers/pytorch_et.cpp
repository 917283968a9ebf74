#include "sim/workload/importers/pytorch_et.h"

#include <algorithm>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/workload/importers/aten_cost.h"
#include "sim/workload/importers/et_reader.h"

namespace memsim {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view base_name(std::string_view name) {
  if (starts_with(name, "aten::")) name.remove_prefix(6);
  return name;
}

class Importer {
 public:
  Importer(ExecutionTrace et, std::string source) : source_(std::move(source)), et_(std::move(et)) {
    const std::size_t n = et_.nodes.size();
    in_optimizer_step_.assign(n, false);
    in_zero_grad_.assign(n, false);
    accumulate_grad_.assign(n, SIZE_MAX);
    accumulate_updated_.assign(n, false);
    // Which optimizer phase and which AccumulateGrad each node runs under; children start
    // after their parents, so one pass in id order passes it down.
    for (std::size_t i = 0; i < n; ++i) {
      const EtNode& node = et_.nodes[i];
      if (starts_with(node.name, "Optimizer.step")) in_optimizer_step_[i] = true;
      if (starts_with(node.name, "Optimizer.zero_grad")) in_zero_grad_[i] = true;
      if (node.name.find("AccumulateGrad") != std::string::npos && accumulate_grad_[i] == SIZE_MAX &&
          !starts_with(node.name, "autograd::engine"))
        accumulate_grad_[i] = i;
      for (std::size_t c : node.children) {
        in_optimizer_step_[c] = in_optimizer_step_[c] || in_optimizer_step_[i];
        in_zero_grad_[c] = in_zero_grad_[c] || in_zero_grad_[i];
        if (accumulate_grad_[c] == SIZE_MAX) accumulate_grad_[c] = accumulate_grad_[i];
      }
    }
  }

  Trace run();

 private:
  /// Host tensors do not count in a trace that has device tensors.
  bool counts(const EtTensor& t) const { return !et_.has_device_tensors || starts_with(t.device, "cuda"); }
  void emit_unit(std::size_t root);
  bool descend_into(std::size_t index) const;
  BufferId buffer_for(const EtTensor& t, bool sized);

  std::string source_;
  ExecutionTrace et_;
  std::vector<bool> in_optimizer_step_, in_zero_grad_;
  std::vector<std::size_t> accumulate_grad_;  // the enclosing AccumulateGrad node, if any
  Trace trace_;
  std::unordered_map<std::int64_t, BufferId> buffer_of_storage_;
  std::vector<bool> resident_sized_;    // per buffer: size still grows with what is seen
  std::vector<bool> read_outside_optimizer_, updated_by_step_, gradient_;
  std::unordered_set<std::uint64_t> broadcast_;  // (tensor id, storage id) of expand outputs
  bool backward_started_ = false;
  std::vector<bool> accumulate_updated_;
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

BufferId Importer::buffer_for(const EtTensor& t, bool sized) {
  auto it = buffer_of_storage_.find(t.storage);
  if (it != buffer_of_storage_.end()) {
    const BufferId b = it->second;
    if (resident_sized_[b] && sized) trace_.buffers[b].bytes = std::max(trace_.buffers[b].bytes, t.extent_bytes);
    return b;
  }
  // First seen as an input: resident when the step starts.
  const BufferId b = trace_.add_buffer(fmt::format("storage{}", t.storage), sized ? t.extent_bytes : 0,
                                       Category::other, true);
  buffer_of_storage_[t.storage] = b;
  resident_sized_.push_back(true);
  read_outside_optimizer_.push_back(false);
  updated_by_step_.push_back(false);
  gradient_.push_back(false);
  return b;
}

void Importer::emit_unit(std::size_t root_index) {
  const EtNode& root = et_.nodes[root_index];
  std::vector<std::size_t> members;  // the root and everything under it, in start order
  {
    std::vector<std::size_t> stack{root_index};
    while (!stack.empty()) {
      const std::size_t i = stack.back();
      stack.pop_back();
      members.push_back(i);
      const auto& ch = et_.nodes[i].children;
      stack.insert(stack.end(), ch.rbegin(), ch.rend());
    }
  }
  auto counted = [&](const EtTensor& t) { return counts(t); };
  auto sized = [&](const EtTensor& t) { return et_.has_strides || !broadcast_.count(pair_key(t.tensor, t.storage)); };

  // Broadcast views say nothing about their storage's size (schema 1.0.x has no strides).
  if (!et_.has_strides)
    for (std::size_t i : members) {
      const EtNode& n = et_.nodes[i];
      const std::string_view b = base_name(n.name);
      const bool broadcast = b == "expand" || b == "expand_as" || b == "broadcast_to" || n.zero_stride_argument;
      if (broadcast)
        for (const auto& arg : n.outputs)
          for (const auto& t : arg) broadcast_.insert(pair_key(t.tensor, t.storage));
    }

  std::unordered_set<std::int64_t> root_reads;
  for (const auto& arg : root.inputs)
    for (const auto& t : arg) root_reads.insert(t.storage);
  // Storages the unit returns that its root did not read: new allocations (a storage id seen
  // before was recycled at a freed address).
  std::unordered_set<std::int64_t> fresh;
  for (std::size_t i : members)
    for (const auto& arg : et_.nodes[i].outputs)
      for (const auto& t : arg)
        if (counted(t) && !root_reads.count(t.storage)) fresh.insert(t.storage);

  Op op;
  op.name = fmt::format("{}#{}", root.name, root.id);
  if (root.duration_us) op.measured_s = *root.duration_us * 1e-6;
  if (in_optimizer_step_[root_index] || in_zero_grad_[root_index])
    op.phase = Phase::optimizer;
  else if (backward_started_)
    op.phase = Phase::backward;
  std::unordered_map<std::int64_t, BufferId> made;
  auto add_unique = [](std::vector<BufferId>& v, BufferId b) {
    if (std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
  };
  for (std::size_t i : members) {
    const EtNode& n = et_.nodes[i];
    const std::vector<bool> mutated = mutated_arguments(n.op_schema, base_name(n.name), n.inputs.size());
    auto touch = [&](const EtTensor& t, bool write) {
      if (!counted(t)) return;
      if (fresh.count(t.storage)) {
        auto [it, inserted] = made.emplace(t.storage, 0);
        if (inserted) {
          it->second = trace_.add_buffer(fmt::format("storage{}@{}", t.storage, root.id), t.extent_bytes,
                                         Category::other);
          buffer_of_storage_[t.storage] = it->second;
          resident_sized_.push_back(false);
          read_outside_optimizer_.push_back(false);
          updated_by_step_.push_back(false);
          gradient_.push_back(false);
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
  std::erase_if(op.inputs, [&](BufferId b) {
    return std::find(op.updates.begin(), op.updates.end(), b) != op.updates.end();
  });

  if (op.outputs.empty() && op.updates.empty() && (is_view_op(base_name(root.name)) || op.inputs.empty()))
    return;  // a view, or an op on nothing memsim counts: no work, no memory

  // Cost, from the root's arguments.
  std::vector<std::vector<const EtTensor*>> in_args, out_args;
  for (const auto* side : {&root.inputs, &root.outputs}) {
    auto& into = side == &root.inputs ? in_args : out_args;
    for (const auto& arg : *side) {
      into.emplace_back();
      for (const auto& t : arg)
        if (counted(t)) into.back().push_back(&t);
    }
  }
  const AtenCost cost = aten_cost(base_name(root.name), in_args, out_args);
  op.kind = cost.kind;
  op.dtype = cost.dtype;
  op.flops = cost.flops;
  op.bytes_moved = cost.bytes;
  if (!op.outputs.empty() && op.bytes_moved == 0 && cost.kind != "allocate") {
    for (BufferId b : op.outputs) op.bytes_moved += static_cast<double>(trace_.buffers[b].bytes);
  }

  for (BufferId b : op.inputs)
    if (op.phase != Phase::optimizer) read_outside_optimizer_[b] = true;
  for (BufferId b : op.updates) {
    if (op.phase != Phase::optimizer) read_outside_optimizer_[b] = true;
    if (in_optimizer_step_[root_index]) updated_by_step_[b] = true;
    if (accumulate_grad_[root_index] != SIZE_MAX) {
      gradient_[b] = true;
      accumulate_updated_[accumulate_grad_[root_index]] = true;
    }
  }
  trace_.add_op(std::move(op));
}

Trace Importer::run() {
  std::filesystem::path p(source_);
  std::string stem = p.filename().string();
  for (const char* ext : {".json", ".et"})
    if (stem.size() > std::string_view(ext).size() && stem.ends_with(ext)) stem.resize(stem.size() - std::string_view(ext).size());
  trace_.name = stem;
  trace_.description = fmt::format("{} (PyTorch Execution Trace, schema {})", stem,
                                   et_.schema);

  // AccumulateGrad nodes and the buffers they receive, to settle after the walk.
  std::vector<std::pair<std::size_t, std::vector<BufferId>>> accumulations;
  std::vector<std::size_t> stack;
  // Roots: nodes whose parent is not in the file (checked in read_nodes) or 0.
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
    if (starts_with(n.name, "autograd::engine::evaluate_function")) backward_started_ = true;
    if (accumulate_grad_[i] == i) {
      std::vector<BufferId> received;
      for (const auto& arg : n.inputs)
        for (const auto& t : arg)
          if (counts(t)) received.push_back(buffer_for(t, true));
      accumulations.emplace_back(i, std::move(received));
    }
    // Labels (the thread, record_function ranges, autograd's wrappers of a backward
    // function) do no work of their own: what runs under them does.
    const bool label = n.op_schema.empty() && !starts_with(n.name, "aten::");
    if (label || descend_into(i)) {
      stack.insert(stack.end(), n.children.rbegin(), n.children.rend());
      continue;
    }
    emit_unit(i);
  }
  // AccumulateGrad adds into the existing gradient, or (the first time) keeps the incoming one.
  for (const auto& [node, received] : accumulations)
    if (!accumulate_updated_[node])
      for (BufferId b : received) gradient_[b] = true;

  for (Buffer& b : trace_.buffers) {
    const bool resident = b.producer == kNoOp;
    if (gradient_[b.id]) {
      b.category = Category::gradient;
      b.persistent = true;  // kept after the step, until the next zero_grad
    } else if (resident) {
      if (updated_by_step_[b.id])
        b.category = read_outside_optimizer_[b.id] ? Category::weight : Category::optimizer_state;
      else
        b.category = read_outside_optimizer_[b.id] ? Category::input : Category::other;
    } else {
      switch (trace_.ops[b.producer].phase) {
        case Phase::forward: b.category = Category::activation; break;
        case Phase::backward: b.category = Category::activation_grad; break;
        case Phase::optimizer: b.category = Category::other; break;
      }
    }
  }
  validate(trace_, source_);
  return std::move(trace_);
}

}  // namespace

bool looks_like_pytorch_et(std::string_view head) {
  const auto first = head.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || head[first] != '{') return false;
  return head.find("\"schema\"") != std::string_view::npos &&
         (head.find("\"nodes\"") != std::string_view::npos || head.find("\"pid\"") != std::string_view::npos);
}

Trace import_pytorch_et(const std::string& text, const std::string& source) {
  return Importer(read_execution_trace(text, source), source).run();
}

}  // namespace memsim
