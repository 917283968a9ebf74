#include "sim/workload/importers/et_reader.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"

namespace memsim {
namespace {

using json = nlohmann::json;

std::string describe(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// as_strided(self, size, stride, ...) with a zero stride: a broadcast view.
bool has_zero_stride_argument(const std::string& name, const json& values) {
  if (name != "aten::as_strided" || !values.is_array() || values.size() < 3 || !values[2].is_array()) return false;
  for (const auto& s : values[2])
    if (s.is_number_integer() && s.get<std::int64_t>() == 0) return true;
  return false;
}

class Reader {
 public:
  Reader(const std::string& text, std::string source) : source_(std::move(source)) {
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

  ExecutionTrace run() {
    read_nodes();
    ExecutionTrace et;
    et.schema = doc_["schema"].get<std::string>();
    et.has_strides = has_strides_;
    et.has_device_tensors = has_device_tensors_;
    et.nodes = std::move(nodes_);
    return et;
  }

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

  std::string source_;
  json doc_;
  bool schema_v1_0_ = true;
  bool has_strides_ = false;
  bool has_device_tensors_ = false;
  std::vector<EtNode> nodes_;
};

EtTensor Reader::read_tensor(const json& n, std::size_t index, const std::string& where,
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

std::vector<std::vector<EtTensor>> Reader::read_args(const json& n, std::size_t index,
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

void Reader::read_nodes() {
  if (!doc_.is_object()) fail(fmt::format("expected a JSON object with schema and nodes, got {}", describe(doc_)));
  auto schema = doc_.find("schema");
  if (schema == doc_.end()) fail("schema: missing; expected an Execution Trace schema 1.0.x or 1.1.x");
  const std::string version = schema->is_string() ? schema->get<std::string>() : schema->dump();
  if (starts_with(version, "1.0."))
    schema_v1_0_ = true;
  else if (starts_with(version, "1.1."))
    schema_v1_0_ = false;
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
    EtNode node;
    node.id = id->get<std::int64_t>();
    node.name = name->get<std::string>();
    if (!seen.emplace(node.id, i).second)
      fail_node(n, i, fmt::format("id {} is used by nodes[{}] too", node.id, seen[node.id]));
    if (auto dur = n.find("inclusive_dur"); dur != n.end()) {
      if (!dur->is_number() || dur->get<double>() < 0)
        fail_node(n, i, fmt::format("inclusive_dur: expected microseconds >= 0, got {}", describe(*dur)));
      node.duration_us = dur->get<double>();
    }
    const char* parent_key = schema_v1_0_ ? "parent" : "ctrl_deps";
    if (auto p = n.find(parent_key); p != n.end() && !p->is_null()) {
      if (!p->is_number_integer()) fail_node(n, i, fmt::format("{}: expected a node id, got {}", parent_key, describe(*p)));
      node.parent = p->get<std::int64_t>();
    }
    if (schema_v1_0_) {
      if (auto s = n.find("op_schema"); s != n.end() && s->is_string()) node.op_schema = s->get<std::string>();
      auto get = [&](const char* key) -> const json* {
        auto it = n.find(key);
        return it == n.end() ? nullptr : &*it;
      };
      node.inputs = read_args(n, i, "inputs", get("inputs"), get("input_shapes"), get("input_types"), nullptr);
      node.outputs = read_args(n, i, "outputs", get("outputs"), get("output_shapes"), get("output_types"), nullptr);
      if (const json* v = get("inputs")) node.zero_stride_argument = has_zero_stride_argument(node.name, *v);
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
        if (keep_values) node.zero_stride_argument = has_zero_stride_argument(node.name, *values);
      };
      side("inputs", node.inputs, true);
      side("outputs", node.outputs, false);
    }
    nodes_.push_back(std::move(node));
  }
  std::stable_sort(nodes_.begin(), nodes_.end(), [](const EtNode& a, const EtNode& b) { return a.id < b.id; });
  std::unordered_map<std::int64_t, std::size_t> index_of;
  for (std::size_t i = 0; i < nodes_.size(); ++i) index_of.emplace(nodes_[i].id, i);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    EtNode& node = nodes_[i];
    for (const auto* side : {&node.inputs, &node.outputs})
      for (const auto& arg : *side)
        for (const auto& t : arg)
          if (starts_with(t.device, "cuda")) has_device_tensors_ = true;
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
}

}  // namespace

ExecutionTrace read_execution_trace(const std::string& text, const std::string& source) {
  try {
    return Reader(text, source).run();
  } catch (const nlohmann::json::exception& e) {
    // A value of a type the reader did not check for: still the file's fault, not a crash.
    throw InputError(fmt::format("{}: unexpected value: {}", source, e.what()));
  }
}

}  // namespace memsim
