// `memsim sweep` and `memsim fit` end to end: listing, running in parallel, resuming after a
// kill, shards merged byte for byte, failed points, the example sweep against single runs,
// bad sweep files, and the max-batch bisection against one worked by hand.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_sweep_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += c;
    }
  }
  cells.push_back(cell);
  return cells;
}

// results.csv as maps from column name to cell, in row order.
std::vector<std::map<std::string, std::string>> read_results(const std::string& path) {
  const auto lines = lines_of(slurp(path));
  std::vector<std::map<std::string, std::string>> rows;
  if (lines.empty()) return rows;
  const auto header = split_csv_line(lines[0]);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto cells = split_csv_line(lines[i]);
    EXPECT_EQ(cells.size(), header.size()) << "row " << i << ": " << lines[i];
    std::map<std::string, std::string> row;
    for (std::size_t c = 0; c < header.size() && c < cells.size(); ++c) row[header[c]] = cells[c];
    rows.push_back(std::move(row));
  }
  return rows;
}

// "N already done, M run: ..." from a sweep's summary.
int count_after(const std::string& text, const std::string& what) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex("(\\d+) " + what))) return std::stoi(m[1]);
  return -1;
}

// The small sweep of the issue: mlp and chain on an A100-40GB, two policies, two batches.
std::string small_sweep(const std::string& dir) {
  return write(dir + "/small.yaml",
               "devices: [a100-40gb]\n"
               "workloads: [mlp, chain]\n"
               "policies: [none, keep-all]\n"
               "set:\n"
               "  workload.batch: [32, 64]\n");
}

}  // namespace

TEST(SweepList, PrintsEveryPointInOrderWithoutRunning) {
  const std::string dir = temp_dir("list");
  CliResult r = run_memsim("sweep " + small_sweep(dir) + " --list --out " + dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u + 8);
  EXPECT_EQ(lines[0], dir + "/small.yaml: 8 points (1 device x 2 workloads x 2 policies x 2 workload.batch)");
  EXPECT_TRUE(std::regex_match(lines[1], std::regex(R"(#  id +device +workload +policy +workload\.batch)"))) << lines[1];
  EXPECT_TRUE(std::regex_match(lines[2], std::regex(R"(1  [0-9a-f]{16}  a100-40gb  mlp +none +32)"))) << lines[2];
  EXPECT_TRUE(std::regex_match(lines[5], std::regex(R"(4  [0-9a-f]{16}  a100-40gb  mlp +keep-all +64)"))) << lines[5];
  EXPECT_TRUE(std::regex_match(lines[9], std::regex(R"(8  [0-9a-f]{16}  a100-40gb  chain +keep-all +64)"))) << lines[9];
  EXPECT_FALSE(fs::exists(dir + "/out"));
  // A shard lists its own points.
  CliResult s = run_memsim("sweep " + dir + "/small.yaml --list --shard 2/3");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("; shard 2/3: 3 points"), std::string::npos) << s.out;
  EXPECT_EQ(lines_of(s.out).size(), 2u + 3);
}

TEST(SweepRun, SmallSweepGivesOneRowPerPointRerunSkipsAndForceReruns) {
  const std::string dir = temp_dir("small");
  const std::string sweep = small_sweep(dir), out = dir + "/out";
  CliResult r = run_memsim("sweep " + sweep + " -j 2 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_after(r.out, "already done"), 0) << r.out;
  EXPECT_EQ(count_after(r.out, "ok"), 8) << r.out;
  const auto rows = read_results(out + "/results.csv");
  ASSERT_EQ(rows.size(), 8u);
  const std::string header = lines_of(slurp(out + "/results.csv"))[0];
  EXPECT_EQ(header,
            "point_id,device,workload,policy,workload.batch,status,error,iteration_time_s,"
            "compute_time_s,stall_time_s,recompute_time_s,transfer_time_s,swap_out_bytes,"
            "swap_in_bytes,recompute_flops,comm_time_s,exposed_comm_time_s,tokens_per_s,samples_per_s,mfu,hfu,"
            "gpu_hours_per_1e9_tokens,gpu0.hbm.peak_allocated_bytes,gpu0.hbm.peak_reserved_bytes");
  const char* order[8][3] = {{"mlp", "none", "32"},      {"mlp", "none", "64"},
                             {"mlp", "keep-all", "32"},  {"mlp", "keep-all", "64"},
                             {"chain", "none", "32"},    {"chain", "none", "64"},
                             {"chain", "keep-all", "32"}, {"chain", "keep-all", "64"}};
  std::set<std::string> ids;
  for (std::size_t i = 0; i < 8; ++i) {
    const auto& row = rows[i];
    EXPECT_EQ(row.at("device"), "a100-40gb");
    EXPECT_EQ(row.at("workload"), order[i][0]);
    EXPECT_EQ(row.at("policy"), order[i][1]);
    EXPECT_EQ(row.at("workload.batch"), order[i][2]);
    EXPECT_EQ(row.at("status"), "ok");
    EXPECT_EQ(row.at("error"), "");
    ids.insert(row.at("point_id"));
    // Each row is the point's own summary.json.
    json s = json::parse(slurp(out + "/points/" + row.at("point_id") + "/summary.json"));
    EXPECT_EQ(row.at("iteration_time_s"), s["iteration_time_s"].dump());
    EXPECT_EQ(row.at("gpu0.hbm.peak_allocated_bytes"), s["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].dump());
    // Only what the sweep reads: summary.json (outputs: is not given).
    EXPECT_FALSE(fs::exists(out + "/points/" + row.at("point_id") + "/timeline.csv"));
    EXPECT_FALSE(fs::exists(out + "/points/" + row.at("point_id") + "/memory.csv"));
  }
  EXPECT_EQ(ids.size(), 8u);
  // Without memory sharing the peak is higher; the time is the same (nothing swaps).
  EXPECT_GT(std::stoull(rows[2].at("gpu0.hbm.peak_allocated_bytes")),
            std::stoull(rows[0].at("gpu0.hbm.peak_allocated_bytes")));
  EXPECT_EQ(rows[2].at("iteration_time_s"), rows[0].at("iteration_time_s"));

  const std::string first_summary = out + "/points/" + rows[0].at("point_id") + "/summary.json";
  const auto written = fs::last_write_time(first_summary);
  const std::string before = slurp(out + "/results.csv");
  CliResult again = run_memsim("sweep " + sweep + " -j 2 --out " + out);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(count_after(again.out, "already done"), 8) << again.out;
  EXPECT_EQ(count_after(again.out, "run:"), 0) << again.out;
  EXPECT_EQ(fs::last_write_time(first_summary), written);
  EXPECT_EQ(slurp(out + "/results.csv"), before);

  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CliResult forced = run_memsim("sweep " + sweep + " -j 2 --force --out " + out);
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(count_after(forced.out, "already done"), 0) << forced.out;
  EXPECT_EQ(count_after(forced.out, "run:"), 8) << forced.out;
  EXPECT_NE(fs::last_write_time(first_summary), written);
  EXPECT_EQ(slurp(out + "/results.csv"), before);  // deterministic
}

TEST(SweepRun, OutputsNamesTheFilesEachPointWrites) {
  const std::string dir = temp_dir("outputs");
  const std::string sweep = write(dir + "/one.yaml",
                                  "devices: [a100-40gb]\nworkloads: [mlp]\noutputs: [memory, peak]\n");
  CliResult r = run_memsim("sweep " + sweep + " --out " + dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = read_results(dir + "/out/results.csv");
  ASSERT_EQ(rows.size(), 1u);
  const std::string point = dir + "/out/points/" + rows[0].at("point_id");
  EXPECT_TRUE(fs::exists(point + "/summary.json"));  // always: results.csv is made of it
  EXPECT_TRUE(fs::exists(point + "/memory.csv"));
  EXPECT_TRUE(fs::exists(point + "/peak.csv"));
  EXPECT_FALSE(fs::exists(point + "/timeline.csv"));
  // An unknown name is the sweep file's located error.
  const std::string bad = write(dir + "/bad.yaml", "devices: [a100-40gb]\nworkloads: [mlp]\noutputs: [memory, plots]\n");
  CliResult b = run_memsim("sweep " + bad + " --out " + dir + "/bad");
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_NE(b.err.find("bad.yaml:3"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("got 'plots'"), std::string::npos) << b.err;
}

TEST(SweepRun, KilledSweepResumesToTheSameResults) {
  const std::string dir = temp_dir("kill");
  // Points slow enough (a few tenths of a second) to kill the sweep between them.
  const std::string sweep = write(dir + "/kill.yaml",
                                  "devices: [a100-40gb]\n"
                                  "workloads: [chain]\n"
                                  "policies: [none, keep-all]\n"
                                  "set:\n"
                                  "  workload.layers: [3000]\n"
                                  "  workload.batch: [8, 16, 24, 32]\n");
  ASSERT_EQ(run_memsim("sweep " + sweep + " -j 1 --out " + dir + "/ref").exit_code, 0);
  const std::string reference = slurp(dir + "/ref/results.csv");
  ASSERT_EQ(lines_of(reference).size(), 1u + 8);

  const std::string out = dir + "/killed";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    if (chdir(MEMSIM_SOURCE_DIR) != 0) _exit(127);
    execl(MEMSIM_BINARY, MEMSIM_BINARY, "sweep", sweep.c_str(), "-j", "1", "--out", out.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Kill it (SIGKILL: no chance to tidy up) as soon as the first point has finished.
  auto finished = [&] {
    std::size_t n = 0;
    std::error_code ec;
    if (fs::is_directory(out + "/points"))
      for (const auto& e : fs::directory_iterator(out + "/points", ec))
        n += fs::exists(e.path() / "summary.json");
    return n;
  };
  // The deadline is for a sweep that never finishes a point; a loaded machine only waits longer.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  while (finished() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  const std::size_t done_at_kill = finished();
  ASSERT_GE(done_at_kill, 1u) << "no point of " << sweep << " finished within 600 s";
  ASSERT_LT(done_at_kill, 8u) << "the sweep finished before it could be killed";
  // Whatever results.csv holds is whole rows.
  if (fs::exists(out + "/results.csv")) read_results(out + "/results.csv");

  CliResult resumed = run_memsim("sweep " + sweep + " -j 2 --out " + out);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const int already = count_after(resumed.out, "already done");
  EXPECT_GE(already, static_cast<int>(done_at_kill)) << resumed.out;  // children may finish after the kill
  EXPECT_EQ(already + count_after(resumed.out, "run:"), 8) << resumed.out;
  EXPECT_EQ(slurp(out + "/results.csv"), reference);
  std::set<std::string> ids;
  for (const auto& row : read_results(out + "/results.csv")) ids.insert(row.at("point_id"));
  EXPECT_EQ(ids.size(), 8u);
}

TEST(SweepRun, ShardsMergeToTheSingleRunByteForByte) {
  const std::string dir = temp_dir("shards");
  const std::string sweep = small_sweep(dir);
  ASSERT_EQ(run_memsim("sweep " + sweep + " -j 2 --out " + dir + "/single").exit_code, 0);
  std::size_t rows = 0;
  for (int i = 1; i <= 3; ++i) {
    CliResult r = run_memsim(fmt::format("sweep {} -j 1 --shard {}/3 --out {}/shard-{}", sweep, i, dir, i));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(fmt::format("shard {}/3", i)), std::string::npos) << r.out;
    rows += read_results(fmt::format("{}/shard-{}/results.csv", dir, i)).size();
  }
  EXPECT_EQ(rows, 8u);  // 3 + 3 + 2, each point in one shard
  // Shards from the environment of a Slurm array task.
  CliResult env = run_memsim("sweep " + sweep + " --list");  // (no environment: all points)
  EXPECT_EQ(lines_of(env.out).size(), 2u + 8);
  CliResult merged = run_memsim(fmt::format("sweep {} --merge {}/shard-1 {}/shard-2 {}/shard-3 --out {}/merged",
                                            sweep, dir, dir, dir, dir));
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_NE(merged.out.find("merged 8 of 8 points from 3 folders"), std::string::npos) << merged.out;
  EXPECT_EQ(slurp(dir + "/merged/results.csv"), slurp(dir + "/single/results.csv"));
  // The merged folder is a complete sweep folder: running the sweep there finds everything.
  CliResult resumed = run_memsim("sweep " + sweep + " --out " + dir + "/merged");
  EXPECT_EQ(count_after(resumed.out, "already done"), 8) << resumed.out;
  // A merge that misses a shard says so.
  CliResult partial = run_memsim(fmt::format("sweep {} --merge {}/shard-1 --out {}/partial", sweep, dir, dir));
  EXPECT_EQ(partial.exit_code, 1);
  EXPECT_NE(partial.err.find("5 of 8 points have no result"), std::string::npos) << partial.err;
  EXPECT_EQ(read_results(dir + "/partial/results.csv").size(), 3u);
}

TEST(SweepRun, SlurmArrayEnvironmentPicksTheShard) {
  const std::string dir = temp_dir("slurm_env");
  const std::string sweep = small_sweep(dir);
  CliResult r = run_memsim("sweep " + sweep + " --list --shard 3/3");
  const std::string expected = r.out.substr(r.out.find('\n'));  // the points of shard 3/3
  const std::string env = "SLURM_ARRAY_TASK_ID=7 SLURM_ARRAY_TASK_MIN=5 SLURM_ARRAY_TASK_COUNT=3 ";
  const std::string cmd = "cd '" + std::string(MEMSIM_SOURCE_DIR) + "' && " + env + "'" + MEMSIM_BINARY +
                          "' sweep " + sweep + " -j 2 --out " + dir + "/out 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("shard 3/3 from SLURM_ARRAY_TASK_ID=7 (2 of 8 points)"), std::string::npos) << out;
  const auto rows = read_results(dir + "/out/results.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NE(expected.find(rows[0].at("point_id")), std::string::npos);
  EXPECT_NE(expected.find(rows[1].at("point_id")), std::string::npos);
}

TEST(SweepRun, AFailingPointIsRecordedAndTheOthersRun) {
  const std::string dir = temp_dir("failing");
  const std::string sweep = write(dir + "/failing.yaml",
                                  "devices: [a100-40gb]\n"
                                  "workloads: [mlp]\n"
                                  "set:\n"
                                  "  workload.batch: [16, 0, 32]\n");
  CliResult r = run_memsim("sweep " + sweep + " -j 2 --out " + dir + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_after(r.out, "failed"), 1) << r.out;
  EXPECT_NE(r.err.find("1 point failed; see the error column"), std::string::npos) << r.err;
  const auto rows = read_results(dir + "/out/results.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].at("status"), "ok");
  EXPECT_EQ(rows[1].at("status"), "error");
  EXPECT_EQ(rows[1].at("workload.batch"), "0");
  EXPECT_EQ(rows[1].at("error"),
            sweep + ":4:24 (workload.batch=0): batch: expected an integer from 1 to 1000000, got '0'");
  EXPECT_EQ(rows[1].at("iteration_time_s"), "");
  EXPECT_EQ(rows[2].at("status"), "ok");
}

TEST(SweepRun, ExampleSweepMatchesSingleRuns) {
  const std::string dir = temp_dir("example");
  const std::string file = "configs/sweeps/policies.yaml";
  CliResult r = run_memsim("sweep " + file + " -j 2 --out " + dir);
  const auto rows = read_results(dir + "/results.csv");
  ASSERT_EQ(rows.size(), 3u * 2 * 6 * 4) << r.err;
  EXPECT_EQ(count_after(r.out, "failed"), 0) << r.out;
  std::set<std::string> statuses;
  for (const auto& row : rows) statuses.insert(row.at("status"));
  EXPECT_TRUE(statuses.count("ok"));
  // Three points run on their own with `memsim run` give the same figures.
  std::size_t checked = 0;
  for (const std::size_t i : {std::size_t{0}, rows.size() / 2 + 5, rows.size() - 1}) {
    const auto& row = rows[i];
    CliResult single = run_memsim(fmt::format("run {} {} --policy {} --set workload.batch={} --json --out {}/single{}",
                                              row.at("device"), row.at("workload"), row.at("policy"),
                                              row.at("workload.batch"), dir, i));
    ASSERT_EQ(single.exit_code, 0) << single.err;
    json s = json::parse(single.out);
    EXPECT_EQ(row.at("status"), s["status"]) << i;
    for (const char* f : {"iteration_time_s", "compute_time_s", "stall_time_s", "recompute_time_s",
                          "swap_out_bytes", "swap_in_bytes"})
      EXPECT_EQ(row.at(f), s[f].dump()) << i << " " << f;
    EXPECT_EQ(row.at("gpu0.hbm.peak_allocated_bytes"), s["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].dump()) << i;
    EXPECT_EQ(row.at("gpu0.hbm.peak_reserved_bytes"), s["tiers"]["gpu0.hbm"]["peak_reserved_bytes"].dump()) << i;
    ++checked;
  }
  EXPECT_EQ(checked, 3u);
}

TEST(SweepDocs, TheExampleInDocsIsAValidSweep) {
  const std::string doc = slurp(std::string(MEMSIM_SOURCE_DIR) + "/docs/sweeps.md");
  const auto start = doc.find("```yaml\n");
  ASSERT_NE(start, std::string::npos);
  const auto end = doc.find("```", start + 8);
  const std::string dir = temp_dir("docs");
  const std::string file = write(dir + "/example.yaml", doc.substr(start + 8, end - start - 8));
  CliResult r = run_memsim("sweep " + file + " --list");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // none takes no budget: its points with the two budgets are one.
  EXPECT_NE(r.out.find(": 240 points (3 devices x 2 workloads x 3 policies x 4 workload.batch x 2 "
                       "policy.budget x 2 gpu0.hbm.capacity+pcie0.bandwidth), 48 repeats left out"),
            std::string::npos)
      << r.out;
}

// Every file under tests/bad_sweeps/ is refused before anything runs, with exactly the
// message in its .expected file.
TEST(SweepBadFiles, EachIsRefusedWithItsExactMessage) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(MEMSIM_SOURCE_DIR) / "tests/bad_sweeps"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 5u);
  const std::string out = temp_dir("bad");
  for (const auto& f : files) {
    const std::string rel = "tests/bad_sweeps/" + f.filename().string();
    CliResult r = run_memsim("sweep " + rel + " -j 1 --out " + out + "/" + f.stem().string());
    EXPECT_EQ(r.exit_code, 1) << rel;
    EXPECT_EQ(r.err, slurp(fs::path(f).replace_extension(".expected").string())) << rel;
    EXPECT_EQ(r.out, "") << rel;
    EXPECT_FALSE(fs::exists(out + "/" + f.stem().string())) << rel << ": something ran";
  }
}

// The chain's peak, worked by hand (8 layers of 256 x 256 fp32 weights, SGD, policy none,
// the ideal allocator). Per sample, every activation is 256 x 4 = 1024 B. Two moments
// compete for the peak:
//  - the start of the backward: the weights (8 x 256 x 256 x 4 = 2,097,152 B), the 8 layer
//    outputs kept for it, the loss gradient, and the input and target: 2,097,152 + 11 x 1024 b;
//  - the end: weights and all 8 weight gradients (4,194,304 B) with the last input gradient
//    and the input: 4,194,304 + 2 x 1024 b.
// With capacity 2,097,152 + 11,264 x 300 + 5,000 = 5,481,352 B the first binds: max 300.
// With 4,194,304 + 2,048 x 100 = 4,399,104 B the second does: max 100.
constexpr const char* kChain = "--set workload.layers=8 --set workload.width=256";

TEST(FitCli, ChainMaxBatchMatchesTheHandBisection) {
  const std::string dir = temp_dir("fit");
  // The formula holds where it matters.
  for (const auto& [batch, peak] : {std::pair{300, 2'097'152 + 11'264 * 300}, std::pair{1, 4'194'304 + 2'048}}) {
    json s = json::parse(run_memsim(fmt::format("run a100-40gb chain {} --set workload.batch={} --json --out {}/r{}",
                                                kChain, batch, dir, batch)).out);
    EXPECT_EQ(s["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].get<std::int64_t>(), peak) << batch;
  }
  CliResult r = run_memsim(fmt::format("fit a100-40gb chain {} --set gpu0.hbm.capacity=5481352B --json --out {}/fit",
                                       kChain, dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["fits"].size(), 1u);
  const json& fit = j["fits"][0];
  EXPECT_EQ(fit["policy"], "none");
  EXPECT_EQ(fit["max"], 300);
  EXPECT_EQ(fit["first_fail"], 301);
  EXPECT_EQ(fit["fail_status"], "oom");
  // The bisection by hand: 1, 2, 4, ..., 256 fit, 512 does not; then halve [256, 512).
  const std::vector<std::pair<int, const char*>> expected{
      {1, "ok"},     {2, "ok"},     {4, "ok"},     {8, "ok"},    {16, "ok"},   {32, "ok"},
      {64, "ok"},    {128, "ok"},   {256, "ok"},   {512, "oom"}, {384, "oom"}, {320, "oom"},
      {288, "ok"},   {304, "oom"},  {296, "ok"},   {300, "ok"},  {302, "oom"}, {301, "oom"}};
  ASSERT_EQ(fit["probes"].size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(fit["probes"][i]["value"], expected[i].first) << i;
    EXPECT_EQ(fit["probes"][i]["status"], expected[i].second) << i;
  }
  // The other regime, as a table.
  CliResult t = run_memsim(fmt::format("fit a100-40gb chain {} --set gpu0.hbm.capacity=4399104B --out {}/fit2",
                                       kChain, dir));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_TRUE(std::regex_search(t.out, std::regex(R"(\n  none +100 +101 +\d+\n)"))) << t.out;
}

TEST(FitCli, ReportsPoliciesThatDoNotExistAndFitsTheOthers) {
  const std::string dir = temp_dir("fit_missing");
  CliResult r = run_memsim(fmt::format("fit a100-40gb chain {} --set gpu0.hbm.capacity=4399104B "
                                       "--policy none,no-such-policy --policy keep-all --slowdown 1.5 --out {}",
                                       kChain, dir));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  none +100 +101 +100 +\d+\n)"))) << r.out;
  // The error on standard error, its row on the table.
  EXPECT_NE(r.out.find("  no-such-policy  error (on standard error)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("memsim fit: policy no-such-policy: no such policy (policies: none, keep-all"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("no such policy"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  keep-all +\d+ +\d+ +\d+ +\d+\n)"))) << r.out;
  EXPECT_NE(r.out.find("within 1.5x: time per sample at most 1.5 x that of policy none at its max batch 100"),
            std::string::npos)
      << r.out;
}

TEST(FitCli, SweepFileAsksForTheMaxBatchAsAColumn) {
  const std::string dir = temp_dir("fit_sweep");
  const std::string sweep = write(dir + "/fit.yaml",
                                  "devices: [a100-40gb]\n"
                                  "workloads: [chain]\n"
                                  "set:\n"
                                  "  workload.layers: [8]\n"
                                  "  workload.width: [256]\n"
                                  "  workload.batch: [16, 32]\n"
                                  "  gpu0.hbm.capacity: [5481352B, 4399104B]\n"
                                  "fit: {axis: batch, slowdown: 1.5}\n");
  CliResult r = run_memsim("sweep " + sweep + " -j 2 --out " + dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = read_results(dir + "/out/results.csv");
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& row : rows) {
    const std::string want = row.at("gpu0.hbm.capacity") == "5481352B" ? "300" : "100";
    EXPECT_EQ(row.at("max_batch"), want) << row.at("point_id");
    // Policy none is its own baseline: its max is within any slowdown.
    EXPECT_EQ(row.at("max_batch_within_slowdown"), want) << row.at("point_id");
  }
  // Two searches (one per capacity), shared by the rows of both batches.
  std::size_t fits = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir + "/out/fits")) ++fits;
  EXPECT_EQ(fits, 2u);
}
