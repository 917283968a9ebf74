#include "sim/workload/importers/kineto.h"

#include <algorithm>
#include <cctype>
#include <functional>

#include <fmt/format.h>
#include <simdjson.h>

#include "sim/core/error.h"
#include "sim/workload/durations.h"
#include "sim/workload/importers/archive.h"
#include "sim/workload/importers/importers.h"
#include "sim/workload/importers/scopes.h"

namespace memsim {
namespace {

namespace od = simdjson::ondemand;

struct CpuOp {
  std::int64_t external_id = -1, record_function_id = -1;
  std::string name;
  std::uint64_t thread = 0;
  double ts = 0, dur = 0;
  std::string scope;
};
// A module's forward or a user's annotation: what the ops it encloses are named in.
struct ScopeEvent {
  std::uint64_t thread = 0;
  double ts = 0, dur = 0;
  std::string name;  // the label without "nn.Module: "
  bool module = false;
};
struct Launch {
  std::uint64_t thread = 0;
  double ts = 0;
  std::int64_t correlation = -1;
};

bool is_launch(std::string_view name) {
  return name.find("Launch") != std::string_view::npos || name.find("Memcpy") != std::string_view::npos ||
         name.find("Memset") != std::string_view::npos || name.find("memcpy") != std::string_view::npos ||
         name.find("memset") != std::string_view::npos;
}

// A number, or a string that names a thread ("Spans"): either way, a key.
std::uint64_t id_key(od::value v) {
  std::int64_t i = 0;
  if (!v.get_int64().get(i)) return static_cast<std::uint64_t>(i);
  double d = 0;
  if (!v.get_double().get(d)) return static_cast<std::uint64_t>(static_cast<std::int64_t>(d));
  std::string_view s;
  if (!v.get_string().get(s)) return std::hash<std::string_view>{}(s) | (1ull << 63);
  return 0;
}

std::int64_t as_int(od::value v) {
  std::int64_t i = -1;
  if (!v.get_int64().get(i)) return i;
  double d = 0;
  if (!v.get_double().get(d)) return static_cast<std::int64_t>(d);
  std::string_view s;
  if (!v.get_string().get(s)) {
    try {
      return std::stoll(std::string(s));
    } catch (const std::exception&) {
    }
  }
  return -1;
}

// A number as the event states it: its value, or (not a number) its JSON text for the error.
struct Number {
  double value = 0;
  std::string text;  // empty when the value is a number
};
Number read_number(od::value v) {
  Number n;
  if (!v.get_double().get(n.value)) return n;
  n.text = std::string(v.raw_json_token());
  while (!n.text.empty() && std::isspace(static_cast<unsigned char>(n.text.back()))) n.text.pop_back();
  if (n.text.size() > 60) n.text = n.text.substr(0, 57) + "...";
  return n;
}

// Each op's scope: the innermost scope event on its thread that started no later than it and
// had not ended when it started (one that ends as the op starts is over: traces in whole
// microseconds have that often). Modules are named by the modules around them.
// Returns how many scopes were too long to name anything (kMaxScopeName).
std::size_t assign_scopes(std::vector<CpuOp>& ops, std::vector<ScopeEvent>& scopes) {
  auto earlier = [](std::uint64_t ta, double a, double da, std::uint64_t tb, double b, double db) {
    if (ta != tb) return ta < tb;
    if (a != b) return a < b;
    return da > db;  // the enclosing one first
  };
  std::stable_sort(scopes.begin(), scopes.end(), [&](const ScopeEvent& a, const ScopeEvent& b) {
    return earlier(a.thread, a.ts, a.dur, b.thread, b.ts, b.dur);
  });
  std::vector<std::size_t> order(ops.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return earlier(ops[a].thread, ops[a].ts, ops[a].dur, ops[b].thread, ops[b].ts, ops[b].dur);
  });
  struct Open {
    double start, end;
    std::string name;  // as ops under it are named; empty when too long
    bool module;
    std::size_t module_below;  // the nearest module at or below it on the stack, or SIZE_MAX
  };
  std::size_t too_long = 0;
  std::vector<Open> stack;
  std::uint64_t thread = 0;
  std::size_t s = 0;
  auto enter = [&](std::uint64_t t, double ts) {
    if (t != thread) {
      stack.clear();
      thread = t;
    }
    while (!stack.empty() && (stack.back().end < ts || (stack.back().end == ts && stack.back().start < ts)))
      stack.pop_back();
  };
  for (std::size_t i : order) {
    CpuOp& op = ops[i];
    // The scopes that start no later than the op (on an earlier thread: skipped).
    while (s < scopes.size() && (scopes[s].thread < op.thread ||
                                 (scopes[s].thread == op.thread && scopes[s].ts <= op.ts))) {
      const ScopeEvent& e = scopes[s++];
      enter(e.thread, e.ts);
      const std::size_t below = stack.empty() ? SIZE_MAX : stack.back().module ? stack.size() - 1 : stack.back().module_below;
      std::string name;
      const std::string* outer = e.module && below != SIZE_MAX ? &stack[below].name : nullptr;
      const std::size_t length = e.name.size() + (outer ? outer->size() + 1 : 0);
      if ((outer && outer->empty()) || length > kMaxScopeName)
        ++too_long;  // named nothing, as the module around it
      else
        name = outer ? *outer + "." + e.name : e.name;
      stack.push_back({e.ts, e.ts + e.dur, std::move(name), e.module, e.module ? stack.size() : below});
    }
    enter(op.thread, op.ts);
    if (!stack.empty()) op.scope = stack.back().name;
  }
  return too_long;
}

}  // namespace

bool looks_like_kineto(std::string_view head) {
  const auto first = head.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || head[first] != '{') return false;
  return head.find("\"traceEvents\"") != std::string_view::npos ||
         (head.find("\"schemaVersion\"") != std::string_view::npos &&
          head.find("\"deviceProperties\"") != std::string_view::npos);
}

KinetoTimes read_kineto(const std::string& text, const std::string& source) {
  std::string copy;
  const std::string* padded = &text;
  if (text.capacity() < text.size() + simdjson::SIMDJSON_PADDING) {
    copy.reserve(text.size() + simdjson::SIMDJSON_PADDING);
    copy = text;
    padded = &copy;
  }
  auto fail = [&](simdjson::error_code e, const char* where) -> void {
    throw InputError(fmt::format("{}: not a readable Kineto trace ({}: {})", source, where, simdjson::error_message(e)));
  };
  od::parser parser;
  od::document doc;
  if (auto e = parser.iterate(simdjson::padded_string_view(padded->data(), padded->size(), padded->capacity())).get(doc))
    fail(e, "the document");
  od::object top;
  if (auto e = doc.get_object().get(top)) fail(e, "the top level");

  KinetoTimes out;
  std::vector<CpuOp> ops;
  std::vector<ScopeEvent> scopes;
  std::vector<Launch> launches;
  std::unordered_map<std::int64_t, double> gpu_by_correlation;
  bool saw_events = false;
  for (auto field : top) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) fail(e, "a key");
    if (key == "deviceProperties") {
      od::array devices;
      if (field.value().get_array().get(devices)) continue;
      for (auto d : devices) {
        od::object o;
        if (d.get_object().get(o)) continue;
        std::string_view name;
        if (out.device.empty() && !o["name"].get_string().get(name)) out.device = std::string(name);
      }
    } else if (key == "traceEvents") {
      saw_events = true;
      od::array events;
      if (auto e = field.value().get_array().get(events)) fail(e, "traceEvents");
      std::size_t index = 0;
      for (auto element : events) {
        od::object ev;
        if (auto e = element.get_object().get(ev)) fail(e, "an event");
        std::string_view ph, cat, name;
        std::uint64_t pid = 0, tid = 0;
        Number ts_read, dur_read;
        bool has_dur = false;
        std::int64_t external = -1, record_function = -1, correlation = -1;
        for (auto f : ev) {
          std::string_view k;
          if (f.unescaped_key().get(k)) continue;
          od::value v;
          if (f.value().get(v)) continue;
          if (k == "ph") { if (v.get_string().get(ph)) ph = {}; }
          else if (k == "cat") { if (v.get_string().get(cat)) cat = {}; }
          else if (k == "name") { if (v.get_string().get(name)) name = {}; }
          else if (k == "pid") pid = id_key(v);
          else if (k == "tid") tid = id_key(v);
          else if (k == "ts") ts_read = read_number(v);
          else if (k == "dur") {
            dur_read = read_number(v);
            has_dur = true;
          }
          else if (k == "args") {
            od::object args;
            if (v.get_object().get(args)) continue;
            for (auto a : args) {
              std::string_view ak;
              if (a.unescaped_key().get(ak)) continue;
              od::value av;
              if (a.value().get(av)) continue;
              if (ak == "External id") external = as_int(av);
              else if (ak == "Record function id") record_function = as_int(av);
              else if (ak == "correlation") correlation = as_int(av);
            }
          }
        }
        const std::size_t at = index++;
        // Every duration an event states is checked, as every trace's are (durations.h).
        auto fail_event = [&](const char* key, const std::string& expected, const Number& got) -> void {
          throw InputError(fmt::format("{}: traceEvents[{}]{}: {}: expected {}, got {}", source, at,
                                       name.empty() ? std::string() : fmt::format(" ({})", name), key, expected,
                                       got.text.empty() ? fmt::format("{}", got.value) : got.text));
        };
        if (has_dur && (!dur_read.text.empty() || !is_op_duration(dur_read.value, kMicroseconds)))
          fail_event("dur", op_duration_range(kMicroseconds), dur_read);
        if (ph != "X") continue;
        if (!ts_read.text.empty()) fail_event("ts", "a time in microseconds", ts_read);
        const double ts = ts_read.value, dur = dur_read.value;
        const std::uint64_t thread = pid * 1000003u ^ tid;
        if (name.substr(0, kModuleLabel.size()) == kModuleLabel) {
          scopes.push_back({thread, ts, dur, std::string(scope_name(name)), true});
          ++out.modules;
        } else if (cat == "cpu_op" || cat == "user_annotation" || cat == "Operator") {
          ops.push_back({external, record_function, std::string(name), thread, ts, dur, {}});
          if (cat == "user_annotation" && is_scope_label(name)) scopes.push_back({thread, ts, dur, std::string(name), false});
        } else if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "Runtime") {
          if (correlation >= 0 && is_launch(name)) launches.push_back({thread, ts, correlation});
        } else if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "Kernel" || cat == "Memcpy" ||
                   cat == "Memset") {
          ++out.gpu_events;
          if (correlation >= 0) gpu_by_correlation[correlation] += dur;
        }
      }
    }
  }
  if (!saw_events) throw InputError(fmt::format("{}: not a Kineto trace: no traceEvents", source));
  out.has_gpu = out.gpu_events > 0;
  out.cpu_ops = ops.size();
  if (out.modules) out.long_scopes = assign_scopes(ops, scopes);

  // The GPU time each op launched: launches on its thread while it ran, with their
  // kernels' time, summed by prefix over each thread's launches in time order.
  std::sort(launches.begin(), launches.end(), [](const Launch& a, const Launch& b) {
    return a.thread != b.thread ? a.thread < b.thread : a.ts < b.ts;
  });
  std::vector<double> prefix(launches.size() + 1, 0);
  std::vector<std::uint32_t> count_prefix(launches.size() + 1, 0);
  for (std::size_t i = 0; i < launches.size(); ++i) {
    auto g = gpu_by_correlation.find(launches[i].correlation);
    prefix[i + 1] = prefix[i] + (g == gpu_by_correlation.end() ? 0.0 : g->second);
    count_prefix[i + 1] = count_prefix[i] + (g == gpu_by_correlation.end() ? 0 : 1);
  }
  for (const CpuOp& op : ops) {
    const auto lo = std::lower_bound(launches.begin(), launches.end(), op, [](const Launch& l, const CpuOp& o) {
      return l.thread != o.thread ? l.thread < o.thread : l.ts < o.ts;
    });
    const auto hi = std::upper_bound(launches.begin(), launches.end(), op, [](const CpuOp& o, const Launch& l) {
      return o.thread != l.thread ? o.thread < l.thread : o.ts + o.dur < l.ts;
    });
    KinetoOp k;
    k.name = op.name;
    k.cpu_us = op.dur;
    k.scope = op.scope;
    if (hi > lo) {
      const auto a = static_cast<std::size_t>(lo - launches.begin()), b = static_cast<std::size_t>(hi - launches.begin());
      k.gpu_us = prefix[b] - prefix[a];
      k.gpu_events = count_prefix[b] - count_prefix[a];
    }
    if (op.external_id > 0) out.by_external_id.emplace(op.external_id, k);
    if (op.record_function_id > 0) out.by_record_function_id.emplace(op.record_function_id, std::move(k));
  }
  return out;
}

std::vector<std::string> apply_kineto(Trace& trace, const std::vector<EtOpOrigin>& origins, const KinetoTimes& kineto,
                                      const std::string& source) {
  // The key that joins more ops by name.
  auto joined = [&](const std::unordered_map<std::int64_t, KinetoOp>& by) {
    std::size_t n = 0;
    for (const auto& o : origins)
      if (auto it = by.find(o.rf_id); o.rf_id > 0 && it != by.end() && it->second.name == o.name) ++n;
    return n;
  };
  const std::size_t by_rf = joined(kineto.by_record_function_id), by_ext = joined(kineto.by_external_id);
  const bool use_rf = by_rf > by_ext;
  const auto& by = use_rf ? kineto.by_record_function_id : kineto.by_external_id;
  const char* key = use_rf ? "Record function id" : "External id";
  std::size_t matched = 0, renamed = 0, missing = 0, idle = 0, named = 0;
  // The Kineto scope an op is named in: a backward op's forward op's, else its own cpu_op's.
  auto scope_of = [&](const EtOpOrigin& o, const KinetoOp& own) -> std::string {
    if (o.forward_rf_id > 0)
      if (auto f = by.find(o.forward_rf_id); f != by.end() && f->second.name == o.forward_name && !f->second.scope.empty())
        return f->second.scope;
    return own.scope;
  };
  std::string renamed_example;
  for (std::size_t i = 0; i < trace.ops.size() && i < origins.size(); ++i) {
    Op& op = trace.ops[i];
    const EtOpOrigin& o = origins[i];
    const auto it = o.rf_id > 0 ? by.find(o.rf_id) : by.end();
    if (it == by.end()) {
      ++missing;
      continue;
    }
    if (it->second.name != o.name) {
      ++renamed;
      if (renamed_example.empty())
        renamed_example = fmt::format("rf_id {}: {} in the ET, {} in Kineto", o.rf_id, o.name, it->second.name);
      continue;
    }
    ++matched;
    const double us = kineto.has_gpu ? it->second.gpu_us : it->second.cpu_us;
    // Each event's time was checked as it was read; a sum of many kernels' may still pass an hour.
    if (!is_op_duration(us, kMicroseconds))
      throw InputError(fmt::format("{}: op {} ({} {}): the time of the kernels it launched: expected {}, got {}",
                                   source, o.name, key, o.rf_id, op_duration_range(kMicroseconds), us));
    if (kineto.has_gpu && it->second.gpu_events == 0) ++idle;
    op.measured_s = us * 1e-6;
    if (kineto.modules == 0) continue;
    const std::string scope = scope_of(o, it->second);
    if (scope.empty()) continue;
    const std::string base = op.name.substr(op.name.rfind('/') + 1);  // the ET's name without its scope
    op.name = scoped_op_name(scope, base);
    for (std::size_t k = 0; k < op.outputs.size(); ++k)
      trace.buffers[op.outputs[k]].name = output_buffer_name(op.name, k, op.outputs.size());
    ++named;
  }
  if (matched == 0)
    throw InputError(fmt::format("{}: no op of {} joins a Kineto op (on rf_id = \"Record function id\" or \"External id\", "
                                 "with the same name): the two traces are not of the same run",
                                 source, trace.name));
  if (!kineto.device.empty()) trace.measured_on = kineto.device;
  std::vector<std::string> notes;
  notes.push_back(fmt::format("Kineto {}: {} of {} ops joined on rf_id = \"{}\" and timed by {}{}", source, matched,
                              trace.ops.size(), key,
                              kineto.has_gpu ? "the GPU time of the kernels they launched" : "their CPU time",
                              kineto.device.empty() ? "" : fmt::format(" ({})", kineto.device)));
  if (kineto.modules)
    notes.push_back(fmt::format("{} ops named in the scope of their Kineto cpu_op ({} nn.Module events); the rest keep "
                                "the ET's names{}",
                                named, kineto.modules,
                                kineto.long_scopes ? fmt::format(" ({} scopes with names over {} characters name nothing)",
                                                                 kineto.long_scopes, kMaxScopeName)
                                                   : ""));
  if (idle) notes.push_back(fmt::format("{} joined ops launched no GPU work: measured 0 s", idle));
  if (missing || renamed)
    notes.push_back(fmt::format("{} ops not joined ({} with no Kineto op of their rf_id, {} whose Kineto op has another "
                                "name{}): not timed from Kineto{}",
                                missing + renamed, missing, renamed,
                                renamed_example.empty() ? "" : ", e.g. " + renamed_example,
                                2 * matched < trace.ops.size() ? "; with most ops unjoined, the Kineto trace is likely of "
                                                                 "another run than the ET"
                                                               : ""));
  return notes;
}

// A Kineto trace alone times ops but holds no buffers: recognised, to be refused (it goes with
// an Execution Trace, --kineto).
ImporterInfo kineto_importer() {
  return {"kineto",
          "a Kineto / torch.profiler trace (traceEvents): recognised and refused alone, it times the ops of a "
          "PyTorch Execution Trace (--kineto)",
          looks_like_kineto,
          [](TraceFile& f, const std::string&, const ImportOptions&) -> Trace {
            throw InputError(fmt::format(
                "{}: a Kineto trace (torch.profiler's traceEvents: when each op and kernel ran), not a trace of a "
                "training step's memory; pass it with the Execution Trace recorded in the same run: "
                "memsim run DEVICE TRACE.json --kineto {}",
                f.source, f.source));
          },
          false};
}

}  // namespace memsim
