#include "sim/workload/importers/chakra_et.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <google/protobuf/stubs/logging.h>

#include "sim/workload/importers/chakra_et.pb.h"  // generated from chakra_et.proto
#include "sim/core/error.h"
#include "sim/workload/durations.h"
#include "sim/workload/importers/archive.h"
#include "sim/workload/importers/aten_cost.h"
#include "sim/workload/importers/collectives.h"
#include "sim/workload/importers/et_reader.h"
#include "sim/workload/importers/importers.h"

namespace memsim {
namespace {

// Reads a varint at `pos`; false when the bytes end first or it runs past 10 bytes.
bool read_varint(std::string_view bytes, std::size_t& pos, std::uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && pos < bytes.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(bytes[pos++]);
    value |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// The fields of one message in `m`: each a known field number with a wire type that fits;
// a message cut off by the end of `m` (a sniffed head) is well-formed so far.
bool well_formed(std::string_view m, std::uint64_t max_field, bool (*fits)(std::uint64_t field, int wire)) {
  std::size_t p = 0;
  while (p < m.size()) {
    std::uint64_t tag = 0;
    if (!read_varint(m, p, tag)) return true;  // cut off
    const int wire = static_cast<int>(tag & 7);
    const std::uint64_t field = tag >> 3;
    if (field == 0 || field > max_field || !fits(field, wire)) return false;
    std::uint64_t len = 0;
    switch (wire) {
      case 0:
        if (!read_varint(m, p, len)) return true;
        break;
      case 1: p += 8; break;
      case 5: p += 4; break;
      case 2:
        if (!read_varint(m, p, len)) return true;
        p += len;
        break;
      default: return false;
    }
  }
  return true;
}

double attr_number(const ChakraProtoMsg::AttributeProto& a) {
  using A = ChakraProtoMsg::AttributeProto;
  switch (a.value_case()) {
    case A::kDoubleVal: return a.double_val();
    case A::kFloatVal: return a.float_val();
    case A::kInt32Val: return a.int32_val();
    case A::kInt64Val: return static_cast<double>(a.int64_val());
    case A::kUint32Val: return a.uint32_val();
    case A::kUint64Val: return static_cast<double>(a.uint64_val());
    case A::kSint32Val: return a.sint32_val();
    case A::kSint64Val: return static_cast<double>(a.sint64_val());
    case A::kBoolVal: return a.bool_val() ? 1 : 0;
    default: return 0;
  }
}

// The Python literals chakra_converter writes into IOInfo: nested lists of ints, floats and
// quoted strings ("[[430, 431, 0, 53120, 4, 'cuda:0']]").
struct PyValue {
  enum Kind { list, integer, number, text, other } kind = other;
  std::vector<PyValue> items;
  std::int64_t i = 0;
  std::string s;
};

class PyParser {
 public:
  explicit PyParser(std::string_view text) : t_(text) {}
  std::optional<PyValue> parse() {
    auto v = value();
    skip();
    if (!v || p_ != t_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\n' || t_[p_] == '\t')) ++p_;
  }
  std::optional<PyValue> value() {
    skip();
    if (p_ >= t_.size()) return std::nullopt;
    PyValue v;
    const char c = t_[p_];
    if (c == '[' || c == '(') {
      // chakra_converter nests a few levels (lists of lists of tensors); far deeper text is
      // not its output, and recursing into it would overflow the stack.
      if (depth_ >= kMostDepth) return std::nullopt;
      ++depth_;
      struct Leave {
        int& d;
        ~Leave() { --d; }
      } leave{depth_};
      const char close = c == '[' ? ']' : ')';
      ++p_;
      v.kind = PyValue::list;
      skip();
      if (p_ < t_.size() && t_[p_] == close) {
        ++p_;
        return v;
      }
      while (true) {
        auto item = value();
        if (!item) return std::nullopt;
        v.items.push_back(std::move(*item));
        skip();
        if (p_ < t_.size() && t_[p_] == ',') {
          ++p_;
          skip();
          if (p_ < t_.size() && t_[p_] == close) {  // a trailing comma
            ++p_;
            return v;
          }
          continue;
        }
        if (p_ < t_.size() && t_[p_] == close) {
          ++p_;
          return v;
        }
        return std::nullopt;
      }
    }
    if (c == '\'' || c == '"') {
      ++p_;
      v.kind = PyValue::text;
      while (p_ < t_.size() && t_[p_] != c) {
        if (t_[p_] == '\\' && p_ + 1 < t_.size()) ++p_;
        v.s += t_[p_++];
      }
      if (p_ >= t_.size()) return std::nullopt;
      ++p_;
      return v;
    }
    const std::size_t start = p_;
    while (p_ < t_.size() && t_[p_] != ',' && t_[p_] != ']' && t_[p_] != ')' && t_[p_] != ' ') ++p_;
    const std::string word(t_.substr(start, p_ - start));
    if (word.empty()) return std::nullopt;
    char* end = nullptr;
    const long long i = std::strtoll(word.c_str(), &end, 10);
    if (end && *end == '\0') {
      v.kind = PyValue::integer;
      v.i = i;
      return v;
    }
    std::strtod(word.c_str(), &end);
    v.kind = end && *end == '\0' ? PyValue::number : PyValue::other;  // True, None, nan, ...
    return v;
  }
  static constexpr int kMostDepth = 64;
  std::string_view t_;
  std::size_t p_ = 0;
  int depth_ = 0;
};

bool is_tensor_value(const PyValue& v) {
  return v.kind == PyValue::list && v.items.size() >= 5 &&
         std::all_of(v.items.begin(), v.items.begin() + 5, [](const PyValue& x) { return x.kind == PyValue::integer && x.i >= 0; });
}

void flatten_tensors(const PyValue& v, const std::string& type, const PyValue* shape, std::vector<EtTensor>& out) {
  if (type.rfind("Tensor", 0) == 0 && is_tensor_value(v)) {
    if (type.find("nullptr") != std::string::npos) return;  // an optional argument left out
    EtTensor t;
    t.tensor = v.items[0].i;
    t.storage = v.items[1].i;
    const std::int64_t offset = v.items[2].i;
    t.numel = static_cast<std::uint64_t>(v.items[3].i);
    t.itemsize = static_cast<int>(std::min<std::int64_t>(v.items[4].i, 64));
    if (v.items.size() > 5 && v.items[5].kind == PyValue::text) t.device = v.items[5].s;
    if (shape && shape->kind == PyValue::list)
      for (const auto& d : shape->items)
        if (d.kind == PyValue::integer) t.shape.push_back(d.i);
    t.type = type;
    set_tensor_bytes(t, static_cast<std::uint64_t>(offset), t.numel);
    out.push_back(std::move(t));
    return;
  }
  if (type.find("Tensor") == std::string::npos || v.kind != PyValue::list) return;
  const auto types = list_element_types(type);
  for (std::size_t k = 0; k < v.items.size(); ++k) {
    const std::string et = k < types.size() ? std::string(types[k])
                                            : (is_tensor_value(v.items[k]) ? "Tensor" : "GenericList[Tensor]");
    const PyValue* sh = shape && shape->kind == PyValue::list && k < shape->items.size() ? &shape->items[k] : nullptr;
    flatten_tensors(v.items[k], et, sh, out);
  }
}

// A node's tensors, per argument, from its IOInfo; nullopt when it has none to read.
std::optional<std::vector<std::vector<EtTensor>>> io_tensors(const ChakraProtoMsg::IOInfo& io) {
  if (io.values().empty() || io.types().empty()) return std::nullopt;
  auto values = PyParser(io.values()).parse();
  auto types = PyParser(io.types()).parse();
  auto shapes = io.shapes().empty() ? std::nullopt : PyParser(io.shapes()).parse();
  if (!values || !types || values->kind != PyValue::list || types->kind != PyValue::list) return std::nullopt;
  std::vector<std::vector<EtTensor>> out(values->items.size());
  for (std::size_t i = 0; i < values->items.size() && i < types->items.size(); ++i) {
    if (types->items[i].kind != PyValue::text) continue;
    const PyValue* sh = shapes && shapes->kind == PyValue::list && i < shapes->items.size() ? &shapes->items[i] : nullptr;
    flatten_tensors(values->items[i], types->items[i].s, sh, out[i]);
  }
  return out;
}

std::string strip_index(std::string name) {
  // chakra_converter numbers the nodes it splits an op into: "aten::flatten_dense_tensors(0)".
  if (!name.empty() && name.back() == ')') {
    const auto open = name.rfind('(');
    if (open != std::string::npos && open + 2 < name.size() &&
        std::all_of(name.begin() + static_cast<std::ptrdiff_t>(open) + 1, name.end() - 1,
                    [](char c) { return c >= '0' && c <= '9'; }))
      name.resize(open);
  }
  return name;
}

// Tarjan's strongly connected components of the dependency graph (iterative): a component
// index per node.
std::vector<std::size_t> strongly_connected(const std::vector<std::vector<std::pair<std::size_t, bool>>>& deps) {
  const std::size_t n = deps.size(), none = SIZE_MAX;
  std::vector<std::size_t> index(n, none), low(n, 0), component(n, none), stack;
  std::vector<bool> on_stack(n, false);
  std::size_t next = 0, components = 0;
  for (std::size_t root = 0; root < n; ++root) {
    if (index[root] != none) continue;
    std::vector<std::pair<std::size_t, std::size_t>> work{{root, 0}};  // (node, next edge)
    index[root] = low[root] = next++;
    stack.push_back(root);
    on_stack[root] = true;
    while (!work.empty()) {
      auto& [v, e] = work.back();
      if (e < deps[v].size()) {
        const std::size_t w = deps[v][e++].first;
        if (index[w] == none) {
          index[w] = low[w] = next++;
          stack.push_back(w);
          on_stack[w] = true;
          work.emplace_back(w, 0);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        while (true) {
          const std::size_t w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          component[w] = components;
          if (w == v) break;
        }
        ++components;
      }
      const std::size_t done = v;
      work.pop_back();
      if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[done]);
    }
  }
  return component;
}

}  // namespace

bool looks_like_chakra_et(std::string_view head) {
  std::size_t pos = 0;
  std::uint64_t length = 0;
  if (!read_varint(head, pos, length) || length == 0 || length > (1ull << 32) || pos >= head.size()) return false;
  // GlobalMetadata: version (1, a string) and attributes (2, messages), nothing else.
  const std::string_view metadata = head.substr(pos, std::min<std::size_t>(length, head.size() - pos));
  const auto tag = static_cast<unsigned char>(metadata[0]);
  if (tag != 0x0a && tag != 0x12) return false;
  if (!well_formed(metadata, 2, [](std::uint64_t, int wire) { return wire == 2; })) return false;
  // Each attribute whole in the head is an AttributeProto: name (1), doc (2), a value (3-32).
  std::size_t p = 0;
  while (p < metadata.size()) {
    std::uint64_t t = 0, len = 0;
    if (!read_varint(metadata, p, t) || !read_varint(metadata, p, len)) break;
    if (t == 0x12 && p + len <= metadata.size() &&
        !well_formed(metadata.substr(p, len), 32, [](std::uint64_t f, int wire) { return f > 2 || wire == 2; }))
      return false;
    p += len;
  }
  // Text never holds control bytes but tab, LF and CR; a protobuf's tags and lengths do.
  return std::any_of(head.begin(), head.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 && u != '\t' && u != '\n' && u != '\r';
  });
}

Trace import_chakra_et(const std::string& bytes, const std::string& source, const std::string& trace_name) {
  const std::string_view all(bytes);
  auto fail = [&](const std::string& what) -> void { throw InputError(fmt::format("{}: {}", source, what)); };

  // The messages: GlobalMetadata, then Nodes. A message protobuf cannot parse is reported
  // below, located; protobuf's own log lines (invalid UTF-8 in a string) would only repeat it.
  const google::protobuf::LogSilencer quiet;
  ChakraProtoMsg::GlobalMetadata metadata;
  std::vector<ChakraProtoMsg::Node> nodes;
  std::vector<std::size_t> offsets;
  std::size_t pos = 0;
  for (std::size_t index = 0; pos < all.size(); ++index) {
    const std::size_t start = pos;
    std::uint64_t length = 0;
    if (!read_varint(all, pos, length))
      fail(fmt::format("truncated: message {} at byte {} has no complete length prefix", index, start));
    if (length > all.size() - pos)
      fail(fmt::format("truncated: message {} at byte {} declares {} bytes, but only {} remain", index,
                       start, length, all.size() - pos));
    const char* data = all.data() + pos;
    const int size = static_cast<int>(length);
    if (index == 0) {
      if (!metadata.ParseFromArray(data, size))
        fail(fmt::format("byte {}: message 0 is not a Chakra GlobalMetadata", start));
    } else {
      ChakraProtoMsg::Node node;
      if (!node.ParseFromArray(data, size))
        fail(fmt::format("byte {}: message {} is not a Chakra Node", start, index));
      nodes.push_back(std::move(node));
      offsets.push_back(start);
    }
    pos += length;
  }
  if (bytes.empty()) fail("empty: expected a Chakra GlobalMetadata message, then Nodes");

  auto who = [&](std::size_t i) { return fmt::format("node {} ({})", nodes[i].id(), nodes[i].name()); };
  std::unordered_map<std::uint64_t, std::size_t> index_of;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (!index_of.emplace(nodes[i].id(), i).second)
      fail(fmt::format("{}: id {} is used by node message {} too (byte {})", who(i), nodes[i].id(),
                       index_of[nodes[i].id()] + 1, offsets[index_of[nodes[i].id()]]));
  // Dependencies; then Kahn's order, file order among the ready nodes. A dependency on a
  // node the file does not hold is left out (chakra_converter drops nodes it does not keep);
  // data dependencies on missing nodes are errors only in a trace without tensors, where
  // they are how data flows.
  // Each node's dependencies, as node indices: data first, then control.
  std::vector<std::vector<std::pair<std::size_t, bool>>> deps_of(nodes.size());  // (node, is control)
  std::size_t missing_deps = 0;
  std::unordered_set<std::uint64_t> missing_ids;
  bool has_tensors = false;
  for (const auto& n : nodes)
    if (!n.inputs().values().empty() || !n.outputs().values().empty()) has_tensors = true;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (const auto* deps : {&nodes[i].data_deps(), &nodes[i].ctrl_deps()})
      for (std::uint64_t d : *deps) {
        auto it = index_of.find(d);
        if (it == index_of.end()) {
          if (deps == &nodes[i].data_deps() && !has_tensors)
            fail(fmt::format("{}: data_deps: no node {} in the file", who(i), d));
          ++missing_deps;
          missing_ids.insert(d);
          continue;
        }
        deps_of[i].emplace_back(it->second, deps == &nodes[i].ctrl_deps());
      }
  // Kahn's order, file order among the ready nodes; the nodes it cannot order are on or after
  // a cycle.
  auto kahn = [&](std::vector<std::size_t>& order) {
    std::vector<std::vector<std::size_t>> dependents(nodes.size());
    std::vector<std::size_t> waiting(nodes.size(), 0);
    for (std::size_t i = 0; i < nodes.size(); ++i)
      for (const auto& [d, control] : deps_of[i]) {
        dependents[d].push_back(i);
        ++waiting[i];
      }
    std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (waiting[i] == 0) ready.push(i);
    order.clear();
    while (!ready.empty()) {
      const std::size_t i = ready.top();
      ready.pop();
      order.push_back(i);
      for (std::size_t d : dependents[i])
        if (--waiting[d] == 0) ready.push(d);
    }
    return waiting;
  };
  std::vector<std::size_t> order;
  std::size_t dropped_control = 0;
  if (std::vector<std::size_t> waiting = kahn(order); order.size() != nodes.size()) {
    // chakra_converter can close a cycle with a control dependency (a host op on the kernel
    // it launched): within each strongly connected component, control dependencies go.
    const std::vector<std::size_t> component = strongly_connected(deps_of);
    for (std::size_t i = 0; i < nodes.size(); ++i)
      std::erase_if(deps_of[i], [&](const std::pair<std::size_t, bool>& d) {
        const bool drop = d.second && component[d.first] == component[i];
        dropped_control += drop;
        return drop;
      });
    waiting = kahn(order);
    if (order.size() != nodes.size())
      for (std::size_t i = 0; i < nodes.size(); ++i)
        if (waiting[i] > 0) fail(fmt::format("{}: its data dependencies form a cycle", who(i)));
  }

  Trace t;
  std::string stem = trace_name;
  if (stem.empty()) {
    stem = std::filesystem::path(source).filename().string();
    if (stem.size() > 3 && stem.ends_with(".et")) stem.resize(stem.size() - 3);
  }
  t.name = stem;
  std::string schema;
  for (const auto& a : metadata.attr())
    if (a.name() == "schema" && a.value_case() == ChakraProtoMsg::AttributeProto::kStringVal) schema = a.string_val();
  const std::string version = !metadata.version().empty() ? metadata.version() : schema;
  t.description = fmt::format("{} (Chakra execution trace{})", stem, version.empty() ? "" : ", version " + version);
  if (missing_deps)
    t.import_notes.push_back(fmt::format("{} dependencies on {} nodes the file does not hold left out", missing_deps,
                                         missing_ids.size()));
  if (dropped_control)
    t.import_notes.push_back(fmt::format("{} control dependencies that closed a cycle left out", dropped_control));

  // Per node: its attributes and tensors.
  struct Info {
    double num_ops = 0, tensor_size = 0, comm_size = 0;
    std::int64_t comm_type = -1;
    std::optional<bool> cpu;
    std::string group;
    std::optional<std::vector<std::vector<EtTensor>>> in, out;
  };
  std::vector<Info> info(nodes.size());
  bool device_tensors = false;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Info& f = info[i];
    if (const auto us = static_cast<double>(nodes[i].duration_micros()); !is_op_duration(us, kMicroseconds))
      fail(fmt::format("{}: duration_micros: expected {}, got {}", who(i), op_duration_range(kMicroseconds),
                       nodes[i].duration_micros()));
    for (const auto& a : nodes[i].attr()) {
      const double v = attr_number(a);
      const bool size = a.name() == "num_ops" || a.name() == "tensor_size" || a.name() == "comm_size";
      // 1e21: far past any op's work or message, and still exact as a byte count.
      if (size && !(v >= 0 && v <= 1e21))
        fail(fmt::format("{}: attr {}: expected a number from 0 to 1e21, got {}", who(i), a.name(), v));
      if (a.name() == "num_ops") f.num_ops = v;
      if (a.name() == "tensor_size") f.tensor_size = v;
      if (a.name() == "comm_size") f.comm_size = v;
      if (a.name() == "comm_type") f.comm_type = v >= 0 && v < 1e9 ? static_cast<std::int64_t>(v) : -1;
      if (a.name() == "is_cpu_op") f.cpu = v != 0;
      if (a.name() == "pg_name" && a.value_case() == ChakraProtoMsg::AttributeProto::kStringVal) f.group = a.string_val();
    }
    try {
      f.in = io_tensors(nodes[i].inputs());
    } catch (const InputError& e) {
      fail(fmt::format("{}: inputs: {}", who(i), e.what()));
    }
    try {
      f.out = io_tensors(nodes[i].outputs());
    } catch (const InputError& e) {
      fail(fmt::format("{}: outputs: {}", who(i), e.what()));
    }
    for (const auto* side : {&f.in, &f.out})
      if (*side)
        for (const auto& arg : **side)
          for (const auto& tensor : arg)
            if (tensor.device.rfind("cuda", 0) == 0) device_tensors = true;
  }
  auto counts = [&](const EtTensor& x) { return !device_tensors || x.device.rfind("cuda", 0) == 0; };
  // Host-side ops whose kernels are nodes of their own: a device-side node depends on them.
  std::vector<bool> launches_kernels(nodes.size(), false);
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (info[i].cpu && !*info[i].cpu)
      for (std::uint64_t d : nodes[i].data_deps())
        if (auto it = index_of.find(d); it != index_of.end() && info[it->second].cpu.value_or(false))
          launches_kernels[it->second] = true;

  std::unordered_map<std::int64_t, BufferId> buffer_of_storage;
  std::vector<std::size_t> maker;  // per buffer: the node that made it (SIZE_MAX: resident)
  std::vector<std::optional<BufferId>> result(nodes.size());
  std::size_t host_only = 0;
  // A host op's estimated work, handed to the first of its kernels (which carries its time).
  std::unordered_map<std::size_t, AtenCost> host_cost;
  for (std::size_t i : order) {
    const auto& n = nodes[i];
    const Info& f = info[i];
    if (n.type() == ChakraProtoMsg::METADATA_NODE || n.type() == ChakraProtoMsg::INVALID_NODE) continue;
    Op op;
    op.name = n.name().empty() ? fmt::format("node{}", n.id()) : n.name();
    const bool comm = n.type() == ChakraProtoMsg::COMM_COLL_NODE || n.type() == ChakraProtoMsg::COMM_SEND_NODE ||
                      n.type() == ChakraProtoMsg::COMM_RECV_NODE;
    if (n.type() == ChakraProtoMsg::COMM_COLL_NODE) {
      op.kind = chakra_collective_kind(f.comm_type);
      if (op.kind.empty()) op.kind = collective_kind(strip_index(n.name()));
      if (op.kind.empty() || op.kind == "wait") op.kind = "all_reduce";
    } else if (n.type() == ChakraProtoMsg::COMM_SEND_NODE) {
      op.kind = "send";
    } else if (n.type() == ChakraProtoMsg::COMM_RECV_NODE) {
      op.kind = "recv";
    }
    if (comm) {
      op.message_bytes = static_cast<std::uint64_t>(f.comm_size);
      op.group = f.group;
    }
    auto add_unique = [](auto& v, BufferId b) {
      if (std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
    };
    if (f.in || f.out) {
      // Memory from the tensors.
      const std::string base = strip_index(n.name());
      const std::string aten = base.rfind("aten::", 0) == 0 ? base.substr(6) : std::string();
      std::string schema_text;
      for (const auto& a : n.attr())
        if (a.name() == "op_schema" && a.value_case() == ChakraProtoMsg::AttributeProto::kStringVal) schema_text = a.string_val();
      const std::size_t n_in = f.in ? f.in->size() : 0;
      const std::vector<bool> mutated = mutated_arguments(schema_text, aten, n_in);
      const bool in_place_comm = comm && (op.kind == "all_reduce" || op.kind == "broadcast" || op.kind == "reduce");
      std::unordered_set<std::int64_t> reads;
      if (f.in)
        for (const auto& arg : *f.in)
          for (const auto& x : arg) reads.insert(x.storage);
      std::unordered_set<std::size_t> deps;
      for (std::uint64_t d : n.data_deps())
        if (auto it = index_of.find(d); it != index_of.end()) deps.insert(it->second);
      std::uint64_t in_bytes = 0, out_bytes = 0;
      if (f.in)
        for (std::size_t a = 0; a < f.in->size(); ++a)
          for (const auto& x : (*f.in)[a]) {
            if (!counts(x)) continue;
            auto it = buffer_of_storage.find(x.storage);
            BufferId b;
            if (it == buffer_of_storage.end()) {
              b = t.add_buffer(fmt::format("storage{}", x.storage), x.extent_bytes, Category::input, true);
              buffer_of_storage[x.storage] = b;
              maker.push_back(SIZE_MAX);
            } else {
              b = it->second;
              if (maker[b] == SIZE_MAX) t.buffers[b].bytes = std::max(t.buffers[b].bytes, x.extent_bytes);
            }
            in_bytes += x.bytes;
            add_unique((a < mutated.size() && mutated[a]) || in_place_comm ? op.updates : op.inputs, b);
          }
      std::unordered_set<std::int64_t> made_here;
      if (f.out)
        for (const auto& arg : *f.out)
          for (const auto& x : arg) {
            if (!counts(x)) continue;
            out_bytes += x.bytes;
            auto it = buffer_of_storage.find(x.storage);
            const bool in_place = it != buffer_of_storage.end() &&
                                  (reads.count(x.storage) || (maker[it->second] != SIZE_MAX && deps.count(maker[it->second])));
            if (in_place) {
              add_unique(op.updates, it->second);
              continue;
            }
            if (!made_here.insert(x.storage).second) continue;
            const BufferId b = t.add_buffer(fmt::format("storage{}@{}", x.storage, n.id()), x.extent_bytes, Category::activation);
            buffer_of_storage[x.storage] = b;
            maker.push_back(i);
            op.outputs.push_back(b);
          }
      erase_if(op.inputs, [&](BufferId b) { return std::find(op.updates.begin(), op.updates.end(), b) != op.updates.end(); });
      if (!comm) {
        std::vector<std::vector<const EtTensor*>> in_args, out_args;
        for (const auto* side : {&f.in, &f.out}) {
          auto& into = side == &f.in ? in_args : out_args;
          if (*side)
            for (const auto& arg : **side) {
              into.emplace_back();
              for (const auto& x : arg)
                if (counts(x)) into.back().push_back(&x);
            }
        }
        AtenCost cost = aten.empty() ? AtenCost{} : aten_cost(aten, in_args, out_args);
        if (launches_kernels[i]) host_cost[i] = cost;
        if (aten.empty())  // a kernel: the work of the host op that launched it, if the first
          for (std::uint64_t d : n.data_deps())
            if (auto it = index_of.find(d); it != index_of.end())
              if (auto h = host_cost.find(it->second); h != host_cost.end()) {
                cost = h->second;
                host_cost.erase(h);
                break;
              }
        op.kind = cost.kind;
        op.dtype = cost.dtype;
        op.flops = f.num_ops > 0 ? f.num_ops : cost.flops;
        op.bytes_moved = f.tensor_size > 0 ? f.tensor_size : static_cast<double>(in_bytes + out_bytes);
      } else {
        op.bytes_moved = static_cast<double>(std::max<std::uint64_t>(in_bytes + out_bytes, op.message_bytes));
        if (op.message_bytes == 0) op.message_bytes = std::max(in_bytes, out_bytes);
      }
    } else {
      for (std::uint64_t d : n.data_deps())
        if (auto it = index_of.find(d); it != index_of.end())
          if (const auto& b = result[it->second]; b && std::find(op.inputs.begin(), op.inputs.end(), *b) == op.inputs.end())
            op.inputs.push_back(*b);
      double out_bytes = 0;
      switch (n.type()) {
        case ChakraProtoMsg::COMP_NODE:
          op.kind = "other";
          op.flops = f.num_ops;
          op.bytes_moved = out_bytes = f.tensor_size;
          break;
        case ChakraProtoMsg::MEM_LOAD_NODE:
          op.kind = "copy";
          op.bytes_moved = out_bytes = f.tensor_size;
          break;
        case ChakraProtoMsg::MEM_STORE_NODE:
          op.kind = "copy";
          op.bytes_moved = f.tensor_size;
          break;
        case ChakraProtoMsg::COMM_SEND_NODE: op.bytes_moved = f.comm_size; break;
        default:  // COMM_RECV, COMM_COLL
          op.bytes_moved = out_bytes = f.comm_size;
          break;
      }
      if (out_bytes > 0) {
        const BufferId b = t.add_buffer(op.name + ".out", static_cast<std::uint64_t>(out_bytes), Category::activation);
        maker.push_back(i);
        op.outputs.push_back(b);
        result[i] = b;
      }
    }
    if (n.duration_micros() > 0) op.measured_s = static_cast<double>(n.duration_micros()) * 1e-6;
    if (launches_kernels[i]) {
      // Its kernels are nodes of their own and carry the time.
      ++host_only;
      op.flops = 0;
      op.bytes_moved = 0;
      op.measured_s = 0.0;
    }
    t.add_op(std::move(op));
  }
  if (order.size() > 1)
    t.import_notes.push_back("Chakra nodes do not say forward, backward or optimizer: every op counted as forward");
  if (host_only)
    t.import_notes.push_back(fmt::format("{} host-side ops whose GPU kernels are nodes of their own keep their memory "
                                         "effects but no time (measured 0 s, no work)",
                                         host_only));
  validate(t, source);
  return t;
}

ImporterInfo chakra_et_importer() {
  return {"chakra",
          "an MLCommons Chakra execution trace (length-prefixed protobuf: chakra_converter's .et output), one step "
          "with its own durations",
          looks_like_chakra_et,
          [](TraceFile& f, const std::string& name, const ImportOptions& options) {
            if (!options.kineto.empty())
              throw InputError(fmt::format("--kineto {}: a Kineto trace times the ops of a PyTorch Execution Trace; "
                                           "{} is a Chakra trace, which carries its own durations",
                                           options.kineto, f.source));
            if (options.step)
              throw InputError(fmt::format("--step {}: {} is a Chakra trace, which holds one step", *options.step,
                                           f.source));
            return import_chakra_et(f.bytes, f.source, name);
          }};
}

}  // namespace memsim
