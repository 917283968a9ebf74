#include "sim/workload/importers/pytorch_et.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/workload/importers/aten_cost.h"

namespace memsim {
namespace {

using json = nlohmann::json;

enum class Schema { v1_0, v1_1 };

struct Node {
  std::int64_t id = 0;
  std::int64_t parent = 0;
  std::string name;
  std::string op_schema;
  std::vector<std::vector<EtTensor>> inputs;   // per argument; empty for a non-tensor
  std::vector<std::vector<EtTensor>> outputs;
  std::vector<const json*> input_values;       // the raw values (as_strided's strides)
  std::vector<std::size_t> children;           // indices into the sorted node list
  std::optional<double> duration_us;           // `inclusive_dur`, where a tool added it
  // Inherited from the enclosing nodes.
  bool in_optimizer_step = false;
  bool in_zero_grad = false;
  std::size_t accumulate_grad = SIZE_MAX;  // the enclosing AccumulateGrad node, if any
};

std::string describe(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view base_name(std::string_view name) {
  if (starts_with(name, "aten::")) name.remove_prefix(6);
  return name;
}

class Importer {
 public:
  Importer(const std::string& text, std::string source) : source_(std::move(source)) {
    try {
      doc_ = json::parse(text);
    } catch (const json::parse_error& e) {
      // Report where the text stops making sense, as line:column like every other input.
      std::size_t line = 1, col = 1;
      const std::size_t end = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
      for (std::size_t i = 0; i < end; ++i) {
        if (text[i] == '\n') {
          ++line;
          col = 1;
        } else {
          ++col;
        }
      }
      std::string why = e.what();
      if (auto p = why.find("column "); p != std::string::npos)
        if (auto c = why.find(": ", p); c != std::string::npos) why = why.substr(c + 2);
      // The parser stopped at the very end: the file was cut short.
      const bool truncated = e.byte >= text.size();
      throw InputError(fmt::format("{}:{}:{}: {} JSON: {}", source_, line, col,
                                   truncated ? "truncated" : "malformed", why));
    }
  }

  Trace run();

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", source_, what));
  }
  [[noreturn]] void fail_node(const json& n, std::size_t index, const std::string& what) const {
    std::string who = fmt::format("nodes[{}]", index);
    if (n.is_object()) {
      auto id = n.find("id");
      auto name = n.find("name");
      if (id != n.end() && id->is_number_integer())
        who = fmt::format("node {}", id->get<std::int64_t>());
      if (name != n.end() && name->is_string()) who += fmt::format(" ({})", name->get<std::string>());
    }
    fail(fmt::format("{}: {}", who, what));
  }

  void read_nodes();
  std::vector<std::vector<EtTensor>> read_args(const json& n, std::size_t index, const char* which,
                                               const json* values, const json* shapes,
                                               const json* types, const json* strides);
  EtTensor read_tensor(const json& n, std::size_t index, const std::string& where,
                       const json& value, const json* shape, const json* stride);
  void emit_unit(std::size_t root);
  bool descend_into(std::size_t index) const;
  BufferId buffer_for(const EtTensor& t, bool sized);

  std::string source_;
  json doc_;
  Schema schema_ = Schema::v1_0;
  bool has_strides_ = false;
  std::string main_device_;  // "cuda" when the trace has device tensors: host ones are not counted
  std::vector<Node> nodes_;  // sorted by id: the order ops started

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

EtTensor Importer::read_tensor(const json& n, std::size_t index, const std::string& where,
                               const json& value, const json* shape, const json* stride) {
  auto int_at = [&](std::size_t i) -> std::int64_t {
    const json& v = value[i];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
      fail_node(n, index, fmt::format("{}: expected a tensor [id, storage, offset, numel, itemsize, "
                                      "device], got {}",
                                      where, describe(value)));
    return v.get<std::int64_t>();
  };
  if (!value.is_array() || value.size() < 5)
    fail_node(n, index, fmt::format("{}: expected a tensor [id, storage, offset, numel, itemsize, "
                                    "device], got {}",
                                    where, describe(value)));
  EtTensor t;
  t.tensor = int_at(0);
  t.storage = int_at(1);
  const std::int64_t offset = int_at(2);
  t.numel = static_cast<std::uint64_t>(int_at(3));
  t.itemsize = static_cast<int>(std::min<std::int64_t>(int_at(4), 64));
  if (value.size() > 5 && value[5].is_string()) t.device = value[5].get<std::string>();
  if (shape && shape->is_array())
    for (const auto& d : *shape)
      if (d.is_number_integer()) t.shape.push_back(d.get<std::int64_t>());
  std::uint64_t span = t.numel;
  if (stride && stride->is_array() && stride->size() == t.shape.size() && t.numel > 0) {
    // The elements the view reaches: a broadcast dimension (stride 0) reaches one.
    span = 1;
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      const json& s = (*stride)[d];
      if (s.is_number_integer() && t.shape[d] > 0)
        span += static_cast<std::uint64_t>(t.shape[d] - 1) *
                static_cast<std::uint64_t>(std::max<std::int64_t>(s.get<std::int64_t>(), 0));
    }
  }
  t.bytes = t.numel * static_cast<std::uint64_t>(t.itemsize);
  t.extent_bytes = (static_cast<std::uint64_t>(offset) + span) * static_cast<std::uint64_t>(t.itemsize);
  return t;
}

std::vector<std::vector<EtTensor>> Importer::read_args(const json& n, std::size_t index,
                                                       const char* which, const json* values,
                                                       const json* shapes, const json* types,
                                                       const json* strides) {
  std::vector<std::vector<EtTensor>> out;
  if (!values) return out;
  if (!values->is_array())
    fail_node(n, index, fmt::format("{}: expected a list, got {}", which, describe(*values)));
  if (!types || !types->is_array() || types->size() != values->size())
    fail_node(n, index, fmt::format("{} types: expected a list of {} types, got {}", which,
                                    values->size(), types ? describe(*types) : "nothing"));
  auto at = [](const json* list, std::size_t i) -> const json* {
    return list && list->is_array() && i < list->size() ? &(*list)[i] : nullptr;
  };
  out.resize(values->size());
  for (std::size_t i = 0; i < values->size(); ++i) {
    const json& type = (*types)[i];
    if (!type.is_string()) continue;
    const std::string& ty = type.get_ref<const std::string&>();
    const json& v = (*values)[i];
    const std::string where = fmt::format("{}[{}]", which, i);
    if (starts_with(ty, "Tensor")) {
      // An undefined tensor (an optional argument left out) has no value to read.
      if (v.is_null() || (v.is_array() && v.empty()) || (v.is_string() && (v == "" || v == "<None>")))
        continue;
      EtTensor t = read_tensor(n, index, where, v, at(shapes, i), at(strides, i));
      t.type = ty;
      out[i].push_back(std::move(t));
    } else if (starts_with(ty, "GenericList") && ty.find("Tensor") != std::string::npos) {
      if (!v.is_array())
        fail_node(n, index, fmt::format("{}: expected a list of tensors, got {}", where, describe(v)));
      const json* shape_list = at(shapes, i);
      const json* stride_list = at(strides, i);
      for (std::size_t k = 0; k < v.size(); ++k) {
        if (!v[k].is_array() || v[k].empty()) continue;
        EtTensor t = read_tensor(n, index, fmt::format("{}[{}]", where, k), v[k], at(shape_list, k),
                                 at(stride_list, k));
        t.type = ty;
        out[i].push_back(std::move(t));
      }
    }
  }
  return out;
}

void Importer::read_nodes() {
  if (!doc_.is_object()) fail(fmt::format("expected a JSON object with schema and nodes, got {}", describe(doc_)));
  auto schema = doc_.find("schema");
  if (schema == doc_.end()) fail("schema: missing; expected an Execution Trace schema 1.0.x or 1.1.x");
  const std::string version = schema->is_string() ? schema->get<std::string>() : schema->dump();
  if (starts_with(version, "1.0."))
    schema_ = Schema::v1_0;
  else if (starts_with(version, "1.1."))
    schema_ = Schema::v1_1;
  else
    fail(fmt::format("schema: expected an Execution Trace schema 1.0.x or 1.1.x, got '{}'", version));
  auto list = doc_.find("nodes");
  if (list == doc_.end() || !list->is_array())
    fail(fmt::format("nodes: expected a list of nodes, got {}",
                     list == doc_.end() ? std::string("nothing") : describe(*list)));

  nodes_.reserve(list->size());
  std::unordered_map<std::int64_t, std::size_t> seen;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& n = (*list)[i];
    if (!n.is_object()) fail_node(n, i, fmt::format("expected a node (an object), got {}", describe(n)));
    auto id = n.find("id");
    if (id == n.end() || !id->is_number_integer())
      fail_node(n, i, "id: expected an integer");
    auto name = n.find("name");
    if (name == n.end() || !name->is_string()) fail_node(n, i, "name: expected a string");
    Node node;
    node.id = id->get<std::int64_t>();
    node.name = name->get<std::string>();
    if (!seen.emplace(node.id, i).second)
      fail_node(n, i, fmt::format("id {} is used by nodes[{}] too", node.id, seen[node.id]));
    if (auto dur = n.find("inclusive_dur"); dur != n.end()) {
      if (!dur->is_number() || dur->get<double>() < 0)
        fail_node(n, i, fmt::format("inclusive_dur: expected microseconds >= 0, got {}", describe(*dur)));
      node.duration_us = dur->get<double>();
    }
    const char* parent_key = schema_ == Schema::v1_0 ? "parent" : "ctrl_deps";
    if (auto p = n.find(parent_key); p != n.end() && !p->is_null()) {
      if (!p->is_number_integer()) fail_node(n, i, fmt::format("{}: expected a node id, got {}", parent_key, describe(*p)));
      node.parent = p->get<std::int64_t>();
    }
    if (schema_ == Schema::v1_0) {
      if (auto s = n.find("op_schema"); s != n.end() && s->is_string()) node.op_schema = s->get<std::string>();
      auto get = [&](const char* key) -> const json* {
        auto it = n.find(key);
        return it == n.end() ? nullptr : &*it;
      };
      node.inputs = read_args(n, i, "inputs", get("inputs"), get("input_shapes"), get("input_types"), nullptr);
      node.outputs = read_args(n, i, "outputs", get("outputs"), get("output_shapes"), get("output_types"), nullptr);
      if (const json* v = get("inputs"); v && v->is_array())
        for (const auto& x : *v) node.input_values.push_back(&x);
    } else {
      if (auto attrs = n.find("attrs"); attrs != n.end() && attrs->is_array())
        for (const auto& a : *attrs)
          if (a.is_object() && a.contains("name") && a["name"] == "op_schema" && a.contains("value") &&
              a["value"].is_string())
            node.op_schema = a["value"].get<std::string>();
      auto side = [&](const char* key, std::vector<std::vector<EtTensor>>& into, bool keep_values) {
        auto it = n.find(key);
        if (it == n.end() || it->is_null()) return;
        if (!it->is_object())
          fail_node(n, i, fmt::format("{}: expected {{values, shapes, types}}, got {}", key, describe(*it)));
        auto field = [&](const char* f) -> const json* {
          auto x = it->find(f);
          return x == it->end() ? nullptr : &*x;
        };
        if (field("strides")) has_strides_ = true;
        const json* values = field("values");
        if (!values) fail_node(n, i, fmt::format("{}.values: missing", key));
        into = read_args(n, i, key, values, field("shapes"), field("types"), field("strides"));
        if (keep_values && values->is_array())
          for (const auto& x : *values) node.input_values.push_back(&x);
      };
      side("inputs", node.inputs, true);
      side("outputs", node.outputs, false);
    }
    nodes_.push_back(std::move(node));
  }
  std::stable_sort(nodes_.begin(), nodes_.end(), [](const Node& a, const Node& b) { return a.id < b.id; });
  std::unordered_map<std::int64_t, std::size_t> index_of;
  for (std::size_t i = 0; i < nodes_.size(); ++i) index_of.emplace(nodes_[i].id, i);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    for (const auto* side : {&node.inputs, &node.outputs})
      for (const auto& arg : *side)
        for (const auto& t : arg)
          if (starts_with(t.device, "cuda")) main_device_ = "cuda";
    if (node.parent == 0 || node.parent == node.id) continue;
    auto p = index_of.find(node.parent);
    if (p == index_of.end()) {
      if (starts_with(node.name, "[pytorch|profiler|")) continue;  // the root of a thread
      fail(fmt::format("node {} ({}): parent {} is not a node in the file", node.id, node.name, node.parent));
    }
    // Ids count up as ops start, and a parent starts before its children; this also rules
    // out cycles.
    if (p->second >= i)
      fail(fmt::format("node {} ({}): parent {} starts after it", node.id, node.name, node.parent));
    nodes_[p->second].children.push_back(i);
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    if (starts_with(node.name, "Optimizer.step")) node.in_optimizer_step = true;
    if (starts_with(node.name, "Optimizer.zero_grad")) node.in_zero_grad = true;
    if (node.name.find("AccumulateGrad") != std::string::npos && node.accumulate_grad == SIZE_MAX &&
        !starts_with(node.name, "autograd::engine"))
      node.accumulate_grad = i;
    for (std::size_t c : node.children) {  // children come later in id order: pass it down
      nodes_[c].in_optimizer_step |= node.in_optimizer_step;
      nodes_[c].in_zero_grad |= node.in_zero_grad;
      if (nodes_[c].accumulate_grad == SIZE_MAX) nodes_[c].accumulate_grad = node.accumulate_grad;
    }
  }
}

// A node that is not a kernel is split into its children, unless they only make views and
// allocate (the node does the work itself: index_select over select views), or it returns
// a tensor of a storage it did not read and none of its descendants returns.
bool Importer::descend_into(std::size_t index) const {
  const Node& node = nodes_[index];
  if (node.children.empty() || is_cost_kernel(base_name(node.name))) return false;
  {
    bool working_descendant = false;
    std::vector<std::size_t> stack(node.children.begin(), node.children.end());
    while (!stack.empty() && !working_descendant) {
      const Node& d = nodes_[stack.back()];
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
    const Node& d = nodes_[stack.back()];
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
  const Node& root = nodes_[root_index];
  std::vector<std::size_t> members;  // the root and everything under it, in start order
  {
    std::vector<std::size_t> stack{root_index};
    while (!stack.empty()) {
      const std::size_t i = stack.back();
      stack.pop_back();
      members.push_back(i);
      const auto& ch = nodes_[i].children;
      stack.insert(stack.end(), ch.rbegin(), ch.rend());
    }
  }
  auto counted = [&](const EtTensor& t) { return main_device_.empty() || starts_with(t.device, main_device_); };
  auto sized = [&](const EtTensor& t) { return has_strides_ || !broadcast_.count(pair_key(t.tensor, t.storage)); };

  // Broadcast views say nothing about their storage's size (schema 1.0.x has no strides).
  if (!has_strides_)
    for (std::size_t i : members) {
      const Node& n = nodes_[i];
      const std::string_view b = base_name(n.name);
      bool broadcast = b == "expand" || b == "expand_as" || b == "broadcast_to";
      if (b == "as_strided" && n.input_values.size() > 2 && n.input_values[2]->is_array())
        for (const auto& s : *n.input_values[2])
          if (s.is_number_integer() && s.get<std::int64_t>() == 0) broadcast = true;
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
    for (const auto& arg : nodes_[i].outputs)
      for (const auto& t : arg)
        if (counted(t) && !root_reads.count(t.storage)) fresh.insert(t.storage);

  Op op;
  op.name = fmt::format("{}#{}", root.name, root.id);
  if (root.duration_us) op.measured_s = *root.duration_us * 1e-6;
  if (root.in_optimizer_step || root.in_zero_grad)
    op.phase = Phase::optimizer;
  else if (backward_started_)
    op.phase = Phase::backward;
  std::unordered_map<std::int64_t, BufferId> made;
  auto add_unique = [](std::vector<BufferId>& v, BufferId b) {
    if (std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
  };
  for (std::size_t i : members) {
    const Node& n = nodes_[i];
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
    if (root.in_optimizer_step) updated_by_step_[b] = true;
    if (root.accumulate_grad != SIZE_MAX) {
      gradient_[b] = true;
      accumulate_updated_[root.accumulate_grad] = true;
    }
  }
  trace_.add_op(std::move(op));
}

Trace Importer::run() {
  read_nodes();
  std::filesystem::path p(source_);
  std::string stem = p.filename().string();
  for (const char* ext : {".json", ".et"})
    if (stem.size() > std::string_view(ext).size() && stem.ends_with(ext)) stem.resize(stem.size() - std::string_view(ext).size());
  trace_.name = stem;
  trace_.description = fmt::format("{} (PyTorch Execution Trace, schema {})", stem,
                                   doc_["schema"].get<std::string>());
  accumulate_updated_.assign(nodes_.size(), false);

  // AccumulateGrad nodes and the buffers they receive, to settle after the walk.
  std::vector<std::pair<std::size_t, std::vector<BufferId>>> accumulations;
  std::vector<std::size_t> stack;
  // Roots: nodes whose parent is not in the file (checked in read_nodes) or 0.
  {
    std::vector<bool> is_child(nodes_.size(), false);
    for (const auto& n : nodes_)
      for (std::size_t c : n.children) is_child[c] = true;
    for (std::size_t i = nodes_.size(); i-- > 0;)
      if (!is_child[i]) stack.push_back(i);
  }
  while (!stack.empty()) {
    const std::size_t i = stack.back();
    stack.pop_back();
    const Node& n = nodes_[i];
    if (starts_with(n.name, "autograd::engine::evaluate_function")) backward_started_ = true;
    if (n.accumulate_grad == i) {
      std::vector<BufferId> received;
      for (const auto& arg : n.inputs)
        for (const auto& t : arg)
          if (main_device_.empty() || starts_with(t.device, main_device_)) received.push_back(buffer_for(t, true));
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
  try {
    return Importer(text, source).run();
  } catch (const nlohmann::json::exception& e) {
    // A value of a type the reader did not check for: still the file's fault, not a crash.
    throw InputError(fmt::format("{}: unexpected value: {}", source, e.what()));
  }
}

}  // namespace memsim
