// Measured times and the files made from them: every duration a trace states is checked
// where it is read (Kineto's included), and what calibrate fits from them is a platform that
// memsim reads back, or an error. Inputs that used to be taken without a word are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

// A Kineto trace of one cpu_op whose `dur` is `dur`, as written.
std::string kineto_with_dur(const std::string& dur) {
  return R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB"}], "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": )" + dur +
         R"(, "args": {"External id": 3, "Record function id": 3}}]})";
}

}  // namespace

TEST(MeasuredInputs, AKinetoDurationThatIsNoTimeIsAnErrorNotAZeroSecondStep) {
  const std::string dir = temp_dir("kineto_dur");
  for (const std::string dur : {"-20", "\"40\"", "1e300"}) {
    SCOPED_TRACE(dur);
    const std::string k = dir + "/k.json";
    write(k, kineto_with_dur(dur));
    const std::string expected =
        fmt::format("{}: traceEvents[0] (aten::mm): dur: expected a time in microseconds from 0 to 3.6e+09 (an hour), "
                    "got {}\n", k, dur == "1e300" ? "1e+300" : dur);
    CliResult r = run_memsim("run a100-40gb tests/data/et/step-1.1.json --kineto '" + k + "' --out '" + dir + "/out'");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(r.err, expected);
    // `trace --kineto` wrote the negative time into a native trace memsim then refused.
    r = run_memsim("trace tests/data/et/step-1.1.json --kineto '" + k + "' -o '" + dir + "/t.json'");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(r.err, expected);
    EXPECT_FALSE(fs::exists(dir + "/t.json"));
  }
  fs::remove_all(dir);
}

TEST(MeasuredInputs, CalibrateRefusesAFitThePlatformLoaderWouldRefuse) {
  const std::string dir = temp_dir("calib_bounds");
  // Twenty matmuls that each took 2 s whatever their work: the fit is a 2 s launch
  // overhead, past the 1 s a device file may hold.
  std::string ops;
  for (int i = 0; i < 20; ++i)
    ops += fmt::format("{}    {{\"name\": \"mm{}\", \"kind\": \"matmul\", \"phase\": \"forward\", \"dtype\": \"fp32\", "
                       "\"inputs\": [0], \"outputs\": [], \"flops\": {}, \"bytes\": 0, \"measured_s\": 2}}",
                       i ? ",\n" : "", i, 1000000 * (i + 1));
  const std::string trace = dir + "/slow.json";
  write(trace, "{\"format\": \"memsim-trace\", \"version\": 1, \"name\": \"slow\", \"buffers\": [\n"
               "    {\"id\": 0, \"name\": \"x\", \"bytes\": 4096, \"category\": \"input\"}],\n  \"ops\": [\n" +
                   ops + "]}\n");
  const std::string out = dir + "/fit.yaml";
  CliResult r = run_memsim("calibrate a100-40gb '" + trace + "' -o '" + out + "'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err, "slow: the fit gives device 'gpu0' a launch overhead of 2e+06us; a device file's launch_overhead is "
                   "a time from 0 to 1s: the measured times are not of ops a roofline with one overhead can time\n");
  EXPECT_FALSE(fs::exists(out));
  // An Execution Trace op of 2^63 us is refused where it is read, before any fit.
  r = run_memsim("calibrate a100-40gb tests/bad_inputs/et_duration_too_large.json -o '" + out + "'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err, "tests/bad_inputs/et_duration_too_large.json: node 3 (aten::mm): inclusive_dur: expected a time in "
                   "microseconds from 0 to 3.6e+09 (an hour), got 9223372036854775808\n");
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

TEST(MeasuredInputs, NodesOnAPlatformThatIsNoClusterIsAnError) {
  CliResult r = run_memsim("info a100-40gb --set nodes=2");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err, "--set nodes=2: nodes: 2 nodes need a fabric to join them, and platform 'a100-40gb' has no 'fabric' "
                   "section: nodes applies to a cluster (a node description and the fabric of switches and links "
                   "between its copies)\n");
  r = run_memsim("info dgx-h100-superpod --set nodes=2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}
