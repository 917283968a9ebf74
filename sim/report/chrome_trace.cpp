#include "sim/report/chrome_trace.h"

#include <cstdint>
#include <iterator>
#include <type_traits>

#include <fmt/format.h>

#include "sim/report/trace_layout.h"

namespace memsim {
namespace {

// Microseconds with three decimals, from integer nanoseconds: exact, and two slices that
// meet in the simulation meet in the file.
void put_us(std::string& out, std::int64_t ns) {
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

void put_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        else
          out += c;
    }
  }
  out += '"';
}

class Writer {
 public:
  Writer(const std::vector<Event>& events, const SampleLog& samples,
         const Summary& summary, const Trace& trace, const PlatformSpec& platform,
         std::size_t max_events)
      : events_(events),
        summary_(summary),
        trace_(trace),
        platform_(platform),
        layout_(events, samples, summary, trace, platform, max_events) {}

  ChromeTrace write();

 private:
  void begin_event(std::string_view name, char ph, std::int64_t ts_ns, std::uint32_t pid,
                   std::uint32_t tid);
  void put_slice(const TraceItem& item);
  void put_counter(const TraceItem& item);
  void put_evict(const TraceItem& item);
  void put_oom(const TraceItem& item);
  void put_metadata();

  const std::vector<Event>& events_;
  const Summary& summary_;
  const Trace& trace_;
  const PlatformSpec& platform_;
  TraceLayout layout_;
  std::string out_;
  bool first_ = true;
};

void Writer::begin_event(std::string_view name, char ph, std::int64_t ts_ns, std::uint32_t pid,
                         std::uint32_t tid) {
  out_ += first_ ? "\n" : ",\n";
  first_ = false;
  out_ += "{\"name\":";
  put_string(out_, name);
  fmt::format_to(std::back_inserter(out_), ",\"ph\":\"{}\",\"ts\":", ph);
  put_us(out_, ts_ns);
  fmt::format_to(std::back_inserter(out_), ",\"pid\":{},\"tid\":{}", pid, tid);
}

void Writer::put_slice(const TraceItem& item) {
  const Event& e = events_[item.index];
  const std::int64_t start = trace_ns(e.start_s), end = trace_ns(e.end_s);
  const Op* op = e.op == kNoOp ? nullptr : &trace_.ops[e.op];
  const std::string_view kind = to_string(e.kind);
  begin_event(layout_.slice_name(e), 'X', start, layout_.device_pid(layout_.platform_device(e)), item.tid);
  out_ += ",\"dur\":";
  put_us(out_, end - start);
  out_ += ",\"cat\":";
  put_string(out_, kind);
  if (e.kind == EventKind::stall) out_ += ",\"cname\":\"terrible\"";
  out_ += ",\"args\":{";
  bool any = false;
  auto arg = [&](std::string_view key) {
    out_ += any ? ",\"" : "\"";
    out_ += key;
    out_ += "\":";
    any = true;
  };
  if (op) {
    arg(e.kind == EventKind::stall ? "waiting_op" : "op_index");
    if (e.kind == EventKind::stall)
      put_string(out_, op->name);
    else
      fmt::format_to(std::back_inserter(out_), "{}", op->id);
    if (e.kind != EventKind::stall) {
      arg("op_kind");
      put_string(out_, op->kind);
      arg("phase");
      put_string(out_, to_string(op->phase));
    }
  }
  if (e.buffer != kNoId) {
    arg("buffer");
    put_string(out_, trace_.buffers[e.buffer].name);
  }
  if (e.bytes > 0) {
    arg("bytes");
    fmt::format_to(std::back_inserter(out_), "{}", e.bytes);
  }
  if (e.src_tier != kNoId) {
    arg("from");
    put_string(out_, platform_.tiers[e.src_tier].name);
  }
  if (e.dst_tier != kNoId) {
    arg(e.kind == EventKind::stall ? "tier" : "to");
    put_string(out_, platform_.tiers[e.dst_tier].name);
  }
  out_ += "}}";
}

void Writer::put_counter(const TraceItem& item) {
  const MemorySample& s = layout_.sample(item.index);
  const std::uint32_t pid = layout_.tier_pid(s.tier);
  auto it = std::back_inserter(out_);
  begin_event("by category", 'C', item.ts_ns, pid, 0);
  out_ += ",\"args\":{";
  bool any = false;
  for (int c = 0; c < kCategoryCount; ++c) {
    if (!layout_.tier_has_category(s.tier, c)) continue;
    fmt::format_to(it, "{}\"{}\":{}", any ? "," : "", to_string(static_cast<Category>(c)),
                   s.by_category[c]);
    any = true;
  }
  out_ += "}}";
  begin_event("allocated", 'C', item.ts_ns, pid, 0);
  fmt::format_to(it, ",\"args\":{{\"bytes\":{}}}}}", s.allocated_bytes);
  if (layout_.tier_reserved_differs(s.tier)) {
    begin_event("reserved", 'C', item.ts_ns, pid, 0);
    fmt::format_to(it, ",\"args\":{{\"bytes\":{}}}}}", s.reserved_bytes);
  }
}

void Writer::put_evict(const TraceItem& item) {
  const Event& e = events_[item.index];
  begin_event("evict " + trace_.buffers[e.buffer].name, 'i', item.ts_ns, layout_.tier_pid(e.src_tier), 0);
  fmt::format_to(std::back_inserter(out_), ",\"s\":\"p\",\"args\":{{\"bytes\":{}}}}}", e.bytes);
}

void Writer::put_oom(const TraceItem& item) {
  const OomReport& o = *summary_.oom;
  const auto tier = platform_.find_tier(o.tier);
  begin_event(layout_.oom_name(), 'i', item.ts_ns, tier ? layout_.tier_pid(*tier) : 0, 0);
  auto it = std::back_inserter(out_);
  out_ += ",\"s\":\"g\",\"args\":{\"op\":";
  put_string(out_, o.op);
  out_ += ",\"tier\":";
  put_string(out_, o.tier);
  fmt::format_to(it, ",\"requested_bytes\":{},\"allocated_bytes\":{},\"capacity_bytes\":{}",
                 o.requested_bytes, o.allocated_bytes, o.capacity_bytes);
  out_ += ",\"reason\":";
  put_string(out_, o.reason.empty() ? std::string("the tier is full") : o.reason);
  out_ += "}}";
}

void Writer::put_metadata() {
  auto it = std::back_inserter(out_);
  auto meta = [&](std::string_view what, std::uint32_t pid, std::uint32_t tid,
                  std::string_view key, auto value) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    fmt::format_to(it, "{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"{}\":", what,
                   pid, tid, key);
    if constexpr (std::is_convertible_v<decltype(value), std::string_view>)
      put_string(out_, value);
    else
      fmt::format_to(it, "{}", value);
    out_ += "}}";
  };
  for (std::size_t d = 0; d < platform_.devices.size(); ++d) {
    const std::uint32_t pid = layout_.device_pid(d);
    meta("process_name", pid, 0, "name", layout_.device_process_name(d));
    meta("process_sort_index", pid, 0, "sort_index", pid);
  }
  for (std::size_t t = 0; t < platform_.tiers.size(); ++t) {
    const std::uint32_t pid = layout_.tier_pid(t);
    meta("process_name", pid, 0, "name", layout_.tier_process_name(t));
    meta("process_sort_index", pid, 0, "sort_index", pid);
  }
  for (const auto& [pid, tid] : layout_.threads()) {
    meta("thread_name", pid, tid, "name", layout_.thread_name(pid, tid));
    meta("thread_sort_index", pid, tid, "sort_index", tid);
  }
}

ChromeTrace Writer::write() {
  ChromeTrace result;
  result.events_total = layout_.events_total();
  result.events_written = layout_.events_written();
  result.written_until_s = layout_.written_until_s();
  const std::size_t kept = layout_.kept();
  out_.reserve(4096 + kept * 160);
  auto it = std::back_inserter(out_);
  out_ += "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"memsim_version\":";
  put_string(out_, MEMSIM_VERSION);
  out_ += ",\"workload\":";
  put_string(out_, summary_.description.empty() ? summary_.workload : summary_.description);
  out_ += ",\"platform\":";
  put_string(out_, summary_.platform);
  out_ += ",\"policy\":";
  put_string(out_, summary_.policy);
  out_ += ",\"status\":";
  put_string(out_, summary_.status);
  fmt::format_to(it, ",\"events_total\":{},\"events_written\":{}}},\"traceEvents\":[",
                 result.events_total, result.events_written);
  put_metadata();
  for (std::size_t i = 0; i < kept; ++i) {
    const TraceItem& item = layout_.items()[i];
    switch (item.kind) {
      case TraceItemKind::slice: put_slice(item); break;
      case TraceItemKind::counter: put_counter(item); break;
      case TraceItemKind::evict: put_evict(item); break;
      case TraceItemKind::oom: put_oom(item); break;
    }
  }
  out_ += "\n]}\n";
  result.json = std::move(out_);
  return result;
}

}  // namespace

ChromeTrace chrome_trace_json(const std::vector<Event>& events,
                              const SampleLog& samples, const Summary& summary,
                              const Trace& trace, const PlatformSpec& platform,
                              std::size_t max_events) {
  return Writer(events, samples, summary, trace, platform, max_events).write();
}

}  // namespace memsim
