#include "sim/workload/trace.h"

#include <algorithm>
#include <array>
#include <type_traits>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/units.h"

namespace memsim {
namespace {

constexpr std::array<std::string_view, kCategoryCount> kCategoryNames{
    "weight", "gradient", "optimizer_state", "activation", "activation_grad",
    "input",  "workspace", "other", "comm", "runtime"};
constexpr std::array<std::string_view, 3> kPhaseNames{"forward", "backward", "optimizer"};
constexpr std::array<std::string_view, kDTypeCount> kDTypeNames{
    "fp32", "tf32", "fp16", "bf16", "fp8", "int64", "int32", "int8", "bool"};
constexpr std::array<int, kDTypeCount> kDTypeBytes{4, 4, 2, 2, 1, 8, 4, 1, 1};

template <typename E, std::size_t N>
std::optional<E> lookup(const std::array<std::string_view, N>& names, std::string_view s) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace

std::string_view to_string(Category c) { return kCategoryNames[static_cast<int>(c)]; }
std::optional<Category> category_from_string(std::string_view s) {
  return lookup<Category>(kCategoryNames, s);
}
std::string_view to_string(Phase p) { return kPhaseNames[static_cast<int>(p)]; }
std::optional<Phase> phase_from_string(std::string_view s) { return lookup<Phase>(kPhaseNames, s); }
std::string_view to_string(DType d) { return kDTypeNames[static_cast<int>(d)]; }
std::optional<DType> dtype_from_string(std::string_view s) { return lookup<DType>(kDTypeNames, s); }
int dtype_bytes(DType d) { return kDTypeBytes[static_cast<int>(d)]; }

BufferId Trace::add_buffer(std::string buffer_name, std::uint64_t bytes, Category category,
                           bool persistent) {
  Buffer b;
  b.id = static_cast<BufferId>(buffers.size());
  b.name = std::move(buffer_name);
  b.bytes = bytes;
  b.category = category;
  b.persistent = persistent;
  buffers.push_back(std::move(b));
  return buffers.back().id;
}

OpId Trace::add_op(Op&& op) {
  op.id = static_cast<OpId>(ops.size());
  for (BufferId out : op.outputs) buffers.at(out).producer = op.id;
  ops.push_back(std::move(op));
  return ops.back().id;
}

const ProcessGroup* Trace::find_group(const std::string& group_name) const {
  for (const ProcessGroup& g : groups)
    if (g.name == group_name) return &g;
  return nullptr;
}

Trace Trace::without_ops() const {
  Trace out;
  out.name = name;
  out.description = description;
  out.measured_on = measured_on;
  out.parameters = parameters;
  out.samples = samples;
  out.sample_tokens = sample_tokens;
  out.import_notes = import_notes;
  out.buffers = buffers;
  for (Buffer& b : out.buffers) b.producer = kNoOp;
  out.groups = groups;
  out.parallel = parallel;
  out.units = units;
  return out;
}

void assign_units_from_names(Trace& trace) {
  std::unordered_map<std::string, UnitId> index;
  for (UnitId u = 0; u < trace.units.size(); ++u) index.emplace(trace.units[u].name, u);
  auto unit_of = [&](const std::string& name) {
    // Up to the first all-digit component, else the first component.
    std::size_t start = 0, end = name.find('.');
    bool layer = false;
    while (true) {
      const std::size_t dot = name.find('.', start);
      const std::size_t stop = dot == std::string::npos ? name.size() : dot;
      if (stop > start && std::all_of(name.begin() + static_cast<std::ptrdiff_t>(start),
                                      name.begin() + static_cast<std::ptrdiff_t>(stop),
                                      [](char c) { return c >= '0' && c <= '9'; })) {
        end = stop;
        layer = true;
        break;
      }
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    std::string unit = name.substr(0, end);
    const auto [it, fresh] = index.try_emplace(unit, static_cast<UnitId>(trace.units.size()));
    if (fresh) trace.units.push_back({std::move(unit), layer});
    return it->second;
  };
  for (Op& op : trace.ops)
    if (op.unit == kNoUnit)
      op.unit = unit_of(op.phase == Phase::optimizer && !op.updates.empty() ? trace.buffers.at(op.updates[0]).name
                                                                             : op.name);
}

bool Trace::communicates() const {
  if (groups.empty()) return false;
  for (const Op& op : ops)
    if (!op.group.empty() && find_group(op.group)) return true;
  return false;
}

std::uint64_t Trace::total_bytes(Category c) const {
  std::uint64_t sum = 0;
  for (const auto& b : buffers)
    if (b.category == c) sum += b.bytes;
  return sum;
}

void validate(const Trace& trace, const std::string& source,
              const std::function<std::string(OpId)>& op_location) {
  const auto n_buffers = trace.buffers.size();
  const auto n_ops = trace.ops.size();
  auto bad = [&](const std::string& what) {
    throw InputError(fmt::format("{}: {}", source, what));
  };
  auto bad_op = [&](OpId op, const std::string& what) {
    if (op_location) throw InputError(fmt::format("{}: {}", op_location(op), what));
    bad(what);
  };
  // Sizes within the physical bound, and a total that fits in 64 bits with room to spare:
  // every sum of bytes made later (per tier, per category, with workspace) is then exact.
  const auto most = static_cast<std::uint64_t>(physical_range(UnitKind::size).max);
  std::uint64_t total = 0;
  for (const Buffer& b : trace.buffers) {
    if (b.bytes > most) bad(fmt::format("buffer '{}' is {} bytes, more than 1PiB", b.name, b.bytes));
    total = checked_add(total, b.bytes).value_or(UINT64_MAX);
  }
  for (const Op& op : trace.ops) {
    if (op.workspace_bytes > most)
      bad_op(op.id, fmt::format("op '{}' asks for {} bytes of workspace, more than 1PiB", op.name, op.workspace_bytes));
    total = checked_add(total, op.workspace_bytes).value_or(UINT64_MAX);
  }
  if (total > (UINT64_MAX >> 2))
    bad(fmt::format("the buffers and workspaces add up to more than {} bytes", UINT64_MAX >> 2));
  for (std::size_t i = 0; i < n_buffers; ++i) {
    const Buffer& b = trace.buffers[i];
    if (b.id != i) bad(fmt::format("buffer '{}' has id {}, expected {}", b.name, b.id, i));
    if (b.producer != kNoOp && b.producer >= n_ops)
      bad(fmt::format("buffer '{}' names producer op {} but the trace has {} ops", b.name,
                      b.producer, n_ops));
  }
  std::vector<OpId> made_by(n_buffers, kNoOp);
  for (std::size_t i = 0; i < n_ops; ++i) {
    const Op& op = trace.ops[i];
    if (op.id != i) bad(fmt::format("op '{}' has id {}, expected {}", op.name, op.id, i));
    auto check_ref = [&](BufferId id, const char* list) {
      if (id >= n_buffers)
        bad(fmt::format("op '{}' {} buffer {}, which is not in the trace", op.name, list, id));
    };
    for (BufferId id : op.inputs) check_ref(id, "reads");
    for (BufferId id : op.updates) check_ref(id, "updates");
    for (BufferId id : op.outputs) {
      check_ref(id, "writes");
      if (made_by[id] != kNoOp)
        bad(fmt::format("buffer '{}' is written by both op '{}' and op '{}'",
                        trace.buffers[id].name, trace.ops[made_by[id]].name, op.name));
      made_by[id] = op.id;
      if (trace.buffers[id].producer != op.id)
        bad(fmt::format("buffer '{}' is written by op '{}' but names another producer",
                        trace.buffers[id].name, op.name));
    }
    if (op.flops < 0 || op.bytes_moved < 0)
      bad(fmt::format("op '{}' has negative flops or bytes", op.name));
    for (OpId w : op.waits_for)
      if (w >= op.id)
        bad_op(op.id, fmt::format("op '{}' waits for op {}, which is not an earlier op", op.name, w));
  }
  for (const ProcessGroup& g : trace.groups) {
    if (g.ranks.empty()) bad(fmt::format("process group '{}' has no ranks", g.name));
    std::vector<std::uint32_t> sorted = g.ranks;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      bad(fmt::format("process group '{}' lists a rank twice", g.name));
  }
  for (std::size_t i = 0; i < n_buffers; ++i)
    if (trace.buffers[i].producer != kNoOp && made_by[i] == kNoOp)
      bad(fmt::format("buffer '{}' names producer op {} which does not write it",
                      trace.buffers[i].name, trace.buffers[i].producer));

  // Dependencies: op -> the producers of what it reads or updates. A producer later in issue
  // order is either a cycle (reported as such) or an op that reads a buffer before it exists.
  // When every producer comes earlier (the usual case) issue order is a topological order and
  // there is nothing more to look for; otherwise an iterative DFS with colours finds a cycle
  // in O(ops + edges) to name it.
  bool in_order = true;
  for (std::size_t i = 0; i < n_ops && in_order; ++i)
    for (BufferId b : trace.ops[i].reads())
      if (made_by[b] != kNoOp && made_by[b] >= i) {
        in_order = false;
        break;
      }
  if (in_order) return;
  enum Colour : std::uint8_t { white, grey, black };
  std::vector<Colour> colour(n_ops, white);
  std::vector<OpId> parent(n_ops, kNoOp);
  auto deps = [&](OpId o) {
    std::vector<OpId> d;
    for (BufferId b : trace.ops[o].reads())
      if (made_by[b] != kNoOp) d.push_back(made_by[b]);
    return d;
  };
  for (OpId start = 0; start < n_ops; ++start) {
    if (colour[start] != white) continue;
    std::vector<std::pair<OpId, std::vector<OpId>>> stack;
    stack.emplace_back(start, deps(start));
    colour[start] = grey;
    while (!stack.empty()) {
      auto& [o, pending] = stack.back();
      if (pending.empty()) {
        colour[o] = black;
        stack.pop_back();
        continue;
      }
      OpId next = pending.back();
      pending.pop_back();
      if (colour[next] == grey) {
        // Walk the grey stack from `next` to `o` to name the cycle.
        std::string names;
        bool in_cycle = false;
        for (const auto& frame : stack) {
          if (frame.first == next) in_cycle = true;
          if (in_cycle) names += fmt::format("'{}' -> ", trace.ops[frame.first].name);
        }
        names += fmt::format("'{}'", trace.ops[next].name);
        bad_op(next, fmt::format("the trace has a dependency cycle: {}", names));
      }
      if (colour[next] == white) {
        colour[next] = grey;
        OpId n = next;
        stack.emplace_back(n, deps(n));
      }
    }
  }
  for (std::size_t i = 0; i < n_ops; ++i)
    for (OpId d : deps(static_cast<OpId>(i)))
      if (d > i)
        bad_op(static_cast<OpId>(i),
               fmt::format("op '{}' uses a buffer made by op '{}', which comes later in issue order",
                        trace.ops[i].name, trace.ops[d].name));
}

std::string op_where(const Trace& trace, OpId id) {
  return id < trace.op_sources.size() && !trace.op_sources[id].empty() ? trace.op_sources[id] : trace.name;
}

Trace combine_per_device(const std::vector<Trace>& traces, const std::vector<std::string>& devices,
                         const std::vector<std::uint32_t>& slots) {
  auto slot = [&](std::size_t k) { return k < slots.size() ? slots[k] : static_cast<std::uint32_t>(k); };
  if (traces.size() == 1 && slot(0) == 0) return traces[0];
  Trace out;
  const bool same = std::all_of(traces.begin(), traces.end(),
                                [&](const Trace& t) { return t.name == traces[0].name; });
  out.name = same ? traces[0].name : "mixed";
  out.description = same ? fmt::format("{} x {} devices", traces[0].description.empty() ? traces[0].name : traces[0].description, traces.size())
                         : fmt::format("{} workloads on {} devices", traces.size(), traces.size());
  out.parameters = traces[0].parameters;
  // A replica on each device trains its own samples (unknown when one of them does not say).
  const bool counted = std::all_of(traces.begin(), traces.end(), [&](const Trace& t) {
    return t.samples > 0 && t.sample_tokens == traces[0].sample_tokens;
  });
  for (const Trace& t : traces) out.samples += counted ? t.samples : 0;
  out.sample_tokens = counted ? traces[0].sample_tokens : 0;
  out.measured_on = traces[0].measured_on;
  out.parallel = traces[0].parallel;
  // Process groups are shared: a rank's step names the group, the group names the devices.
  for (const Trace& t : traces)
    for (const ProcessGroup& g : t.groups)
      if (!out.find_group(g.name)) out.groups.push_back(g);
  std::size_t n_buffers = 0, n_ops = 0;
  for (const auto& t : traces) {
    n_buffers += t.buffers.size();
    n_ops += t.ops.size();
  }
  out.buffers.reserve(n_buffers);
  out.ops.reserve(n_ops);
  for (std::size_t k = 0; k < traces.size(); ++k) {
    const Trace& t = traces[k];
    for (const Op& op : t.ops)
      if (op.device != 0)
        throw InputError(fmt::format("{}: op '{}' already names device {}; only single-device traces "
                                     "can be placed one per device",
                                     op_where(t, op.id), op.name, op.device));
    append_on_device(out, t, devices.at(k) + ":", slot(k));
  }
  return out;
}

namespace {

// append_on_device(), copying t's ops and names or (a Trace&&) moving them.
template <class Source>
void append_ops_on_device(Trace& out, Source&& t, const std::string& prefix, std::uint32_t device,
                          const std::map<std::string, std::string>& group_names) {
  constexpr bool take = !std::is_lvalue_reference_v<Source> && !std::is_const_v<std::remove_reference_t<Source>>;
  const auto base = static_cast<BufferId>(out.buffers.size());
  for (auto& b : t.buffers) {
    std::string name;
    if constexpr (take) {
      name = std::move(b.name);
      name.insert(0, prefix);
    } else {
      name = prefix + b.name;
    }
    const BufferId id = out.add_buffer(std::move(name), b.bytes, b.category, b.persistent);
    out.buffers[id].device = device;
  }
  const auto op_base = static_cast<OpId>(out.ops.size());
  // The groups renamed, as interned names: an op's group is found among them by identity,
  // not by comparing strings in the map and interning the new name per op.
  std::vector<std::pair<Interned, Interned>> renamed;
  for (const auto& [from, to] : group_names) renamed.emplace_back(from, to);
  for (auto& op : t.ops) {
    if (op.id < t.op_sources.size()) {
      out.op_sources.resize(out.ops.size());
      out.op_sources.push_back(t.op_sources[op.id]);
    }
    Op copy;
    if constexpr (take) {
      copy = std::move(op);
      copy.name.insert(0, prefix);
    } else {
      copy = with_name(op, prefix + op.name);
    }
    copy.device = device;
    copy.unit = kNoUnit;
    for (auto* list : {&copy.inputs, &copy.outputs, &copy.updates})
      for (BufferId& b : *list) b += base;
    for (OpId& w : copy.waits_for) w += op_base;
    for (const auto& [from, to] : renamed)
      if (copy.group == from) {
        copy.group = to;
        break;
      }
    out.add_op(std::move(copy));
  }
  if constexpr (take) {
    // Their memory back now, for what is placed next: a pipeline's stages and its whole
    // step were otherwise all held at once.
    std::vector<Op>().swap(t.ops);
    std::vector<Buffer>().swap(t.buffers);
  }
}

}  // namespace

void append_on_device(Trace& out, const Trace& t, const std::string& prefix, std::uint32_t device,
                      const std::map<std::string, std::string>& group_names) {
  append_ops_on_device(out, t, prefix, device, group_names);
}

void append_on_device(Trace& out, Trace&& t, const std::string& prefix, std::uint32_t device,
                      const std::map<std::string, std::string>& group_names) {
  append_ops_on_device(out, std::move(t), prefix, device, group_names);
}

IdLists::IdLists(std::size_t owners, const std::vector<std::uint32_t>& owner_of,
                 const std::vector<std::uint32_t>& ids)
    : at_(owners + 1, 0), ids_(ids.size()) {
  for (std::uint32_t o : owner_of) ++at_[o + 1];
  for (std::size_t i = 1; i < at_.size(); ++i) at_[i] += at_[i - 1];
  std::vector<std::uint32_t> next(at_.begin(), at_.end() - 1);
  for (std::size_t k = 0; k < ids.size(); ++k) ids_[next[owner_of[k]]++] = ids[k];
}

Liveness compute_liveness(const Trace& trace) {
  Liveness l;
  const auto n = trace.buffers.size();
  l.first.assign(n, kNoOp);
  l.last_use.assign(n, kNoOp);
  for (const Buffer& b : trace.buffers) l.first[b.id] = b.producer;
  for (const Op& op : trace.ops) {
    for (BufferId b : op.reads()) l.last_use[b] = op.id;
  }
  std::vector<std::uint32_t> dying, at;  // buffers in id order, and the op each dies after
  for (const Buffer& b : trace.buffers) {
    if (b.persistent || trace.ops.empty()) continue;
    OpId end = l.last_use[b.id];
    if (end == kNoOp || (b.producer != kNoOp && end < b.producer))
      end = b.producer == kNoOp ? 0 : b.producer;  // never used: dead right after creation
    dying.push_back(b.id);
    at.push_back(end);
  }
  l.dies_after = IdLists(trace.ops.size(), at, dying);
  return l;
}

}  // namespace memsim
