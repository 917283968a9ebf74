// trace.pftrace (Perfetto's TrackEvent format), through the command line, read back with the
// project's own proto classes (sim/report/perfetto_trace.proto): a valid Trace whose packets
// keep Perfetto's rules (one sequence, incremental state cleared first, every iid defined
// before or in the packet that uses it, tracks declared before their events, BEGIN/END
// nested per track, counters in time order, at most 8 extra counter values), and whose
// content is trace.json's: the same slices at the same nanoseconds on the same threads, the
// same counter values, the same instants, the same cap.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "copy_engine_case.h"
#include "sim/report/chrome_trace.h"
#include "sim/report/perfetto_trace.h"
#include "sim/report/trace_layout.h"
#include "sim/report/perfetto_trace.pb.h"

namespace fs = std::filesystem;
namespace pb = memsim::pftrace;
using nlohmann::json;
using namespace memsim;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_pftrace_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

pb::Trace parse(const std::string& bytes) {
  pb::Trace t;
  EXPECT_TRUE(t.ParseFromString(bytes)) << "not a serialized perfetto.protos.Trace";
  return t;
}

// A file memsim wrote: it parses, and its bytes are what libprotobuf's classes make of what
// they read (the writer encodes its event packets by hand: every field, length and order as
// the generated classes would write it).
pb::Trace parse_written(const std::string& bytes) {
  pb::Trace t = parse(bytes);
  const std::string again = t.SerializeAsString();
  EXPECT_EQ(again.size(), bytes.size());
  if (again != bytes) {
    std::size_t at = 0;
    while (at < again.size() && at < bytes.size() && again[at] == bytes[at]) ++at;
    ADD_FAILURE() << "trace.pftrace is not as libprotobuf writes it: the bytes differ from offset " << at
                  << " of " << bytes.size();
  }
  return t;
}

// What a reader sees in the file: tracks, slices, counters and instants, checked as it
// goes; `problems` lists every rule the file breaks (empty for a good file).
struct Track {
  std::uint64_t parent = 0;
  std::string name;  // a process track's: its process name
  bool process = false, counter = false;
};
struct Slice {
  std::uint64_t track;
  std::string name, category;
  std::int64_t begin_ns, end_ns;
  std::map<std::string, std::string> args;  // values as text
};
struct Instant {
  std::uint64_t track;
  std::string name;
  std::int64_t ts_ns;
  std::map<std::string, std::string> args;
};
struct Read {
  std::map<std::uint64_t, Track> tracks;
  std::vector<Slice> slices;  // in the order they end
  std::map<std::uint64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> counters;  // track -> (ts, v)
  std::vector<Instant> instants;
  std::vector<std::string> problems;

  // "gpu0.hbm (compute, ...)" / "allocated": a track's name with its parents'.
  std::string path(std::uint64_t uuid) const {
    const Track& t = tracks.at(uuid);
    return t.parent && tracks.count(t.parent) ? path(t.parent) + " / " + t.name : t.name;
  }
};

Read read_pftrace(const pb::Trace& trace) {
  Read r;
  auto problem = [&](std::size_t packet, const std::string& what) {
    r.problems.push_back("packet " + std::to_string(packet) + ": " + what);
  };
  // Interned state of the sequence: iid -> string, per table.
  std::map<std::uint64_t, std::string> names, categories, arg_names, string_values;
  std::map<std::uint64_t, std::vector<Slice>> open;  // track -> its open slices, innermost last
  std::int64_t last_ts = 0;
  for (int i = 0; i < trace.packet_size(); ++i) {
    const pb::TracePacket& p = trace.packet(i);
    const auto at = static_cast<std::size_t>(i);
    if (p.trusted_packet_sequence_id() != 1) problem(at, "not on sequence 1");
    if (i == 0 && (!(p.sequence_flags() & pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED) ||
                   !p.first_packet_on_sequence()))
      problem(at, "the first packet does not clear the incremental state");
    if (i > 0 && (p.sequence_flags() & pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED))
      problem(at, "clears the incremental state again");
    const auto ts = static_cast<std::int64_t>(p.timestamp());
    if (ts < last_ts) problem(at, "out of time order");
    last_ts = ts;
    // Interned data defined here applies from this packet on; an iid is defined once.
    const pb::InternedData& in = p.interned_data();
    auto define = [&](std::map<std::uint64_t, std::string>& table, std::uint64_t iid, const std::string& s,
                      const char* what) {
      if (iid == 0 || !table.emplace(iid, s).second) problem(at, std::string(what) + " iid " + std::to_string(iid) + " defined twice or zero");
    };
    for (const auto& n : in.event_names()) define(names, n.iid(), n.name(), "event name");
    for (const auto& c : in.event_categories()) define(categories, c.iid(), c.name(), "category");
    for (const auto& n : in.debug_annotation_names()) define(arg_names, n.iid(), n.name(), "argument name");
    for (const auto& s : in.debug_annotation_string_values()) define(string_values, s.iid(), s.str(), "string value");
    auto lookup = [&](const std::map<std::uint64_t, std::string>& table, std::uint64_t iid, const char* what) {
      const auto it = table.find(iid);
      if (it != table.end()) return it->second;
      problem(at, std::string(what) + " iid " + std::to_string(iid) + " not defined before it is used");
      return std::string();
    };

    if (p.has_track_descriptor()) {
      const pb::TrackDescriptor& d = p.track_descriptor();
      if (d.uuid() == 0) continue;  // the root: only its process ordering
      if (r.tracks.count(d.uuid())) problem(at, "track " + std::to_string(d.uuid()) + " declared twice");
      if (d.parent_uuid() && !r.tracks.count(d.parent_uuid())) problem(at, "parent declared after its child");
      r.tracks[d.uuid()] = {d.parent_uuid(), d.has_process() ? d.process().process_name() : d.name(),
                            d.has_process(), d.has_counter()};
      continue;
    }
    if (!p.has_track_event()) {
      problem(at, "neither a track descriptor nor a track event");
      continue;
    }
    const pb::TrackEvent& e = p.track_event();
    const auto track = r.tracks.find(e.track_uuid());
    if (track == r.tracks.end()) {
      problem(at, "an event on undeclared track " + std::to_string(e.track_uuid()));
      continue;
    }
    const bool uses_iids = e.has_name_iid() || e.category_iids_size() > 0 || e.debug_annotations_size() > 0;
    if (uses_iids && !(p.sequence_flags() & pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE))
      problem(at, "uses interned data without SEQ_NEEDS_INCREMENTAL_STATE");
    std::map<std::string, std::string> args;
    for (const pb::DebugAnnotation& a : e.debug_annotations()) {
      const std::string key = lookup(arg_names, a.name_iid(), "argument name");
      if (a.has_uint_value()) args[key] = std::to_string(a.uint_value());
      else if (a.has_string_value()) args[key] = a.string_value();
      else if (a.has_string_value_iid()) args[key] = lookup(string_values, a.string_value_iid(), "string value");
      else problem(at, "argument " + key + " without a value");
    }
    switch (e.type()) {
      case pb::TrackEvent::TYPE_SLICE_BEGIN: {
        if (track->second.counter) problem(at, "a slice on a counter track");
        if (e.category_iids_size() != 1) problem(at, "a slice without its one category");
        Slice s{e.track_uuid(), lookup(names, e.name_iid(), "event name"),
                e.category_iids_size() ? lookup(categories, e.category_iids(0), "category") : "", ts, -1, args};
        open[e.track_uuid()].push_back(std::move(s));
        break;
      }
      case pb::TrackEvent::TYPE_SLICE_END: {
        auto& stack = open[e.track_uuid()];
        if (stack.empty()) {
          problem(at, "an END with no open slice on " + r.path(e.track_uuid()));
          break;
        }
        stack.back().end_ns = ts;
        r.slices.push_back(std::move(stack.back()));
        stack.pop_back();
        break;
      }
      case pb::TrackEvent::TYPE_INSTANT:
        if (track->second.counter) problem(at, "an instant on a counter track");
        r.instants.push_back({e.track_uuid(), lookup(names, e.name_iid(), "event name"), ts, args});
        break;
      case pb::TrackEvent::TYPE_COUNTER: {
        if (!e.has_counter_value()) problem(at, "a counter without a value");
        if (e.extra_counter_values_size() != e.extra_counter_track_uuids_size())
          problem(at, "extra counter values and tracks differ in number");
        if (e.extra_counter_values_size() > 8) problem(at, "more than 8 extra counter values");
        auto add = [&](std::uint64_t uuid, std::int64_t v) {
          if (!r.tracks.count(uuid) || !r.tracks.at(uuid).counter) {
            problem(at, "a counter value for " + std::to_string(uuid) + ", not a declared counter track");
            return;
          }
          auto& series = r.counters[uuid];
          if (!series.empty() && series.back().first > ts) problem(at, "a counter out of time order");
          series.push_back({ts, v});
        };
        add(e.track_uuid(), e.counter_value());
        for (int k = 0; k < e.extra_counter_values_size() && k < e.extra_counter_track_uuids_size(); ++k)
          add(e.extra_counter_track_uuids(k), e.extra_counter_values(k));
        break;
      }
      default: problem(at, "an event of no type");
    }
  }
  for (const auto& [track, stack] : open)
    if (!stack.empty()) r.problems.push_back(r.path(track) + ": " + std::to_string(stack.size()) + " slices never end");
  return r;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < 10; ++i) s += v[i] + "\n";
  return s;
}

Read run_and_read(const std::string& args, const std::string& out, CliResult* result = nullptr) {
  CliResult r = run_memsim(args + " --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (result) *result = r;
  EXPECT_FALSE(fs::exists(out + "/trace.json")) << "the default writes trace.pftrace only";
  Read read = read_pftrace(parse_written(slurp(out + "/trace.pftrace")));
  EXPECT_TRUE(read.problems.empty()) << join(read.problems);
  return read;
}

std::int64_t ns(const json& us) { return std::llround(us.get<double>() * 1000.0); }

// The same run in both formats carries the same slices, counter values and instants.
void expect_same_as_json(const Read& pf, const json& tj) {
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  for (const json& e : tj["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "process_name") process[e["pid"]] = e["args"]["name"];
    if (e["name"] == "thread_name") thread[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  // Slices: (process / thread, name, category, begin, end, args), as multisets.
  std::multiset<std::string> want, got;
  auto key = [](const std::string& where, const std::string& name, const std::string& cat, std::int64_t b,
                std::int64_t e, const std::map<std::string, std::string>& args) {
    std::string k = where + " | " + name + " | " + cat + " | " + std::to_string(b) + "-" + std::to_string(e);
    for (const auto& [a, v] : args) k += " " + a + "=" + v;
    return k;
  };
  for (const json& e : tj["traceEvents"]) {
    if (e["ph"] != "X") continue;
    std::map<std::string, std::string> args;
    for (auto& [a, v] : e["args"].items()) args[a] = v.is_string() ? v.get<std::string>() : v.dump();
    want.insert(key(process.at(e["pid"]) + " / " + thread.at({e["pid"], e["tid"]}), e["name"], e["cat"],
                    ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), args));
  }
  for (const Slice& s : pf.slices) got.insert(key(pf.path(s.track), s.name, s.category, s.begin_ns, s.end_ns, s.args));
  EXPECT_EQ(got.size(), want.size());
  std::vector<std::string> missing, extra;
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  EXPECT_TRUE(missing.empty()) << "in trace.json only:\n" << join(missing);
  EXPECT_TRUE(extra.empty()) << "in trace.pftrace only:\n" << join(extra);

  // Counters: each of trace.json's values equals the pftrace track's value at that time
  // (the pftrace writes a value only when it changes).
  std::map<std::string, std::uint64_t> by_path;  // "tier process / counter" -> uuid
  for (const auto& [uuid, t] : pf.tracks)
    if (t.counter) by_path[pf.path(uuid)] = uuid;
  auto value_at = [&](std::uint64_t uuid, std::int64_t ts, std::size_t& cursor) -> std::int64_t {
    const auto& series = pf.counters.at(uuid);
    while (cursor + 1 < series.size() && series[cursor + 1].first <= ts) ++cursor;
    return series.at(cursor).second;
  };
  std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> json_series;
  for (const json& e : tj["traceEvents"]) {
    if (e["ph"] != "C") continue;
    const std::string tier = process.at(e["pid"]);
    for (auto& [name, v] : e["args"].items())
      json_series[tier + " / " + (e["name"] == "by category" ? name : e["name"].get<std::string>())].push_back(
          {ns(e["ts"]), v.get<std::int64_t>()});
  }
  std::size_t compared = 0;
  for (const auto& [counter, series] : json_series) {
    ASSERT_TRUE(by_path.count(counter)) << "no counter track " << counter;
    const std::uint64_t uuid = by_path.at(counter);
    ASSERT_TRUE(pf.counters.count(uuid)) << counter << " has no values";
    std::size_t c = 0;
    for (std::size_t i = 0; i < series.size(); ++i) {
      // Several samples at one instant: the last is the value the tier keeps.
      if (i + 1 < series.size() && series[i + 1].first == series[i].first) continue;
      ASSERT_EQ(value_at(uuid, series[i].first, c), series[i].second) << counter << " at " << series[i].first << " ns";
      ++compared;
    }
  }
  EXPECT_EQ(json_series.empty(), compared == 0);
  for (const auto& [uuid, series] : pf.counters)
    EXPECT_TRUE(json_series.count(pf.path(uuid))) << pf.path(uuid) << ": values that trace.json does not have";

  // Instants: evictions and the OOM, by name and time.
  std::multiset<std::string> want_i, got_i;
  for (const json& e : tj["traceEvents"])
    if (e["ph"] == "i") want_i.insert(e["name"].get<std::string>() + " @" + std::to_string(ns(e["ts"])));
  for (const Instant& i : pf.instants) got_i.insert(i.name + " @" + std::to_string(i.ts_ns));
  EXPECT_EQ(got_i, want_i);
}

// Runs `args` in both formats and compares them.
void expect_formats_agree(const std::string& args, const std::string& name) {
  const std::string a = temp_dir(name + "_pf"), b = temp_dir(name + "_json");
  const Read pf = run_and_read(args, a);
  CliResult r = run_memsim(args + " --trace-format json --out " + b);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(b + "/trace.pftrace"));
  expect_same_as_json(pf, json::parse(slurp(b + "/trace.json")));
}

std::size_t count_type(const pb::Trace& t, pb::TrackEvent::Type type) {
  std::size_t n = 0;
  for (const auto& p : t.packet()) n += p.has_track_event() && p.track_event().type() == type;
  return n;
}

}  // namespace

TEST(TracePftrace, IsTheDefaultAndReadsBackWithNamedTracks) {
  const std::string out = temp_dir("default");
  const Read r = run_and_read("run a100-40gb resnet18 --set workload.batch=16", out);
  std::set<std::string> paths;
  for (const auto& [uuid, t] : r.tracks) paths.insert(r.path(uuid));
  for (const char* p : {"gpu0 (gpu)", "gpu0 (gpu) / stream0", "host (cpu)"})
    EXPECT_TRUE(paths.count(p)) << p;
  // Counters for the tier that holds bytes; the idle host.dram has none.
  std::vector<std::string> allocated;
  for (const auto& p : paths)
    if (p.size() > 12 && p.substr(p.size() - 12) == " / allocated") allocated.push_back(p.substr(0, p.find(' ')));
  EXPECT_EQ(allocated, std::vector<std::string>{"gpu0.hbm"});
  EXPECT_FALSE(r.slices.empty());
  for (const Slice& s : r.slices) {
    EXPECT_LE(s.begin_ns, s.end_ns);
    EXPECT_EQ(r.path(s.track), "gpu0 (gpu) / stream0") << s.name;
  }
  // One slice per op (no policy: nothing else takes time), the last ending with the iteration.
  json summary = json::parse(slurp(out + "/summary.json"));
  EXPECT_EQ(r.slices.size(), summary["ops_run"].get<std::size_t>());
  std::int64_t last_end = 0;
  for (const Slice& s : r.slices) last_end = std::max(last_end, s.end_ns);
  EXPECT_EQ(last_end, std::llround(summary["iteration_time_s"].get<double>() * 1e9));
}

TEST(TracePftrace, SameContentAsTraceJson) {
  expect_formats_agree("run a100-40gb resnet50", "resnet50");
}

TEST(TracePftrace, SwapsCopyEnginesEvictionsAndAReservedCounterAsTraceJson) {
  // vDNN under a small HBM: copies on both copy engines, evictions; the caching allocator
  // reserves more than it allocates.
  expect_formats_agree("run a100-40gb resnet18 --set workload.batch=64 --policy vdnn --set gpu0.hbm.capacity=2GiB "
                       "--set gpu0.hbm.allocator=caching", "vdnn");
}

TEST(TracePftrace, DevicesAndCommunicationStreamsAsTraceJson) {
  // Eight data-parallel replicas: a process per GPU, each with a communication stream.
  expect_formats_agree("run dgx-a100 mlp --set parallel.dp=8", "dgx");
}

TEST(TracePftrace, OverlappingCopiesGoToSeparateCopyEngineTracks) {
  // The writer on its own: two copy engines out of gpu0 carry two copies at once, a third
  // follows on the first engine; a copy in has its own track.
  const CopyEngineCase run = copy_engine_case();
  const PlatformSpec& p = run.platform;
  const Trace& trace = run.trace;
  const std::vector<Event>& events = run.events;
  const Summary summary;
  const PerfettoTrace pf = perfetto_trace(events, {}, summary, trace, p, kDefaultMaxTraceEvents);
  const Read r = read_pftrace(parse_written(pf.bytes));
  ASSERT_TRUE(r.problems.empty()) << join(r.problems);
  std::map<std::string, std::vector<std::string>> by_track;
  for (const Slice& s : r.slices) by_track[r.path(s.track)].push_back(s.args.at("buffer"));
  for (auto& [track, buffers] : by_track) std::sort(buffers.begin(), buffers.end());
  EXPECT_EQ(by_track["gpu0 (gpu) / copy_out"], (std::vector<std::string>{"b0", "b2"}));
  EXPECT_EQ(by_track["gpu0 (gpu) / copy_out.1"], (std::vector<std::string>{"b1"}));
  EXPECT_EQ(by_track["gpu0 (gpu) / copy_in"], (std::vector<std::string>{"b3"}));
  EXPECT_EQ(r.instants.size(), 3u) << "each swap out of a compute tier is an eviction";
  for (const Instant& i : r.instants) EXPECT_EQ(r.path(i.track), "gpu0.hbm (compute, 1 GiB, ideal) / evictions");
  expect_same_as_json(r, json::parse(chrome_trace_json(events, {}, summary, trace, p).json));
}

TEST(TracePftrace, ARecorderKeepingOnlyTheSamplesTheCapReachesWritesTheSameTrace) {
  // The copy-engine case with a thousand samples on both tiers (the host's reserved bytes
  // differ: three events a sample there) and the cap at 100 events: a recorder that keeps
  // only TraceLayout::kept_samples_for(100) samples gives the same bytes, in both formats,
  // and the same count of events in all.
  const CopyEngineCase run = copy_engine_case();
  Recorder all, few;
  few.keep_samples_at_most(TraceLayout::kept_samples_for(100));
  for (int i = 0; i < 1000; ++i) {
    TierUsage u;
    u.allocated_bytes = 1000 * static_cast<std::uint64_t>(i % 7);
    u.reserved_bytes = u.allocated_bytes + (i % 2) * 512;
    u.by_category[static_cast<int>(Category::activation)] = u.allocated_bytes;
    for (Recorder* r : {&all, &few}) r->on_memory_change(static_cast<std::size_t>(i % 2), u, i * 5e-6);
  }
  ASSERT_LT(few.samples().size(), all.samples().size());
  EXPECT_EQ(few.samples().recorded(), all.samples().recorded());
  const Summary summary;
  for (std::size_t cap : {std::size_t{100}, std::size_t{7}, std::size_t{0}}) {
    if (cap != 100) few.keep_samples_at_most(TraceLayout::kept_samples_for(cap));  // only fewer: a prefix
    const PerfettoTrace a = perfetto_trace(run.events, all.samples(), summary, run.trace, run.platform, cap);
    const PerfettoTrace b = perfetto_trace(run.events, few.samples(), summary, run.trace, run.platform, cap);
    EXPECT_TRUE(a.bytes == b.bytes) << "cap " << cap;
    EXPECT_EQ(a.events_total, b.events_total);
    EXPECT_EQ(a.events_written, b.events_written);
    EXPECT_LE(a.events_written, cap);
    EXPECT_TRUE(chrome_trace_json(run.events, all.samples(), summary, run.trace, run.platform, cap).json ==
                chrome_trace_json(run.events, few.samples(), summary, run.trace, run.platform, cap).json)
        << "cap " << cap;
  }
  const PerfettoTrace whole = perfetto_trace(run.events, all.samples(), summary, run.trace, run.platform, 1 << 20);
  EXPECT_EQ(whole.events_written, whole.events_total);
  EXPECT_EQ(whole.events_total, 4u + 3u + 500u * 2 + 500u * 3) << "4 copies, 3 evictions, the samples' events";
  ASSERT_TRUE(read_pftrace(parse_written(whole.bytes)).problems.empty());
}

TEST(TracePftrace, MaxEventsKeepsTheSamePrefixAsTraceJsonAndSaysSo) {
  const std::string args = "run a100-40gb resnet18 --set workload.batch=16 --max-events 100";
  CliResult r;
  const std::string out = temp_dir("cap");
  const Read pf = run_and_read(args, out, &r);
  EXPECT_NE(r.err.find("trace.pftrace: kept the first"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--max-events"), std::string::npos) << r.err;
  // Every slice begun is ended, and the count is what the cap allows: trace.json's.
  const pb::Trace t = parse_written(slurp(out + "/trace.pftrace"));
  EXPECT_EQ(count_type(t, pb::TrackEvent::TYPE_SLICE_BEGIN), count_type(t, pb::TrackEvent::TYPE_SLICE_END));
  EXPECT_GT(pf.slices.size(), 0u);
  EXPECT_LT(pf.slices.size(), 100u);
  const CliResult j = run_memsim(args + " --trace-format json --out " + temp_dir("cap_json"));
  auto counts = [](const std::string& err) { return err.substr(err.find(": kept the first")); };
  EXPECT_EQ(counts(r.err), counts(j.err)) << "trace.json keeps the same number of events";
  expect_formats_agree(args, "cap2");
  // No events: the tracks alone, and nothing said of a cap.
  const std::string zero = temp_dir("zero");
  const CliResult none = run_memsim("run a100-40gb resnet18 --max-events 0 --out " + zero);
  EXPECT_EQ(none.err.find("kept the first"), std::string::npos) << none.err;
  const pb::Trace z = parse_written(slurp(zero + "/trace.pftrace"));
  for (const auto& p : z.packet()) EXPECT_FALSE(p.has_track_event());
}

TEST(TracePftrace, OomIsAnInstantOnTheFullTier) {
  const Read r = run_and_read("run v100-16gb resnet50 --set workload.batch=256 --no-advice", temp_dir("oom"));
  std::size_t ooms = 0;
  for (const Instant& i : r.instants)
    if (i.name.rfind("OOM: gpu0.hbm full at op ", 0) == 0) {
      ++ooms;
      EXPECT_EQ(r.path(i.track).substr(0, 9), "gpu0.hbm ");
      EXPECT_EQ(r.path(i.track).substr(r.path(i.track).size() - 6), " / OOM");
      EXPECT_GT(std::stoull(i.args.at("requested_bytes")), 0u);
      EXPECT_EQ(i.args.at("tier"), "gpu0.hbm");
    }
  EXPECT_EQ(ooms, 1u);
  expect_formats_agree("run v100-16gb resnet50 --set workload.batch=256 --no-advice", "oom2");
}

TEST(TracePftrace, SameRunGivesTheSameBytes) {
  const std::string a = temp_dir("det_a"), b = temp_dir("det_b");
  const std::string args = "run a100-40gb resnet18 --set workload.batch=8 --policy vdnn --out ";
  ASSERT_EQ(run_memsim(args + a).exit_code, 0);
  ASSERT_EQ(run_memsim(args + b).exit_code, 0);
  const std::string x = slurp(a + "/trace.pftrace");
  EXPECT_FALSE(x.empty());
  EXPECT_TRUE(x == slurp(b + "/trace.pftrace")) << "trace.pftrace differs between two identical runs";
}

TEST(TracePftrace, TheReaderCatchesBrokenFiles) {
  // The checks above can fail: each corruption of a good file is reported.
  const std::string out = temp_dir("broken");
  ASSERT_EQ(run_memsim("run a100-40gb mlp --out " + out).exit_code, 0);
  const pb::Trace good = parse(slurp(out + "/trace.pftrace"));
  ASSERT_TRUE(read_pftrace(good).problems.empty()) << join(read_pftrace(good).problems);
  auto first = [&](pb::TrackEvent::Type type) {
    for (int i = 0; i < good.packet_size(); ++i)
      if (good.packet(i).has_track_event() && good.packet(i).track_event().type() == type) return i;
    return -1;
  };
  auto expect_problem = [&](pb::Trace bad, const std::string& what) {
    const auto problems = read_pftrace(bad).problems;
    bool found = false;
    for (const auto& p : problems) found |= p.find(what) != std::string::npos;
    EXPECT_TRUE(found) << "expected '" << what << "' among:\n" << join(problems);
  };
  pb::Trace bad = good;  // the first slice's name, never interned
  bad.mutable_packet(first(pb::TrackEvent::TYPE_SLICE_BEGIN))->mutable_interned_data()->clear_event_names();
  expect_problem(bad, "event name iid 1 not defined before it is used");
  bad = good;  // an END before its BEGIN
  bad.mutable_packet()->SwapElements(first(pb::TrackEvent::TYPE_SLICE_BEGIN), first(pb::TrackEvent::TYPE_SLICE_END));
  expect_problem(bad, "an END with no open slice");
  bad = good;  // a slice on a track no descriptor declares
  bad.mutable_packet(first(pb::TrackEvent::TYPE_SLICE_BEGIN))->mutable_track_event()->set_track_uuid(999999);
  expect_problem(bad, "an event on undeclared track 999999");
  bad = good;  // a slice never ended
  bad.mutable_packet()->DeleteSubrange(first(pb::TrackEvent::TYPE_SLICE_END), 1);
  expect_problem(bad, "slices never end");
  bad = good;  // time running backwards
  bad.mutable_packet(bad.packet_size() - 1)->set_timestamp(0);
  expect_problem(bad, "out of time order");
  bad = good;  // the incremental state never cleared
  bad.mutable_packet(0)->clear_sequence_flags();
  expect_problem(bad, "the first packet does not clear the incremental state");
}

TEST(TracePftrace, AnUnknownTraceFormatIsAUsageError) {
  const CliResult r = run_memsim("run mlp --trace-format xml --out " + temp_dir("xml"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--trace-format: xml not in {pftrace,json}"), std::string::npos) << r.err;
}
