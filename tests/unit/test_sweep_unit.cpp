// Sweeps without simulations: the bisection, sweep-file expansion and ids, and how a point
// that fails in its child process is recorded (with stand-in executables).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "sim/core/error.h"
#include "sim/sweep/fit.h"
#include "sim/sweep/results.h"
#include "sim/sweep/store.h"
#include "sim/sweep/sweep.h"

using namespace memsim;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_unit_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

// A probe that fits up to `limit` and records what it was asked.
struct Threshold {
  std::int64_t limit;
  std::vector<std::int64_t> asked;
  ProbeOutcome operator()(std::int64_t v) {
    asked.push_back(v);
    return v <= limit ? ProbeOutcome::fits : ProbeOutcome::fails;
  }
};

}  // namespace

TEST(FitSearch, DoublesThenBisects) {
  Threshold t{300, {}};
  Search s = search_largest(1, 1'000'000, std::ref(t));
  EXPECT_EQ(s.largest, 300);
  EXPECT_EQ(s.first_fail, 301);
  EXPECT_FALSE(s.error);
  // 1..256 fit, 512 fails; then halves of [256, 512).
  const std::vector<std::int64_t> expected{1, 2, 4, 8, 16, 32, 64, 128, 256, 512,
                                           384, 320, 288, 304, 296, 300, 302, 301};
  EXPECT_EQ(t.asked, expected);
}

TEST(FitSearch, EdgeCases) {
  Threshold none{0, {}};
  Search s = search_largest(1, 100, std::ref(none));
  EXPECT_EQ(s.largest, 0);
  EXPECT_EQ(s.first_fail, 1);
  EXPECT_EQ(none.asked, std::vector<std::int64_t>{1});

  Threshold all{1000, {}};
  s = search_largest(1, 100, std::ref(all));
  EXPECT_EQ(s.largest, 100);  // the limit: 1, 2, ..., 64, then 100
  EXPECT_EQ(s.first_fail, 0);
  EXPECT_EQ(all.asked.back(), 100);

  Threshold exact{64, {}};
  s = search_largest(1, 100, std::ref(exact));
  EXPECT_EQ(s.largest, 64);
  EXPECT_EQ(s.first_fail, 65);

  Threshold from_three{10, {}};
  s = search_largest(3, 100, std::ref(from_three));
  EXPECT_EQ(s.largest, 10);
  EXPECT_EQ(from_three.asked.front(), 3);

  int calls = 0;
  s = search_largest(1, 100, [&](std::int64_t v) {
    ++calls;
    return v < 8 ? ProbeOutcome::fits : ProbeOutcome::error;
  });
  EXPECT_TRUE(s.error);
  EXPECT_EQ(calls, 4);  // 1, 2, 4, then 8 is an error: stop
}

TEST(SweepFile, ExpandsInOrderWithTheLastAxisFastest) {
  const fs::path dir = temp_dir("order");
  const std::string file = write(dir / "s.yaml",
                                 "devices: [a100-40gb]\n"
                                 "workloads: [mlp, chain]\n"
                                 "policies: [none, keep-all]\n"
                                 "set:\n  workload.batch: [8, 16]\n"
                                 "zip:\n  - {gpu0.hbm.capacity: [1GiB, 2GiB], pcie0.bandwidth: [16GB/s, 32GB/s]}\n");
  const SweepSpec spec = load_sweep(file);
  ASSERT_EQ(spec.axes.size(), 3u);
  EXPECT_EQ(spec.axes[0].key, "workload.batch");
  EXPECT_EQ(spec.axes[2].key, "pcie0.bandwidth");
  Resolver resolver;
  const auto points = expand_sweep(spec, resolver);
  ASSERT_EQ(points.size(), 2u * 2 * 2 * 2);
  EXPECT_EQ(points[0].values[0], "8");
  EXPECT_EQ(points[0].values[1], "1GiB");
  EXPECT_EQ(points[1].values[1], "2GiB");  // the zip varies fastest
  EXPECT_EQ(points[1].values[2], "32GB/s");
  EXPECT_EQ(points[2].values[0], "16");
  EXPECT_EQ(points[4].policy, 1u);
  EXPECT_EQ(points[8].workload, 1u);
  for (const auto& p : points) {
    EXPECT_EQ(p.run.error, "") << p.run.id;
    EXPECT_EQ(p.run.id.size(), 16u);
    EXPECT_EQ(p.run.compute_tiers, std::vector<std::string>{"gpu0.hbm"});
  }
  EXPECT_EQ(points[5].run.request.overrides.size(), 3u);
  EXPECT_EQ(shard_points(points, 2, 3).front()->index, 1u);
  EXPECT_EQ(shard_points(points, 2, 3).size(), 5u);  // 1, 4, 7, 10, 13
}

TEST(SweepFile, IdsHashTheResolvedInputsNotTheirSpelling) {
  Resolver r;
  auto id = [&](const std::string& device, const std::string& workload, std::vector<std::string> sets,
                const std::string& policy = "none") {
    RunRequest req{device, workload, policy, {}};
    for (const auto& s : sets) req.overrides.push_back(parse_override(s));
    return r.resolve(req).id;
  };
  const fs::path dir = temp_dir("ids");
  // The same platform under another name, with comments and flow style: the same id.
  const std::string copy = write(dir / "copy.yaml",
                                 "# a comment\n" + [] {
                                   std::ifstream in(std::string(MEMSIM_SOURCE_DIR) + "/configs/devices/a100-40gb.yaml");
                                   std::ostringstream s;
                                   s << in.rdbuf();
                                   return s.str();
                                 }());
  EXPECT_EQ(id("a100-40gb", "mlp", {}), id(copy, "mlp", {}));
  // Setting a value to what the file says already is the same input.
  EXPECT_EQ(id("a100-40gb", "mlp", {"workload.batch=128"}), id("a100-40gb", "mlp", {}));
  EXPECT_NE(id("a100-40gb", "mlp", {"workload.batch=64"}), id("a100-40gb", "mlp", {}));
  EXPECT_NE(id("a100-40gb", "mlp", {"gpu0.hbm.capacity=1GiB"}), id("a100-40gb", "mlp", {}));
  EXPECT_NE(id("a100-40gb", "mlp", {}, "keep-all"), id("a100-40gb", "mlp", {}));
  // Stable across runs and machines: a fixed value (update it only with MEMSIM_VERSION).
  EXPECT_EQ(hash_hex("memsim"), "0ae15b998cf39bf5");
}

TEST(SweepFile, AnAxisAppliesWhereItNamesSomethingAndRepeatsAreDropped) {
  const fs::path dir = temp_dir("applies");
  const std::string file = write(dir / "s.yaml",
                                 "devices: [a100-40gb]\n"
                                 "workloads: [mlp]\n"
                                 "policies: [none, dtr]\n"
                                 "set:\n  policy.budget: [0.5, 0.7]\n");
  const SweepSpec spec = load_sweep(file);
  Resolver resolver;
  std::size_t dropped = 0;
  const auto points = expand_sweep(spec, resolver, &dropped);
  // none takes no budget: it runs once, with the column empty.
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(dropped, 1u);
  EXPECT_FALSE(points[0].values[0].has_value());
  EXPECT_EQ(points[1].values[0], "0.5");
  EXPECT_EQ(points[2].values[0], "0.7");
}

TEST(SweepFile, PointsWhoseInputsDoNotLoadCarryTheirError) {
  const fs::path dir = temp_dir("bad_point");
  const std::string file = write(dir / "s.yaml",
                                 "devices: [a100-40gb]\n"
                                 "workloads: [mlp]\n"
                                 "set:\n  workload.batch: [16, 0]\n");
  Resolver resolver;
  const auto points = expand_sweep(load_sweep(file), resolver);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].run.error, "");
  EXPECT_EQ(points[1].run.error,
            file + ":4:24 (workload.batch=0): batch: expected an integer from 1 to 1000000, got '0'");
}

TEST(SweepResults, CsvCellsAndRows) {
  EXPECT_EQ(csv_cell("plain"), "plain");
  EXPECT_EQ(csv_cell("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
  const fs::path dir = temp_dir("rows");
  const std::string file = write(dir / "s.yaml",
                                 "devices: [a100-40gb]\nworkloads: [mlp]\nset:\n  workload.layers: [\"[8, 4]\"]\n");
  const SweepSpec spec = load_sweep(file);
  Resolver resolver;
  const auto points = expand_sweep(spec, resolver);
  ResultsTable table(spec, points);
  EXPECT_EQ(table.header(),
            "point_id,device,workload,policy,workload.layers,status,error,iteration_time_s,"
            "compute_time_s,stall_time_s,recompute_time_s,transfer_time_s,swap_out_bytes,"
            "swap_in_bytes,recompute_flops,comm_time_s,exposed_comm_time_s,tokens_per_s,samples_per_s,mfu,hfu,"
            "gpu_hours_per_1e9_tokens,gpu0.hbm.peak_allocated_bytes,gpu0.hbm.peak_reserved_bytes\n");
  nlohmann::json summary = {{"status", "ok"}, {"iteration_time_s", 0.5}, {"swap_out_bytes", 7},
                            {"throughput", {{"tokens_per_s", nullptr}, {"samples_per_s", 64}, {"mfu", 0.25}}},
                            {"tiers", {{"gpu0.hbm", {{"peak_allocated_bytes", 11}, {"peak_reserved_bytes", 12}}}}}};
  EXPECT_EQ(table.row(points[0], {"ok", "", summary, {}}),
            points[0].run.id + ",a100-40gb,mlp,none,\"[8, 4]\",ok,,0.5,,,,,7,,,,,,64,0.25,,,11,12\n");
  EXPECT_EQ(table.row(points[0], {"error", "bad\nsecond line", {}, {}}),
            points[0].run.id + ",a100-40gb,mlp,none,\"[8, 4]\",error,bad,,,,,,,,,,,,,,,,,\n");
}

// A stand-in for `memsim run`: a shell script.
static std::string fake_memsim(const fs::path& dir, const std::string& body) {
  const std::string path = write(dir / "fake-memsim", "#!/bin/sh\n" + body + "\n");
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

TEST(SweepStore, AFailingRunIsRecordedWithItsMessage) {
  const fs::path dir = temp_dir("store_fail");
  Resolver resolver;
  const ResolvedRun run = resolver.resolve({"a100-40gb", "mlp", "none", {}});
  {
    PointStore store((dir / "a").string(), fake_memsim(dir, "echo 'boom: it broke' >&2; exit 3"), false);
    PointResult r = store.get(run);
    EXPECT_EQ(r.status, "error");
    EXPECT_EQ(r.error, "boom: it broke");
    EXPECT_TRUE(r.ran);
    // Recorded on disk; a failed point is not finished, so the next sweep runs it again.
    auto stored = store.stored(run.id);
    ASSERT_TRUE(stored);
    EXPECT_EQ(stored->status, "error");
    EXPECT_TRUE(fs::exists(dir / "a/points" / run.id / "point.json"));
  }
  {
    PointStore store((dir / "b").string(), fake_memsim(dir, "kill -SEGV $$"), false);
    PointResult r = store.get(run);
    EXPECT_EQ(r.status, "error");
    EXPECT_EQ(r.error, "crashed: signal 11 (Segmentation fault)");
  }
  {
    PointStore store((dir / "c").string(), fake_memsim(dir, "exit 0"), false);
    EXPECT_EQ(store.get(run).error, "memsim run wrote no summary.json");
  }
  {
    // The arguments `memsim run` gets, and a summary written where it is told.
    PointStore store((dir / "d").string(),
                     fake_memsim(dir, "echo \"$@\" > \"$(dirname $0)/args\"; "
                                      "for a; do out=$a; done; "
                                      "echo '{\"status\": \"oom\"}' > \"$out/summary.json\""),
                     false);
    RunRequest req{"a100-40gb", "mlp", "none", {parse_override("workload.batch=8")}};
    const ResolvedRun r8 = resolver.resolve(req);
    EXPECT_EQ(store.get(r8).status, "oom");
    std::ifstream args(dir / "args");
    std::string line;
    std::getline(args, line);
    EXPECT_EQ(line, "run a100-40gb mlp --policy none --set workload.batch=8 --no-advice --outputs summary --out " +
                        (dir / "d/points" / r8.id).string());
    // Asked again: the stored result, not a second run.
    PointResult again = store.get(r8);
    EXPECT_EQ(again.status, "oom");
    EXPECT_FALSE(again.ran);
    EXPECT_EQ(store.children_run(), 1u);
  }
}
