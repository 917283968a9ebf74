// timeline.csv and memory.csv written as the engine runs (CsvStream, a RecordStream): the
// recorder passes its records in blocks, in order, each sample whole, and the files are
// byte for byte what the writers make from the recorder after the run. A stream that is
// not finished leaves no file; a write that fails fails finish(). One run per test (SimGrid's
// engine is a process singleton).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/core/error.h"
#include "sim/inputs/inputs.h"
#include "sim/inputs/policy_args.h"
#include "sim/report/csv_stream.h"
#include "sim/report/writers.h"
#include "sim/run/run.h"
#include "tests/model_helpers.h"

using namespace memsim;
namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_csv_stream_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Passes the blocks on to a CsvStream and notes their sizes and where they end.
class Tee final : public RecordStream {
 public:
  explicit Tee(CsvStream& to) : to_(to) {}
  void start(const Trace& trace, const PlatformSpec& platform) override {
    ++starts;
    to_.start(trace, platform);
  }
  void events(const Event* first, std::size_t n) override {
    event_blocks.push_back(n);
    to_.events(first, n);
  }
  void samples(const SampleLog::Entry* first, std::size_t n) override {
    entry_blocks.push_back(n);
    if (n > 0 && first[n - 1].more) ++blocks_ending_mid_sample;
    to_.samples(first, n);
  }
  int starts = 0, blocks_ending_mid_sample = 0;
  std::vector<std::size_t> event_blocks, entry_blocks;

 private:
  CsvStream& to_;
};

// A chain long enough for many blocks, on a GPU whose HBM is too small for it under vDNN:
// compute, copies both ways and stalls, samples on two tiers.
RunInputs chain_inputs(const std::unique_ptr<Policy>& policy) {
  RunInputs in;
  in.platform = load_platform_arg("a100-40gb", {parse_override("gpu0.hbm.capacity=1600MiB")});
  in.workloads.push_back(test::generate("model: chain\nlayers: 3000\nwidth: 256\nbatch: 64\ndtype: fp32\noptimizer: sgd\n"));
  in.policy = policy.get();
  return in;
}

}  // namespace

TEST(CsvStream, WritesWhatTheRecorderKeepsAsTheRunGoes) {
  const auto policy = make_policy_arg("vdnn", {});
  RunInputs in = chain_inputs(policy);
  const std::string dir = temp_dir("same");
  RunResult r;
  CsvStream stream(dir, true, true);
  Tee tee(stream);
  in.stream = &tee;
  run(std::move(in), r);
  ASSERT_TRUE(stream.started());
  EXPECT_FALSE(fs::exists(dir + "/timeline.csv")) << "a file appears when the stream is finished";
  stream.finish();

  EXPECT_EQ(tee.starts, 1);
  ASSERT_GT(tee.event_blocks.size(), 2u) << "the events come in several blocks";
  ASSERT_GT(tee.entry_blocks.size(), 2u);
  std::size_t events = 0, entries = 0;
  for (std::size_t n : tee.event_blocks) events += n;
  for (std::size_t n : tee.entry_blocks) entries += n;
  EXPECT_EQ(events, r.recorder.events().size()) << "every event, once";
  EXPECT_EQ(entries, r.recorder.samples().entries().size()) << "every sample entry, once";
  EXPECT_EQ(tee.blocks_ending_mid_sample, 0) << "a block ends where a sample ends";
  bool copies = false;
  for (const Event& e : r.recorder.events()) copies |= e.kind == EventKind::swap_out;
  EXPECT_TRUE(copies) << "vDNN under 1600 MiB swaps";

  std::string timeline, memory;
  {
    TextOut t(timeline), m(memory);
    write_timeline_csv(t, r.recorder.events(), r.trace, in.platform);
    write_memory_csv(m, r.recorder.samples(), in.platform);
  }
  EXPECT_TRUE(slurp(dir + "/timeline.csv") == timeline) << "timeline.csv differs from the recorder's";
  EXPECT_TRUE(slurp(dir + "/memory.csv") == memory) << "memory.csv differs from the recorder's";
  for (const auto& f : fs::directory_iterator(dir))
    EXPECT_TRUE(f.path().filename() == "timeline.csv" || f.path().filename() == "memory.csv") << f.path();
}

TEST(CsvStream, AStreamNotFinishedLeavesNoFile) {
  const auto policy = make_policy_arg("none", {});
  RunInputs in = chain_inputs(policy);
  const std::string dir = temp_dir("unfinished");
  {
    RunResult r;  // the step outlives the stream
    CsvStream stream(dir, true, true);
    in.stream = &stream;
    run(std::move(in), r);
    EXPECT_TRUE(stream.started());
  }  // as when the command fails after the run: the temporaries go with the stream
  ASSERT_TRUE(fs::exists(dir));
  EXPECT_TRUE(fs::is_empty(dir)) << "nothing is left in " << dir;
}

TEST(CsvStream, AFailedWriteFailsFinishNamingTheFile) {
  const auto policy = make_policy_arg("none", {});
  RunInputs in = chain_inputs(policy);
  const std::string dir = temp_dir("full");
  fs::create_directories(dir);
  fs::create_symlink("/dev/full", dir + "/timeline.csv");  // every write: ENOSPC
  RunResult r;
  CsvStream stream(dir, true, true);
  in.stream = &stream;
  run(std::move(in), r);
  try {
    stream.finish();
    ADD_FAILURE() << "finish() should throw";
  } catch (const OutputError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/timeline.csv: cannot write"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir + "/memory.csv")) << "a run whose files failed commits none of them";
}
