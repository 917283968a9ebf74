#include "sim/workload/importers/chakra_et.h"

#include <filesystem>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/workload/importers/chakra_et.pb.h"  // generated from chakra_et.proto
#include "sim/core/error.h"

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

}  // namespace

bool looks_like_chakra_et(std::string_view head) {
  std::size_t pos = 0;
  std::uint64_t length = 0;
  if (head.empty() || static_cast<unsigned char>(head[0]) >= 0x20) return false;  // text starts printable
  if (!read_varint(head, pos, length) || pos >= head.size()) return false;
  const auto tag = static_cast<unsigned char>(head[pos]);
  return length > 0 && (tag == 0x0a || tag == 0x12);  // GlobalMetadata.version or .attr
}

Trace import_chakra_et(const std::string& bytes, const std::string& source) {
  const std::string_view all(bytes);
  auto fail = [&](const std::string& what) -> void { throw InputError(fmt::format("{}: {}", source, what)); };

  // The messages: GlobalMetadata, then Nodes.
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
  // Dependencies, checked; then Kahn's order, file order among the ready nodes.
  std::vector<std::vector<std::size_t>> dependents(nodes.size());
  std::vector<std::size_t> waiting(nodes.size(), 0);
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (const auto* deps : {&nodes[i].data_deps(), &nodes[i].ctrl_deps()})
      for (std::uint64_t d : *deps) {
        auto it = index_of.find(d);
        if (it == index_of.end())
          fail(fmt::format("{}: {}: no node {} in the file", who(i),
                           deps == &nodes[i].data_deps() ? "data_deps" : "ctrl_deps", d));
        dependents[it->second].push_back(i);
        ++waiting[i];
      }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (waiting[i] == 0) ready.push(i);
  std::vector<std::size_t> order;
  while (!ready.empty()) {
    const std::size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (std::size_t d : dependents[i])
      if (--waiting[d] == 0) ready.push(d);
  }
  if (order.size() != nodes.size())
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (waiting[i] > 0) fail(fmt::format("{}: its dependencies form a cycle", who(i)));

  Trace t;
  std::string stem = std::filesystem::path(source).filename().string();
  if (stem.size() > 3 && stem.ends_with(".et")) stem.resize(stem.size() - 3);
  t.name = stem;
  t.description = fmt::format("{} (Chakra execution trace{})", stem,
                              metadata.version().empty() ? "" : ", version " + metadata.version());
  std::vector<std::optional<BufferId>> result(nodes.size());
  for (std::size_t i : order) {
    const auto& n = nodes[i];
    if (n.type() == ChakraProtoMsg::METADATA_NODE || n.type() == ChakraProtoMsg::INVALID_NODE) continue;
    double num_ops = 0, tensor_size = 0, comm_size = 0;
    for (const auto& a : n.attr()) {
      const double v = attr_number(a);
      if (v < 0) fail(fmt::format("{}: attr {}: expected a number >= 0, got {}", who(i), a.name(), v));
      if (a.name() == "num_ops") num_ops = v;
      if (a.name() == "tensor_size") tensor_size = v;
      if (a.name() == "comm_size") comm_size = v;
    }
    Op op;
    op.name = n.name().empty() ? fmt::format("node{}", n.id()) : n.name();
    for (std::uint64_t d : n.data_deps())
      if (const auto& b = result[index_of[d]]; b && std::find(op.inputs.begin(), op.inputs.end(), *b) == op.inputs.end())
        op.inputs.push_back(*b);
    double out_bytes = 0;
    switch (n.type()) {
      case ChakraProtoMsg::COMP_NODE:
        op.kind = "other";
        op.flops = num_ops;
        op.bytes_moved = tensor_size;
        out_bytes = tensor_size;
        break;
      case ChakraProtoMsg::MEM_LOAD_NODE:
        op.kind = "copy";
        op.bytes_moved = out_bytes = tensor_size;
        break;
      case ChakraProtoMsg::MEM_STORE_NODE:
        op.kind = "copy";
        op.bytes_moved = tensor_size;
        break;
      case ChakraProtoMsg::COMM_SEND_NODE:
        op.kind = "copy";
        op.bytes_moved = comm_size;
        break;
      default:  // COMM_RECV, COMM_COLL
        op.kind = "copy";
        op.bytes_moved = out_bytes = comm_size;
        break;
    }
    if (out_bytes > 0) {
      const BufferId b = t.add_buffer(op.name + ".out", static_cast<std::uint64_t>(out_bytes), Category::activation);
      op.outputs.push_back(b);
      result[i] = b;
    }
    if (n.duration_micros() > 0) op.measured_s = static_cast<double>(n.duration_micros()) * 1e-6;
    t.add_op(std::move(op));
  }
  validate(t, source);
  return t;
}

}  // namespace memsim
