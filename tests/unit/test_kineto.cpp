// Kineto traces as the measured durations of an Execution Trace: the join on rf_id and the
// GPU time of what each op launched, on traces written here.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/workload/importers/kineto.h"
#include "sim/workload/importers/pytorch_et.h"

using namespace memsim;

namespace {

// Two ops: an addmm (rf_id 5) and a relu (rf_id 9), in torch 2.x's layout.
const char* kEt = R"J({"schema": "1.1.0-chakra.0.0.4", "pid": 1, "nodes": [
  {"id": 3, "name": "aten::addmm", "ctrl_deps": 0,
   "attrs": [{"name": "rf_id", "type": "uint64", "value": 5}, {"name": "op_schema", "type": "string",
             "value": "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"}],
   "inputs": {"values": [[1, 10, 0, 3, 4, "cuda:0"], [2, 11, 0, 8, 4, "cuda:0"], [3, 12, 0, 12, 4, "cuda:0"]],
              "shapes": [[3], [2, 4], [4, 3]], "types": ["Tensor(float)", "Tensor(float)", "Tensor(float)"]},
   "outputs": {"values": [[4, 13, 0, 6, 4, "cuda:0"]], "shapes": [[2, 3]], "types": ["Tensor(float)"]}},
  {"id": 7, "name": "aten::relu", "ctrl_deps": 0,
   "attrs": [{"name": "rf_id", "type": "uint64", "value": 9}, {"name": "op_schema", "type": "string",
             "value": "aten::relu(Tensor self) -> Tensor"}],
   "inputs": {"values": [[4, 13, 0, 6, 4, "cuda:0"]], "shapes": [[2, 3]], "types": ["Tensor(float)"]},
   "outputs": {"values": [[5, 14, 0, 6, 4, "cuda:0"]], "shapes": [[2, 3]], "types": ["Tensor(float)"]}}]})J";

// cpu_ops with their launches (cuda_runtime on the same thread while they ran) and the
// kernels those launched (same correlation). The addmm's kernels: 7 + 2 us (one launched by
// a child op); the relu's: 3 us. `key` is the arg that carries the ET's rf_id.
std::string kineto(const std::string& key, const std::string& relu_name = "aten::relu") {
  return R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU"}], "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 100, "dur": 50, "args": {")" + key +
         R"(": 5}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 120, "dur": 10, "args": {")" + key +
         R"(": 6}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 5, "args": {"correlation": 71}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 125, "dur": 3, "args": {"correlation": 72}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 130, "dur": 3, "args": {"correlation": 73}},
  {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 200, "dur": 7, "args": {"correlation": 71}},
  {"ph": "X", "cat": "kernel", "name": "copy", "pid": 0, "tid": 7, "ts": 210, "dur": 2, "args": {"correlation": 72}},
  {"ph": "X", "cat": "kernel", "name": "other thread", "pid": 0, "tid": 7, "ts": 220, "dur": 100, "args": {"correlation": 73}},
  {"ph": "X", "cat": "cpu_op", "name": ")" + relu_name + R"(", "pid": 1, "tid": 1, "ts": 160, "dur": 20, "args": {")" + key +
         R"(": 9}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 165, "dur": 4, "args": {"correlation": 74}},
  {"ph": "X", "cat": "kernel", "name": "relu", "pid": 0, "tid": 7, "ts": 300, "dur": 3, "args": {"correlation": 74}},
  {"ph": "i", "cat": "cpu_instant_event", "name": "marker", "pid": 1, "tid": 1, "ts": 1}
  ], "traceName": "t"})";
}

std::string padded(std::string s) {
  s.reserve(s.size() + 64);
  return s;
}

}  // namespace

TEST(Kineto, KernelsGpuTimeBecomesTheOpsDuration) {
  for (const char* key : {"External id", "Record function id"}) {
    SCOPED_TRACE(key);
    PytorchEtImport et = import_pytorch_et_with_origins(padded(kEt), "t.json", "t");
    ASSERT_EQ(et.trace.ops.size(), 2u);
    EXPECT_EQ(et.origins[0].rf_id, 5);
    const KinetoTimes k = read_kineto(padded(kineto(key)), "k.json");
    EXPECT_EQ(k.device, "Test GPU");
    EXPECT_TRUE(k.has_gpu);
    EXPECT_EQ(k.cpu_ops, 3u);
    const auto notes = apply_kineto(et.trace, et.origins, k, "k.json");
    ASSERT_TRUE(et.trace.ops[0].measured_s.has_value());
    EXPECT_DOUBLE_EQ(*et.trace.ops[0].measured_s, 9e-6);  // 7 + 2: its own kernel and its child's
    EXPECT_DOUBLE_EQ(*et.trace.ops[1].measured_s, 3e-6);
    EXPECT_EQ(et.trace.measured_on, "Test GPU");
    EXPECT_EQ(notes, std::vector<std::string>{fmt::format("Kineto k.json: 2 of 2 ops joined on rf_id = \"{}\" and timed "
                                                          "by the GPU time of the kernels they launched (Test GPU)",
                                                          key)});
  }
}

TEST(Kineto, OpsWhoseNamesDifferAreNotJoined) {
  PytorchEtImport et = import_pytorch_et_with_origins(padded(kEt), "t.json", "t");
  const KinetoTimes k = read_kineto(padded(kineto("External id", "aten::gelu")), "k.json");
  const auto notes = apply_kineto(et.trace, et.origins, k, "k.json");
  EXPECT_TRUE(et.trace.ops[0].measured_s.has_value());
  EXPECT_FALSE(et.trace.ops[1].measured_s.has_value());
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[1], "1 ops not joined (0 with no Kineto op of their rf_id, 1 whose Kineto op has another name, e.g. "
                      "rf_id 9: aten::relu in the ET, aten::gelu in Kineto): not timed from Kineto");
}

TEST(Kineto, WithoutGpuEventsTheCpuTimeAndWithoutAJoinAnError) {
  PytorchEtImport et = import_pytorch_et_with_origins(padded(kEt), "t.json", "t");
  const std::string cpu_only = R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 0, "dur": 40.5, "args": {"External id": 5}}]})";
  const KinetoTimes k = read_kineto(padded(cpu_only), "cpu.json");
  EXPECT_FALSE(k.has_gpu);
  apply_kineto(et.trace, et.origins, k, "cpu.json");
  EXPECT_DOUBLE_EQ(*et.trace.ops[0].measured_s, 40.5e-6);
  const std::string other_run = R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 0, "dur": 4, "args": {"External id": 5}}]})";
  try {
    apply_kineto(et.trace, et.origins, read_kineto(padded(other_run), "o.json"), "o.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "o.json: no op of t joins a Kineto op (on rf_id = \"Record function id\" or "
                                     "\"External id\", with the same name): the two traces are not of the same run");
  }
  EXPECT_THROW(read_kineto(padded("{\"schemaVersion\": 1}"), "x.json"), InputError);
  EXPECT_TRUE(looks_like_kineto("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": ["));
  EXPECT_TRUE(looks_like_kineto("{\"traceEvents\": []}"));
  EXPECT_FALSE(looks_like_kineto("{\"schema\": \"1.0.1\", \"nodes\": []}"));
}

// Every duration is checked as every trace's are (durations.h): a negative, non-numeric or
// absurd `dur` is an error naming the event, not an op measured at 0 s.
TEST(Kineto, EveryDurationIsAnHourOrLessOfMicroseconds) {
  auto message = [](const std::string& text) {
    try {
      PytorchEtImport et = import_pytorch_et_with_origins(padded(kEt), "t.json", "t");
      apply_kineto(et.trace, et.origins, read_kineto(padded(text), "k.json"), "k.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto cpu_op = [](const std::string& key, const std::string& value) {
    return R"({"traceEvents": [
      {"ph": "i", "name": "marker", "ts": 1},
      {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, ")" + key + R"(": )" + value +
           (key == "ts" ? R"(, "dur": 4)" : R"(, "ts": 0)") + R"(, "args": {"External id": 5}}]})";
  };
  const std::string expected =
      "k.json: traceEvents[1] (aten::addmm): dur: expected a time in microseconds from 0 to 3.6e+09 (an hour), got ";
  EXPECT_EQ(message(cpu_op("dur", "-20")), expected + "-20");
  EXPECT_EQ(message(cpu_op("dur", "\"40\"")), expected + "\"40\"");
  EXPECT_EQ(message(cpu_op("dur", "null")), expected + "null");
  EXPECT_EQ(message(cpu_op("dur", "1e300")), expected + "1e+300");
  EXPECT_EQ(message(cpu_op("ts", "\"soon\"")),
            "k.json: traceEvents[1] (aten::addmm): ts: expected a time in microseconds, got \"soon\"");
  EXPECT_EQ(message(cpu_op("dur", "40.5")), "no error");
  // Each kernel within an hour, but what one op launched past it: an error naming the op.
  const std::string long_kernels = R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 0, "dur": 50, "args": {"External id": 5}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 1, "args": {"correlation": 2}},
    {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 100, "dur": 3e9, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 200, "dur": 3e9, "args": {"correlation": 2}}]})";
  EXPECT_EQ(message(long_kernels), "k.json: op aten::addmm (External id 5): the time of the kernels it launched: "
                                   "expected a time in microseconds from 0 to 3.6e+09 (an hour), got 6000000000");
}
