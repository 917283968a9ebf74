// trace.json (Chrome trace events, `--trace-format json`) and events.csv, through the command line:
// valid JSON, slices within their threads without overlap, counters equal to memory.csv,
// the event cap, and the allocation log replaying to the allocated curve.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "copy_engine_case.h"
#include "sim/report/chrome_trace.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace memsim;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_trace_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line);
  std::string cell;
  while (std::getline(s, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

// A CSV without quoted fields, as rows of column -> text.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  const auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(f, line)) {
    const auto cells = split(line);
    EXPECT_EQ(cells.size(), header.size()) << line;
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

// Trace timestamps are microseconds to the nanosecond: compare them as integer nanoseconds.
std::int64_t ns(const json& us) { return std::llround(us.get<double>() * 1000.0); }
std::int64_t ns_of_seconds(const std::string& s) { return std::llround(std::stod(s) * 1e9); }

json run_and_load(const std::string& args, const std::string& out, CliResult* result = nullptr) {
  CliResult r = run_memsim(args + " --trace-format json --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (result) *result = r;
  return json::parse(slurp(out + "/trace.json"));  // throws on invalid JSON
}

// pid -> process name, (pid, tid) -> thread name.
struct Names {
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
};
Names names_of(const json& trace) {
  Names n;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "process_name") n.process[e["pid"]] = e["args"]["name"];
    if (e["name"] == "thread_name") n.thread[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  return n;
}

// Every X slice is on a named thread, and the slices of a thread do not overlap.
void expect_slices_within_threads(const json& trace) {
  const Names names = names_of(trace);
  std::map<std::pair<int, int>, std::vector<std::pair<std::int64_t, std::int64_t>>> by_thread;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::pair<int, int> thread{e["pid"], e["tid"]};
    ASSERT_TRUE(names.thread.count(thread)) << "slice on an unnamed thread: " << e.dump();
    ASSERT_GE(ns(e["dur"]), 0) << e.dump();
    by_thread[thread].push_back({ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])});
  }
  for (auto& [thread, slices] : by_thread) {
    std::sort(slices.begin(), slices.end());
    for (std::size_t i = 1; i < slices.size(); ++i)
      ASSERT_LE(slices[i - 1].second, slices[i].first)
          << names.thread.at(thread) << ": slice " << i << " starts before the previous one ends";
  }
}

std::string tier_of_process(const std::string& process_name) {
  return process_name.substr(0, process_name.find(' '));
}

// The counters of each tier equal memory.csv, row for row.
void expect_counters_match_memory_csv(const json& trace, const std::string& memory_csv) {
  const Names names = names_of(trace);
  struct Point {
    std::int64_t ts;
    std::map<std::string, std::uint64_t> values;
  };
  std::map<std::string, std::vector<Point>> counters;  // tier -> allocated / by category
  std::map<std::string, std::vector<std::pair<std::int64_t, std::uint64_t>>> reserved;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "C") continue;
    const std::string tier = tier_of_process(names.process.at(e["pid"]));
    if (e["name"] == "allocated") {
      counters[tier].push_back({ns(e["ts"]), {{"allocated", e["args"]["bytes"].get<std::uint64_t>()}}});
    } else if (e["name"] == "by category") {
      Point p{ns(e["ts"]), {}};
      for (auto& [k, v] : e["args"].items()) p.values["cat:" + k] = v.get<std::uint64_t>();
      counters[tier + "#cat"].push_back(p);
    } else if (e["name"] == "reserved") {
      reserved[tier].push_back({ns(e["ts"]), e["args"]["bytes"].get<std::uint64_t>()});
    }
  }
  std::map<std::string, std::vector<std::map<std::string, std::string>>> expected;
  for (const auto& row : read_csv(memory_csv)) expected[row.at("tier")].push_back(row);
  ASSERT_FALSE(expected.empty());
  for (const auto& [tier, list] : expected) {
    const auto& alloc = counters[tier];
    const auto& cats = counters[tier + "#cat"];
    ASSERT_EQ(alloc.size(), list.size()) << tier;
    ASSERT_EQ(cats.size(), list.size()) << tier;
    const bool has_reserved = !reserved[tier].empty();
    if (has_reserved) ASSERT_EQ(reserved[tier].size(), list.size()) << tier;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& row = list[i];
      ASSERT_EQ(alloc[i].ts, ns_of_seconds(row.at("time_s"))) << tier << " row " << i;
      ASSERT_EQ(alloc[i].values.at("allocated"), std::stoull(row.at("allocated_bytes"))) << tier << " " << i;
      ASSERT_EQ(cats[i].ts, alloc[i].ts);
      std::uint64_t sum = 0;
      for (const auto& [key, value] : row) {
        if (key.size() < 7 || key.substr(key.size() - 6) != "_bytes" || key == "allocated_bytes" ||
            key == "reserved_bytes")
          continue;
        const std::string cat = "cat:" + key.substr(0, key.size() - 6);
        const std::uint64_t v = std::stoull(value);
        sum += v;
        if (cats[i].values.count(cat))
          ASSERT_EQ(cats[i].values.at(cat), v) << tier << " " << cat << " row " << i;
        else
          ASSERT_EQ(v, 0u) << tier << " " << cat << " is not a counter but holds bytes";
      }
      ASSERT_EQ(sum, alloc[i].values.at("allocated")) << tier << " row " << i;
      if (has_reserved)
        ASSERT_EQ(reserved[tier][i].second, std::stoull(row.at("reserved_bytes"))) << tier << " " << i;
      else
        ASSERT_EQ(row.at("reserved_bytes"), row.at("allocated_bytes")) << tier << " " << i;
    }
  }
}

std::size_t count_ph(const json& trace, const std::string& ph) {
  std::size_t n = 0;
  for (const json& e : trace["traceEvents"]) n += e["ph"] == ph;
  return n;
}

}  // namespace

TEST(TraceJson, EveryRunWritesAValidTraceWithNamedProcessesAndThreads) {
  const std::string out = temp_dir("default");
  json t = run_and_load("run a100-40gb resnet18 --set workload.batch=16", out);
  ASSERT_TRUE(t.contains("traceEvents"));
  EXPECT_EQ(t["displayTimeUnit"], "ms");
  EXPECT_EQ(t["otherData"]["status"], "ok");
  EXPECT_EQ(t["otherData"]["events_written"], t["otherData"]["events_total"]);
  const Names names = names_of(t);
  std::set<std::string> processes;
  for (const auto& [pid, name] : names.process) processes.insert(tier_of_process(name));
  for (const char* p : {"gpu0", "host", "gpu0.hbm", "host.dram"}) EXPECT_TRUE(processes.count(p)) << p;
  EXPECT_EQ(names.thread.at({1, 1}), "stream0");
  // One slice per timeline row, each with a duration; the slices cover the iteration.
  const auto timeline = read_csv(out + "/timeline.csv");
  EXPECT_EQ(count_ph(t, "X"), timeline.size());
  json s = json::parse(slurp(out + "/summary.json"));
  std::int64_t last_end = 0;
  for (const json& e : t["traceEvents"])
    if (e["ph"] == "X") last_end = std::max(last_end, ns(e["ts"]) + ns(e["dur"]));
  EXPECT_EQ(last_end, std::llround(s["iteration_time_s"].get<double>() * 1e9));
  EXPECT_GT(count_ph(t, "C"), 0u);
}

TEST(TraceJson, SlicesLieWithinTheirThreadWithoutOverlap) {
  json t = run_and_load("run a100-40gb resnet50", temp_dir("slices"));
  expect_slices_within_threads(t);
}

TEST(TraceJson, CountersMatchMemoryCsv) {
  const std::string out = temp_dir("counters");
  json t = run_and_load("run a100-40gb resnet18 --set workload.batch=16", out);
  expect_counters_match_memory_csv(t, out + "/memory.csv");
}

TEST(TraceJson, CountersReachThePeakOfSummaryJson) {
  // DTR drops a buffer at the instant it allocates another: the peak is a state inside one
  // instant, and the counters keep it (as they keep a run that ends in an OOM's).
  for (const std::string policy : {"none", "dtr"}) {
    const std::string out = temp_dir("peak_" + policy);
    json t = run_and_load("run a100-40gb resnet50 --policy " + policy + " --set gpu0.hbm.capacity=4GiB --no-advice", out);
    const Names names = names_of(t);
    std::uint64_t highest = 0;
    for (const json& e : t["traceEvents"])
      if (e["ph"] == "C" && e["name"] == "allocated" && tier_of_process(names.process.at(e["pid"])) == "gpu0.hbm")
        highest = std::max(highest, e["args"]["bytes"].get<std::uint64_t>());
    json s = json::parse(slurp(out + "/summary.json"));
    EXPECT_EQ(highest, s["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].get<std::uint64_t>()) << policy;
  }
}

TEST(TraceJson, CachingAllocatorAddsAReservedCounter) {
  const std::string out = temp_dir("caching");
  json t = run_and_load("run a100-40gb mlp --set gpu0.hbm.allocator=caching", out);
  bool any_reserved = false;
  for (const json& e : t["traceEvents"]) any_reserved |= e["ph"] == "C" && e["name"] == "reserved";
  EXPECT_TRUE(any_reserved);
  expect_counters_match_memory_csv(t, out + "/memory.csv");
  expect_slices_within_threads(t);
}

TEST(TraceJson, EachDeviceOfAPlatformIsAProcess) {
  const std::string out = temp_dir("dgx");
  json t = run_and_load("run dgx-a100 mlp", out);
  const Names names = names_of(t);
  std::set<int> pids_with_slices;
  for (const json& e : t["traceEvents"])
    if (e["ph"] == "X") pids_with_slices.insert(e["pid"].get<int>());
  EXPECT_EQ(pids_with_slices.size(), 8u);  // eight GPUs
  expect_slices_within_threads(t);
  expect_counters_match_memory_csv(t, out + "/memory.csv");
}

TEST(TraceJson, TwoStreamsAreTwoThreads) {
  const std::string dir = temp_dir("streams");
  {
    std::ofstream p(dir + "/two.yaml");
    p << "name: two-streams\n"
         "devices:\n"
         "  gpu0:\n"
         "    kind: gpu\n"
         "    compute: {fp32: 1TFLOPS}\n"
         "    launch_overhead: 1us\n"
         "    streams: 2\n"
         "    tiers:\n"
         "      hbm: {role: compute, capacity: 1GiB, bandwidth: 100GB/s}\n";
    std::ofstream w(dir + "/two.json");
    w << R"({"format": "memsim-trace", "version": 1, "name": "two",
  "buffers": [
    {"id": 0, "name": "x", "bytes": 1000, "category": "input"},
    {"id": 1, "name": "a", "bytes": 1000, "category": "activation"},
    {"id": 2, "name": "b", "bytes": 1000, "category": "activation"}],
  "ops": [
    {"name": "left", "kind": "matmul", "phase": "forward", "dtype": "fp32", "inputs": [0], "outputs": [1], "flops": 1e9, "bytes": 2000},
    {"name": "right", "kind": "matmul", "phase": "forward", "dtype": "fp32", "inputs": [0], "outputs": [2], "flops": 1e9, "bytes": 2000, "stream": 1}]})";
  }
  const std::string out = dir + "/out";
  json t = run_and_load("run " + dir + "/two.yaml " + dir + "/two.json", out);
  const Names names = names_of(t);
  EXPECT_EQ(names.thread.at({1, 1}), "stream0");
  EXPECT_EQ(names.thread.at({1, 2}), "stream1");
  std::set<int> tids;
  for (const json& e : t["traceEvents"])
    if (e["ph"] == "X") tids.insert(e["tid"].get<int>());
  EXPECT_EQ(tids, (std::set<int>{1, 2}));
  expect_slices_within_threads(t);
  expect_counters_match_memory_csv(t, out + "/memory.csv");
}

TEST(TraceJson, OverlappingCopiesGoToSeparateCopyEngineThreads) {
  // The writer on its own: two copy engines out of gpu0 carry two copies at once, a third
  // follows on the first engine; a copy in uses its own thread.
  const CopyEngineCase run = copy_engine_case();
  const PlatformSpec& p = run.platform;
  const Trace& trace = run.trace;
  const std::vector<Event>& events = run.events;
  Summary summary;
  const ChromeTrace c = chrome_trace_json(events, {}, summary, trace, p);
  json t = json::parse(c.json);
  const Names names = names_of(t);
  std::map<std::string, std::vector<std::string>> by_thread;
  for (const json& e : t["traceEvents"])
    if (e["ph"] == "X") by_thread[names.thread.at({e["pid"], e["tid"]})].push_back(e["args"]["buffer"]);
  EXPECT_EQ(by_thread["copy_out"], (std::vector<std::string>{"b0", "b2"}));
  EXPECT_EQ(by_thread["copy_out.1"], (std::vector<std::string>{"b1"}));
  EXPECT_EQ(by_thread["copy_in"], (std::vector<std::string>{"b3"}));
  expect_slices_within_threads(t);
  // Each swap out of a compute tier is an eviction instant on that tier.
  EXPECT_EQ(count_ph(t, "i"), 3u);
}

TEST(TraceJson, SwapsAreCopyEngineSlicesAndEvictions) {
  // vDNN offloads every feature map: copies out and in on gpu0's copy engines, each swap out
  // of the HBM an eviction instant on the tier.
  const std::string out = temp_dir("vdnn");
  json t = run_and_load("run a100-40gb resnet18 --set workload.batch=64 --policy vdnn --set gpu0.hbm.capacity=2GiB", out);
  const Names names = names_of(t);
  std::map<std::string, std::size_t> slices;
  for (const json& e : t["traceEvents"])
    if (e["ph"] == "X") ++slices[names.thread.at({e["pid"], e["tid"]}) + "/" + e["cat"].get<std::string>()];
  std::size_t swap_out = 0, swap_in = 0, evictions = 0;
  for (const auto& row : read_csv(out + "/timeline.csv")) {
    swap_out += row.at("kind") == "swap_out";
    swap_in += row.at("kind") == "swap_in";
  }
  ASSERT_GT(swap_out, 0u);
  EXPECT_EQ(slices["copy_out/swap_out"], swap_out);
  EXPECT_EQ(slices["copy_in/swap_in"], swap_in);
  for (const json& e : t["traceEvents"])
    if (e["ph"] == "i" && e["name"].get<std::string>().rfind("evict ", 0) == 0) {
      ++evictions;
      EXPECT_EQ(tier_of_process(names.process.at(e["pid"])), "gpu0.hbm");
    }
  EXPECT_EQ(evictions, swap_out);
  expect_slices_within_threads(t);
}

TEST(TraceJson, MaxEventsCapsTheTraceAndSaysSo) {
  const std::string out = temp_dir("cap");
  CliResult r;
  json t = run_and_load("run a100-40gb resnet18 --set workload.batch=16 --max-events 100", out, &r);
  std::size_t written = 0;
  for (const json& e : t["traceEvents"]) written += e["ph"] != "M";
  EXPECT_LE(written, 100u);
  EXPECT_GE(written, 98u);  // a memory sample is two counter events
  EXPECT_EQ(t["otherData"]["events_written"].get<std::size_t>(), written);
  EXPECT_GT(t["otherData"]["events_total"].get<std::size_t>(), written);
  EXPECT_NE(r.err.find("trace.json: kept the first"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--max-events"), std::string::npos) << r.err;
  // Asking for no events is not a truncation worth a line.
  const CliResult none = run_memsim("run a100-40gb resnet18 --max-events 0 --out " + temp_dir("zero"));
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_EQ(none.err.find("kept the first"), std::string::npos) << none.err;
  // Without the cap nothing is said of one.
  CliResult full = run_memsim("run a100-40gb resnet18 --set workload.batch=16 --out " + temp_dir("nocap"));
  EXPECT_EQ(full.exit_code, 0);
  EXPECT_EQ(full.err.find("kept the first"), std::string::npos) << full.err;
}

TEST(TraceJson, OomIsAGlobalInstant) {
  json t = run_and_load("run v100-16gb resnet50 --set workload.batch=256 --no-advice", temp_dir("oom"));
  EXPECT_EQ(t["otherData"]["status"], "oom");
  std::size_t ooms = 0;
  for (const json& e : t["traceEvents"])
    if (e["ph"] == "i" && e["name"].get<std::string>().rfind("OOM: gpu0.hbm full at op ", 0) == 0) {
      ++ooms;
      EXPECT_EQ(e["s"], "g");
      EXPECT_GT(e["args"]["requested_bytes"].get<std::uint64_t>(), 0u);
    }
  EXPECT_EQ(ooms, 1u);
  expect_slices_within_threads(t);
}

TEST(TraceJson, SameRunGivesTheSameBytes) {
  const std::string a = temp_dir("det_a"), b = temp_dir("det_b");
  const std::string args = "run a100-40gb resnet18 --set workload.batch=8 --events --trace-format json --out ";
  ASSERT_EQ(run_memsim(args + a).exit_code, 0);
  ASSERT_EQ(run_memsim(args + b).exit_code, 0);
  for (const char* f : {"trace.json", "events.csv"}) {
    const std::string x = slurp(a + "/" + f);
    EXPECT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == slurp(b + "/" + f)) << f << " differs between two identical runs";
  }
}

TEST(EventsCsv, OnlyWithTheFlag) {
  const std::string out = temp_dir("noevents");
  ASSERT_EQ(run_memsim("run a100-40gb mlp --out " + out).exit_code, 0);
  EXPECT_FALSE(fs::exists(out + "/events.csv"));
}

TEST(EventsCsv, ReplayGivesTheAllocatedCurveRowForRow) {
  // Under each allocator, events.csv row i is the change behind memory.csv row i: summing
  // allocs minus frees per tier reproduces allocated_bytes exactly, every free names a live
  // address, and live allocations never share an address.
  for (const std::string allocator : {"ideal", "best_fit", "caching"}) {
    const std::string out = temp_dir("replay_" + allocator);
    CliResult r = run_memsim("run a100-40gb resnet18 --set workload.batch=8 --events --set gpu0.hbm.allocator=" +
                             allocator + " --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto events = read_csv(out + "/events.csv");
    const auto memory = read_csv(out + "/memory.csv");
    ASSERT_EQ(events.size(), memory.size()) << allocator;
    std::map<std::string, std::uint64_t> allocated;
    std::map<std::string, std::map<std::uint64_t, std::uint64_t>> live;  // tier -> address -> bytes
    for (std::size_t i = 0; i < events.size(); ++i) {
      const auto& e = events[i];
      const std::string& tier = e.at("tier");
      ASSERT_EQ(tier, memory[i].at("tier")) << allocator << " row " << i;
      ASSERT_EQ(e.at("time_s"), memory[i].at("time_s")) << allocator << " row " << i;
      const std::uint64_t bytes = std::stoull(e.at("bytes")), address = std::stoull(e.at("address"));
      if (e.at("event") == "alloc") {
        ASSERT_TRUE(live[tier].emplace(address, bytes).second) << allocator << " address reused while live, row " << i;
        allocated[tier] += bytes;
      } else {
        ASSERT_EQ(e.at("event"), "free");
        ASSERT_EQ(live[tier].count(address), 1u) << allocator << " free of an unknown address, row " << i;
        ASSERT_EQ(live[tier][address], bytes);
        live[tier].erase(address);
        allocated[tier] -= bytes;
      }
      ASSERT_EQ(allocated[tier], std::stoull(memory[i].at("allocated_bytes"))) << allocator << " row " << i;
    }
    if (allocator == "best_fit") {  // address ranges of what is left do not overlap
      std::uint64_t end = 0;
      for (const auto& [address, bytes] : live["gpu0.hbm"]) {
        EXPECT_GE(address, end);
        end = address + bytes;
      }
    }
  }
}

TEST(EventsCsv, WorkspaceIsAnAnonymousAllocation) {
  const std::string out = temp_dir("workspace");
  CliResult r = run_memsim("run tests/scenarios/data/testbox.yaml tests/scenarios/data/three_ops.json --events --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto events = read_csv(out + "/events.csv");
  std::size_t workspace = 0;
  for (const auto& e : events)
    if (e.at("category") == "workspace") {
      ++workspace;
      EXPECT_EQ(e.at("buffer"), "");
      EXPECT_EQ(e.at("bytes"), "600");
    }
  EXPECT_EQ(workspace, 2u);  // its alloc and its free
  EXPECT_EQ(slurp(out + "/events.csv").substr(0, 48), "time_s,event,buffer,category,tier,address,bytes\n");
}
