#include "sim/workload/trace_io.h"

#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/workload/durations.h"

namespace memsim {
namespace {

// Sizes in a trace are plain byte counts; a hand-written trace may also use units ("4MiB").
// Either way at most the physical size bound (units.h), so sums of them cannot wrap.
std::uint64_t read_bytes(const ConfigNode& n) {
  const auto most = static_cast<std::int64_t>(physical_range(UnitKind::size).max);
  if (n.is_scalar()) {
    const std::string s = n.as_string();
    if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) {
      if (s.size() > 18 || std::stoll(s) > most)
        n.fail_expected(fmt::format("a byte count from 0 to {} (1PiB)", most));
      return static_cast<std::uint64_t>(n.as_int_in(0, most));
    }
  }
  if (!n.is_scalar() || !parse_bytes(n.as_string()))
    n.fail_expected("a byte count like 4096 or a size like '4MiB'");
  return n.as_bytes();
}

// The physical bounds of an op's numbers: a whole large training run is about 1e24 FLOPs
// (its measured time is bounded with every trace's, durations.h).
constexpr double kMostFlops = 1e24;
constexpr double kMostBytesMoved = 1e21;

double read_nonnegative(const ConfigNode& n, double most, const char* range) {
  double v = n.as_double();
  if (v < 0 || v > most) n.fail_expected(range);
  return v;
}

std::vector<BufferId> read_refs(const ConfigNode& list, const std::map<std::int64_t, BufferId>& ids) {
  std::vector<BufferId> out;
  for (const auto& item : list.items()) {
    auto it = ids.find(item.as_int());
    if (it == ids.end()) item.fail(fmt::format("unknown buffer {}", item.as_int()));
    out.push_back(it->second);
  }
  return out;
}

}  // namespace

void write_trace_json(const Trace& trace, std::ostream& out) {
  // Written by hand, one buffer or op per line: diff-friendly, and byte-identical run to run.
  auto str = [](const std::string& s) { return nlohmann::json(s).dump(); };
  auto num = [](double v) { return nlohmann::json(v).dump(); };
  auto ids = [](const auto& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  out << "{\n  \"format\": \"memsim-trace\",\n  \"version\": " << kTraceFormatVersion << ",\n";
  out << "  \"name\": " << str(trace.name) << ",\n";
  out << "  \"description\": " << str(trace.description) << ",\n";
  if (!trace.measured_on.empty()) out << "  \"measured_on\": " << str(trace.measured_on) << ",\n";
  if (trace.parameters) out << "  \"parameters\": " << trace.parameters << ",\n";
  if (trace.samples) out << "  \"samples\": " << trace.samples << ",\n";
  if (trace.sample_tokens) out << "  \"sample_tokens\": " << trace.sample_tokens << ",\n";
  if (trace.parallel.ranks > 1)
    out << fmt::format("  \"parallel\": {{\"ranks\": {}, \"symmetric\": {}, \"summary\": {}{}}},\n",
                       trace.parallel.ranks, trace.parallel.symmetric ? "true" : "false",
                       str(trace.parallel.summary), trace.parallel.from_trace ? ", \"from_trace\": true" : "");
  if (!trace.groups.empty()) {
    out << "  \"groups\": [\n";
    for (std::size_t i = 0; i < trace.groups.size(); ++i) {
      std::string ranks;
      for (std::uint32_t r : trace.groups[i].ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      out << fmt::format("    {{\"name\": {}, \"ranks\": [{}]}}{}\n", str(trace.groups[i].name), ranks,
                         i + 1 < trace.groups.size() ? "," : "");
    }
    out << "  ],\n";
  }
  out << "  \"buffers\": [\n";
  for (std::size_t i = 0; i < trace.buffers.size(); ++i) {
    const Buffer& b = trace.buffers[i];
    out << fmt::format("    {{\"id\": {}, \"name\": {}, \"bytes\": {}, \"category\": \"{}\"{}{}}}{}\n",
                       b.id, str(b.name), b.bytes, to_string(b.category),
                       b.persistent ? ", \"persistent\": true" : "",
                       b.device ? fmt::format(", \"device\": {}", b.device) : std::string(),
                       i + 1 < trace.buffers.size() ? "," : "");
  }
  out << "  ],\n  \"ops\": [\n";
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    const Op& op = trace.ops[i];
    std::string extra;
    if (op.device) extra += fmt::format(", \"device\": {}", op.device);
    if (op.stream) extra += fmt::format(", \"stream\": {}", op.stream);
    if (!op.updates.empty()) extra += ", \"updates\": " + ids(op.updates);
    if (op.workspace_bytes) extra += fmt::format(", \"workspace_bytes\": {}", op.workspace_bytes);
    if (op.measured_s) extra += ", \"measured_s\": " + num(*op.measured_s);
    if (op.message_bytes) extra += fmt::format(", \"message_bytes\": {}", op.message_bytes);
    if (!op.group.empty()) extra += ", \"group\": " + str(op.group);
    if (!op.waits_for.empty()) {
      extra += ", \"waits_for\": [";
      for (std::size_t w = 0; w < op.waits_for.size(); ++w)
        extra += (w ? "," : "") + std::to_string(op.waits_for[w]);
      extra += "]";
    }
    out << fmt::format(
        "    {{\"name\": {}, \"kind\": {}, \"phase\": \"{}\", \"dtype\": \"{}\", \"inputs\": {}, "
        "\"outputs\": {}, \"flops\": {}, \"bytes\": {}{}}}{}\n",
        str(op.name), str(op.kind), to_string(op.phase), to_string(op.dtype), ids(op.inputs),
        ids(op.outputs), num(op.flops), num(op.bytes_moved), extra,
        i + 1 < trace.ops.size() ? "," : "");
  }
  out << "  ]\n}\n";
}

bool is_native_trace(const ConfigNode& root) {
  if (!root.is_map()) return false;
  auto f = root.find("format");
  return f && f->is_scalar() && f->as_string() == "memsim-trace";
}

Trace read_trace(const ConfigNode& root) {
  root.allow_only({"format", "version", "name", "description", "measured_on", "parameters",
                   "samples", "sample_tokens", "buffers", "ops", "groups", "parallel"});
  auto version = root.at("version");
  if (version.as_int() != kTraceFormatVersion)
    version.fail_expected(fmt::format("format version {}", kTraceFormatVersion));
  Trace t;
  t.name = root.at("name").as_string();
  if (auto d = root.find("description")) t.description = d->as_string();
  if (auto m = root.find("measured_on")) t.measured_on = m->as_string();
  if (auto p = root.find("parameters")) t.parameters = static_cast<std::uint64_t>(p->as_int_in(0, INT64_MAX));
  if (auto s = root.find("samples")) t.samples = static_cast<std::uint64_t>(s->as_int_in(0, INT64_MAX));
  if (auto s = root.find("sample_tokens")) t.sample_tokens = static_cast<std::uint64_t>(s->as_int_in(0, INT64_MAX));

  if (auto par = root.find("parallel")) {
    par->allow_only({"ranks", "symmetric", "summary", "from_trace"});
    const ConfigNode ranks = par->at("ranks");
    t.parallel.ranks = static_cast<std::uint32_t>(ranks.as_int_in(1, 1 << 20));
    if (t.parallel.ranks > 1) t.parallel.origin = ranks.where() + ": " + ranks.key_path();
    if (auto sym = par->find("symmetric")) t.parallel.symmetric = sym->as_bool();
    if (auto sum = par->find("summary")) t.parallel.summary = sum->as_string();
    if (auto ft = par->find("from_trace")) t.parallel.from_trace = ft->as_bool();
    // The file does not say how its ranks split into tensor, context and pipeline ranks, so
    // neither how many data-parallel replicas train samples: throughput counts none.
    if (t.parallel.ranks > 1) t.samples = 0;
  }
  if (auto groups = root.find("groups"))
    for (const auto& g : groups->items()) {
      g.allow_only({"name", "ranks"});
      ProcessGroup pg;
      pg.name = g.at("name").as_string();
      if (t.find_group(pg.name)) g.at("name").fail(fmt::format("process group '{}' is defined twice", pg.name));
      for (const auto& r : g.at("ranks").items())
        pg.ranks.push_back(static_cast<std::uint32_t>(r.as_int_in(0, 1 << 20)));
      if (pg.ranks.empty()) g.at("ranks").fail_expected("a list of at least one rank");
      t.groups.push_back(std::move(pg));
    }

  std::map<std::int64_t, BufferId> ids;
  auto buffer_nodes = root.at("buffers").items();
  for (const auto& n : buffer_nodes) {
    n.allow_only({"id", "name", "bytes", "category", "persistent", "device"});
    auto id = n.at("id");
    if (!ids.emplace(id.as_int_in(0, INT64_MAX), static_cast<BufferId>(t.buffers.size())).second)
      id.fail(fmt::format("buffer id {} is used twice", id.as_int()));
    auto cat_node = n.at("category");
    auto cat = category_from_string(cat_node.as_string());
    if (!cat)
      cat_node.fail_expected(
          "a category (weight, gradient, optimizer_state, activation, activation_grad, input, "
          "workspace, other, comm, runtime)");
    bool persistent = false;
    if (auto p = n.find("persistent")) persistent = p->as_bool();
    const BufferId b = t.add_buffer(n.at("name").as_string(), read_bytes(n.at("bytes")), *cat, persistent);
    if (auto d = n.find("device")) t.buffers[b].device = static_cast<std::uint32_t>(d->as_int_in(0, 1 << 20));
  }
  std::vector<ConfigNode> op_nodes = root.at("ops").items();
  std::vector<OpId> producer_seen(t.buffers.size(), kNoOp);
  for (const auto& n : op_nodes) {
    n.allow_only({"name", "kind", "phase", "dtype", "device", "stream", "inputs", "outputs",
                  "updates", "flops", "bytes", "workspace_bytes", "measured_s", "message_bytes", "group",
                  "waits_for"});
    Op op;
    op.name = n.at("name").as_string();
    op.kind = n.at("kind").as_string();
    auto phase_node = n.at("phase");
    auto phase = phase_from_string(phase_node.as_string());
    if (!phase) phase_node.fail_expected("forward, backward or optimizer");
    op.phase = *phase;
    auto dtype_node = n.at("dtype");
    auto dtype = dtype_from_string(dtype_node.as_string());
    if (!dtype) dtype_node.fail_expected("a dtype (fp32, tf32, fp16, bf16, fp8, int64, int32, int8, bool)");
    op.dtype = *dtype;
    if (auto d = n.find("device")) op.device = static_cast<std::uint32_t>(d->as_int_in(0, 1 << 20));
    if (auto s = n.find("stream")) op.stream = static_cast<std::uint16_t>(s->as_int_in(0, 65535));
    op.inputs = read_refs(n.at("inputs"), ids);
    auto outputs_node = n.at("outputs");
    op.outputs = read_refs(outputs_node, ids);
    if (auto u = n.find("updates")) op.updates = read_refs(*u, ids);
    op.flops = read_nonnegative(n.at("flops"), kMostFlops, "a number from 0 to 1e24");
    op.bytes_moved = read_nonnegative(n.at("bytes"), kMostBytesMoved, "a number from 0 to 1e21");
    if (auto w = n.find("workspace_bytes")) op.workspace_bytes = read_bytes(*w);
    if (auto m = n.find("measured_s")) {
      const double s = m->as_double();
      if (!is_op_duration(s, kSeconds)) m->fail_expected(op_duration_range(kSeconds));
      op.measured_s = s;
    }
    if (auto m = n.find("message_bytes")) op.message_bytes = read_bytes(*m);
    if (auto g = n.find("group")) op.group = g->as_string();
    const OpId id = static_cast<OpId>(t.ops.size());
    if (auto w = n.find("waits_for"))
      for (const auto& item : w->items()) {
        const std::int64_t before = item.as_int();
        if (before < 0 || before >= static_cast<std::int64_t>(id))
          item.fail_expected(fmt::format("the index of an earlier op (0 to {})", static_cast<std::int64_t>(id) - 1));
        op.waits_for.push_back(static_cast<OpId>(before));
      }
    const auto output_items = outputs_node.items();
    for (std::size_t k = 0; k < op.outputs.size(); ++k) {
      const BufferId b = op.outputs[k];
      if (producer_seen[b] == id)
        output_items[k].fail(fmt::format("buffer '{}' is listed twice in this op's outputs", t.buffers[b].name));
      if (producer_seen[b] != kNoOp)
        output_items[k].fail(fmt::format("buffer '{}' is already written by op '{}'",
                                         t.buffers[b].name, t.ops[producer_seen[b]].name));
      producer_seen[b] = id;
    }
    t.add_op(std::move(op));
    t.op_sources.push_back(fmt::format("{}: {}", n.where(), n.key_path()));
  }
  validate(t, root.file(), [&](OpId op) {
    return fmt::format("{}: {}", op_nodes[op].where(), op_nodes[op].key_path());
  });
  return t;
}

}  // namespace memsim
