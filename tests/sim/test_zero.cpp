// ZeRO-Offload and ZeRO-Infinity against timelines worked out by hand, and on GPT-2 with
// mixed-precision Adam against the 16 bytes per parameter of model state under `none`.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/presets.h"
#include "sim/run/run.h"
#include "sim/policy/policy.h"
#include "sim/workload/models/models.h"
#include "tests/platform_helpers.h"

using namespace memsim;

namespace {

// The accelerator computes 1 TFLOPS (a 1e9-FLOP op takes 1 ms), the host CPU 0.5 TFLOPS
// (2 ms). Efficiency 1, no launch overhead; PCIe 1 GB/s each way (1 MB in 1 ms), one copy
// engine per direction; with `nvme`, an NVMe tier behind a half-duplex 2 GB/s link.
PlatformSpec box(const std::string& hbm, bool nvme = false, const std::string& dram = "64GiB") {
  std::string text = R"(
name: box
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS, fp16: 1TFLOPS}
    tiers:
      hbm: {role: compute, capacity: )" + hbm + R"(, bandwidth: 100TB/s}
  host:
    kind: cpu
    compute: {fp32: 0.5TFLOPS}
    tiers:
      dram: {role: offload, capacity: )" + dram + R"(, bandwidth: 100TB/s}
)";
  if (nvme) text += "      nvme: {role: offload, capacity: 1TiB, bandwidth: 2GB/s}\n";
  text += "links:\n  pcie: {endpoints: [gpu0.hbm, host.dram], bandwidth: 1GB/s}\n";
  if (nvme) text += "  nvme0: {endpoints: [host.dram, host.nvme], bandwidth: 2GB/s, duplex: half}\n";
  return load_platform(ConfigNode::parse_text(text, "box.yaml"));
}

std::unique_ptr<Policy> make(const std::string& name, const std::string& params = "{}") {
  auto node = ConfigNode::parse_text(params, "p.yaml");
  const PolicyInfo* info = find_policy(name);
  return info->create(Params(node, info->params, name));
}

Op op(const std::string& name, Phase phase, std::vector<BufferId> in, std::vector<BufferId> out,
      std::vector<BufferId> updates = {}) {
  Op o;
  o.name = name;
  o.kind = phase == Phase::optimizer ? "adam_step" : "matmul";
  o.phase = phase;
  o.dtype = phase == Phase::optimizer ? DType::fp32 : DType::fp16;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  o.updates = std::move(updates);
  o.flops = 1e9;
  return o;
}

// Two linear layers trained in mixed precision with Adam:
//   f1: x, w1 -> a    f2: a, w2 -> y    b2: y, a, w2 -> ga, gw2    b1: ga, x, w1 -> gw1
//   s1: gw1; updates w1, w1.master, w1.exp_avg, w1.exp_avg_sq (s2 likewise)
// fp16 weights and gradients 1 MB, master weights and moments 2 MB, the rest 1000 B.
// Without `master`, as in fp32 training: no master weights, the steps update w1 and w2.
Trace two_layers(bool master = true) {
  Trace t;
  t.name = "two-layers";
  BufferId x = t.add_buffer("x", 1000, Category::input);
  std::vector<std::vector<BufferId>> params;
  for (const char* w : {"w1", "w2"}) {
    const std::string n = w;
    params.push_back({t.add_buffer(n, 1'000'000, Category::weight, true)});
    if (master) params.back().push_back(t.add_buffer(n + ".master", 2'000'000, Category::weight, true));
    params.back().push_back(t.add_buffer(n + ".exp_avg", 2'000'000, Category::optimizer_state, true));
    params.back().push_back(t.add_buffer(n + ".exp_avg_sq", 2'000'000, Category::optimizer_state, true));
  }
  BufferId a = t.add_buffer("a", 1000, Category::activation);
  BufferId y = t.add_buffer("y", 1000, Category::activation);
  BufferId ga = t.add_buffer("ga", 1000, Category::activation_grad);
  BufferId gw1 = t.add_buffer("w1.grad", 1'000'000, Category::gradient);
  BufferId gw2 = t.add_buffer("w2.grad", 1'000'000, Category::gradient);
  t.add_op(op("f1", Phase::forward, {x, params[0][0]}, {a}));
  t.add_op(op("f2", Phase::forward, {a, params[1][0]}, {y}));
  t.add_op(op("b2", Phase::backward, {y, a, params[1][0]}, {ga, gw2}));
  t.add_op(op("b1", Phase::backward, {ga, x, params[0][0]}, {gw1}));
  t.add_op(op("s1", Phase::optimizer, {gw1}, {}, params[0]));
  t.add_op(op("s2", Phase::optimizer, {gw2}, {}, params[1]));
  t.parameters = 1'000'000;  // 2 x 500k fp16 elements
  validate(t, "two-layers");
  return t;
}

struct ZeroRun {
  explicit ZeroRun(Trace t) : trace(std::move(t)) {}
  Trace trace;
  Summary summary;
  Recorder recorder;
};

void run(ZeroRun& r, const PlatformSpec& platform, const Policy& policy) {
  RunInputs in;
  in.platform = platform;
  in.workloads.push_back(r.trace);
  in.policy = &policy;
  RunResult result = memsim::run(in);
  r.trace = std::move(result.trace);
  r.summary = std::move(result.summary);
  r.recorder = std::move(result.recorder);
}

// (kind, buffer or op name) -> [start, end] of each event.
std::map<std::string, std::pair<double, double>> spans(const ZeroRun& r) {
  std::map<std::string, std::pair<double, double>> out;
  for (const Event& e : r.recorder.events()) {
    std::string key{to_string(e.kind)};
    if (e.kind == EventKind::compute) key += " " + r.trace.ops[e.op].name;
    else if (e.kind == EventKind::swap_in || e.kind == EventKind::swap_out)
      key += " " + r.trace.buffers[e.buffer].name;
    else
      continue;
    EXPECT_FALSE(out.count(key)) << key;
    out[key] = {e.start_s, e.end_s};
  }
  return out;
}

std::uint64_t traffic(const Summary& s, const std::string& from, const std::string& to) {
  for (const auto& t : s.traffic)
    if (t.from == from && t.to == to) return t.bytes;
  return 0;
}

void expect_span(const std::map<std::string, std::pair<double, double>>& got, const std::string& key,
                 double start_ms, double end_ms) {
  auto it = got.find(key);
  ASSERT_NE(it, got.end()) << key;
  EXPECT_NEAR(it->second.first, start_ms * 1e-3, 1e-12) << key;
  EXPECT_NEAR(it->second.second, end_ms * 1e-3, 1e-12) << key;
}

}  // namespace

TEST(ZeroOffload, GradientsOutStepOnTheHostWeightsBack) {
  // GPU: f1 [0,1] f2 [1,2] b2 [2,3] b1 [3,4]. w2.grad is done after b2 and goes out [3,4];
  // w1.grad after b1, [4,5] (one engine each way). The host runs s1 once w1.grad has
  // landed: [5,7] (1e9 FLOPs at 0.5 TFLOPS); w1's new half copy comes back [7,8]. s2's
  // gradient has been there since 4: [7,9], then w2.updated [9,10]. The step ends at 10.
  ZeroRun r(two_layers());
  auto p = make("zero-offload");
  run(r, box("1GiB"), *p);
  const Summary& s = r.summary;
  ASSERT_EQ(s.status, "ok");
  EXPECT_NEAR(s.iteration_time_s, 10e-3, 1e-12);
  EXPECT_NEAR(s.compute_time_s, 4e-3, 1e-12);  // the accelerator's: it never waits
  EXPECT_NEAR(s.stall_time_s, 0.0, 1e-15);
  EXPECT_NEAR(s.host_compute_time_s, 4e-3, 1e-12);  // s1 and s2 on the CPU
  const auto got = spans(r);
  EXPECT_EQ(got.size(), 10u);  // 6 ops, 2 gradients out, 2 weights in
  expect_span(got, "compute b1", 3, 4);
  expect_span(got, "swap_out w2.grad", 3, 4);
  expect_span(got, "swap_out w1.grad", 4, 5);
  expect_span(got, "compute s1", 5, 7);
  expect_span(got, "swap_in w1.updated", 7, 8);
  expect_span(got, "compute s2", 7, 9);
  expect_span(got, "swap_in w2.updated", 9, 10);
  // The steps ran on the host (the op devices after the accelerators).
  for (const Event& e : r.recorder.events())
    if (e.kind == EventKind::compute)
      EXPECT_EQ(e.device, r.trace.ops[e.op].phase == Phase::optimizer ? 1u : 0u) << r.trace.ops[e.op].name;
  EXPECT_EQ(s.swap_out_bytes, 2'000'000u);
  EXPECT_EQ(s.swap_in_bytes, 2'000'000u);
  EXPECT_EQ(traffic(s, "gpu0.hbm", "host.dram"), 2'000'000u);
  EXPECT_EQ(traffic(s, "host.dram", "gpu0.hbm"), 2'000'000u);
  // Master weights and moments lived in host DRAM from the start and never moved; the GPU
  // held no optimizer state, and its peak is at b2 (t = 2 ms): x, w1, w2, a, y, ga, w2.grad.
  const TierUsage& hbm = s.tiers[0].usage;
  const TierUsage& dram = s.tiers[1].usage;
  EXPECT_EQ(hbm.peak_allocated_bytes, 1000u + 2'000'000 + 3000 + 1'000'000);
  EXPECT_NEAR(hbm.peak_time_s, 2e-3, 1e-12);
  EXPECT_EQ(hbm.peak_by_category[static_cast<int>(Category::optimizer_state)], 0u);
  EXPECT_EQ(hbm.peak_by_category[static_cast<int>(Category::weight)], 2'000'000u);
  EXPECT_GE(dram.peak_by_category[static_cast<int>(Category::optimizer_state)], 8'000'000u);
  EXPECT_GE(dram.peak_by_category[static_cast<int>(Category::weight)], 4'000'000u);
}

TEST(ZeroOffload, WithoutMasterWeightsTheWeightsMakeTheRoundTrip) {
  // No fp32 master copy: the host updates the weights themselves, so each goes out with its
  // gradient after its last GPU use and comes back after its step. After b2: w2 [3,4],
  // w2.grad [4,5]; after b1: w1 [5,6], w1.grad [6,7] (one engine out). s1 [7,9], w1 back
  // [9,10]; s2 [9,11], w2 back [11,12].
  ZeroRun r(two_layers(false));
  auto p = make("zero-offload");
  run(r, box("1GiB"), *p);
  const Summary& s = r.summary;
  ASSERT_EQ(s.status, "ok");
  EXPECT_NEAR(s.iteration_time_s, 12e-3, 1e-12);
  const auto got = spans(r);
  expect_span(got, "swap_out w2", 3, 4);
  expect_span(got, "swap_out w1.grad", 6, 7);
  expect_span(got, "compute s1", 7, 9);
  expect_span(got, "swap_in w1", 9, 10);
  expect_span(got, "swap_in w2", 11, 12);
  EXPECT_EQ(traffic(s, "gpu0.hbm", "host.dram"), 4'000'000u);
  EXPECT_EQ(traffic(s, "host.dram", "gpu0.hbm"), 2'000'000u);
}

TEST(ZeroInfinity, StateComesFromNvmeAheadOfEachStep) {
  // As above, with each step's 6 MB of state (master, two moments) on NVMe at 2 GB/s: 1 ms
  // per 2 MB, one copy at a time (one host copy engine, a half-duplex link).
  // s1's state is read at the start: [0,1] [1,2] [2,3]. s2's is read as s1 comes next in
  // the plan, after b1 (t = 4): [4,5] [5,6] [6,7]. s1 runs [5,7] (its gradient lands at 5)
  // and writes its state back after s2's reads: [7,8] [8,9] [9,10]. s2 runs [7,9] (its state
  // is in at 7); w2.updated goes back [9,10]; s2's state is written [10,13]. End: 13 ms.
  ZeroRun r(two_layers());
  auto p = make("zero-infinity");
  run(r, box("1GiB", true), *p);
  const Summary& s = r.summary;
  ASSERT_EQ(s.status, "ok");
  EXPECT_NEAR(s.iteration_time_s, 13e-3, 1e-12);
  const auto got = spans(r);
  expect_span(got, "swap_in w1.master", 0, 1);
  expect_span(got, "swap_in w1.exp_avg_sq", 2, 3);
  expect_span(got, "swap_in w2.master", 4, 5);
  expect_span(got, "swap_in w2.exp_avg_sq", 6, 7);
  expect_span(got, "compute s1", 5, 7);
  expect_span(got, "swap_out w1.master", 7, 8);
  expect_span(got, "compute s2", 7, 9);
  expect_span(got, "swap_in w2.updated", 9, 10);
  expect_span(got, "swap_out w2.exp_avg_sq", 12, 13);
  EXPECT_EQ(traffic(s, "host.nvme", "host.dram"), 12'000'000u);
  EXPECT_EQ(traffic(s, "host.dram", "host.nvme"), 12'000'000u);
  EXPECT_EQ(traffic(s, "gpu0.hbm", "host.dram"), 2'000'000u);
  EXPECT_EQ(traffic(s, "host.dram", "gpu0.hbm"), 2'000'000u);
  // NVMe to DRAM counts as a swap-in (toward the faster tier).
  EXPECT_EQ(s.swap_in_bytes, 14'000'000u);
  EXPECT_EQ(s.swap_out_bytes, 14'000'000u);
  // DRAM's peak is first reached at 5 ms, as s1 starts: s1's state (6 MB), s2's (6 MB,
  // held from when its reads were issued at 4), both gradients and s1's output w1.updated.
  EXPECT_EQ(s.tiers[1].usage.peak_allocated_bytes, 15'000'000u);
  EXPECT_NEAR(s.tiers[1].usage.peak_time_s, 5e-3, 1e-12);
}

TEST(ZeroOffload, HalfWeightsThatDoNotFitEndInOom) {
  // 1.5 MB of HBM cannot hold the two 1 MB half weights.
  ZeroRun r(two_layers());
  auto p = make("zero-offload");
  run(r, box("1500000B"), *p);
  ASSERT_EQ(r.summary.status, "oom");
  ASSERT_TRUE(r.summary.oom);
  EXPECT_EQ(r.summary.oom->tier, "gpu0.hbm");
  EXPECT_EQ(r.summary.oom->requested_bytes, 1'000'000u);
  EXPECT_NE(r.summary.oom->reason.find("zero-offload"), std::string::npos) << r.summary.oom->reason;
}

TEST(ZeroInfinity, OffloadedParametersAreReadForEachRunOfUsesAndNeverWrittenBack) {
  // The half weights start on NVMe. w1 is read by f1 and b1 (not adjacent: read twice,
  // evicted in between with no copy), w2 by f2 and b2 (adjacent: read once). The steps' new
  // weights go to NVMe, so the GPU ends the step with no weights at all.
  ZeroRun r(two_layers());
  auto p = make("zero-infinity", "{offload_params: true}");
  run(r, box("1GiB", true), *p);
  const Summary& s = r.summary;
  ASSERT_EQ(s.status, "ok");
  EXPECT_EQ(traffic(s, "host.nvme", "gpu0.hbm"), 3'000'000u);
  EXPECT_EQ(traffic(s, "gpu0.hbm", "host.nvme"), 0u);
  EXPECT_EQ(traffic(s, "gpu0.hbm", "host.dram"), 2'000'000u);  // the gradients
  EXPECT_EQ(traffic(s, "host.dram", "gpu0.hbm"), 0u);
  EXPECT_EQ(traffic(s, "host.nvme", "host.dram"), 12'000'000u);  // state in
  EXPECT_EQ(traffic(s, "host.dram", "host.nvme"), 14'000'000u);  // state and new weights out
  std::uint64_t last_gpu_weights = 1;
  for (const MemorySample& m : r.recorder.samples())
    if (m.tier == 0) {
      EXPECT_LE(m.by_category[static_cast<int>(Category::weight)], 2'000'000u);
      last_gpu_weights = m.by_category[static_cast<int>(Category::weight)];
    }
  EXPECT_EQ(last_gpu_weights, 0u);
}

TEST(ZeroInfinity, StateThatDoesNotFitInHostMemoryEndsInOom) {
  // 5 MB of DRAM: s1's first two 2 MB reads are under way at the start, the third finds no
  // room and nothing leaving DRAM to wait for.
  ZeroRun r(two_layers());
  auto p = make("zero-infinity");
  run(r, box("1GiB", true, "5000000B"), *p);
  ASSERT_EQ(r.summary.status, "oom");
  ASSERT_TRUE(r.summary.oom);
  EXPECT_EQ(r.summary.oom->tier, "host.dram");
  EXPECT_EQ(r.summary.oom->requested_bytes, 2'000'000u);
  EXPECT_NE(r.summary.oom->op.find("w1.exp_avg_sq"), std::string::npos) << r.summary.oom->op;
  EXPECT_NE(r.summary.oom->reason.find("in host memory"), std::string::npos) << r.summary.oom->reason;
}

TEST(ZeroInfinity, APlatformWithoutNvmeIsAnError) {
  ZeroRun r(two_layers());
  auto p = make("zero-infinity");
  EXPECT_THROW(run(r, box("1GiB"), *p), InputError);
}

namespace {

// GPT-2 XL (1.56 B parameters) in mixed precision with Adam at batch 1, on an A100 40GB.
Trace gpt2_xl() {
  const ModelInfo* info = find_model("gpt2");
  auto node = ConfigNode::parse_text(
      "{model: gpt2, variant: xl, seq_len: 1024, batch: 1, dtype: fp16, mixed_precision: true, "
      "optimizer: adam}",
      "w.yaml");
  return info->generate(Params(node, info->params, "model gpt2", {"model"}));
}

PlatformSpec a100() { return test::preset_platform("a100-40gb"); }

// The most model state (weights, gradients, optimizer state) a tier held at any moment.
std::uint64_t most_model_state(const Recorder& rec, std::uint32_t tier, Category only = Category::other) {
  std::uint64_t most = 0;
  for (const MemorySample& m : rec.samples()) {
    if (m.tier != tier) continue;
    const auto& c = m.by_category;
    const std::uint64_t state =
        only != Category::other
            ? c[static_cast<int>(only)]
            : c[static_cast<int>(Category::weight)] + c[static_cast<int>(Category::gradient)] +
                  c[static_cast<int>(Category::optimizer_state)];
    most = std::max(most, state);
  }
  return most;
}

}  // namespace

TEST(ZeroOffloadGpt2, NoneHoldsSixteenBytesPerParameter) {
  // fp16 weights and gradients (2 + 2), fp32 master weights and two Adam moments (4 x 3),
  // all on the GPU once backward is done (a little more: the tied embedding's second gradient).
  ZeroRun r(gpt2_xl());
  const std::uint64_t params = r.trace.parameters;
  ASSERT_GT(params, 1'500'000'000u);
  auto p = make("none");
  run(r, a100(), *p);
  ASSERT_EQ(r.summary.status, "ok");
  EXPECT_GE(most_model_state(r.recorder, 0), 16 * params);
  EXPECT_LT(most_model_state(r.recorder, 0), 17 * params);
}

TEST(ZeroOffloadGpt2, TheGpuKeepsTwoBytesPerParameterPlusWhatIsInFlight) {
  ZeroRun r(gpt2_xl());
  const std::uint64_t params = r.trace.parameters;
  auto p = make("zero-offload");
  run(r, a100(), *p);
  const Summary& s = r.summary;
  ASSERT_EQ(s.status, "ok");
  // The fp16 weights, never more (the old copy is gone before the new one comes back), no
  // optimizer state, and gradients only until PCIe has carried them out.
  EXPECT_EQ(most_model_state(r.recorder, 0, Category::weight), 2 * params);
  EXPECT_EQ(most_model_state(r.recorder, 0, Category::optimizer_state), 0u);
  EXPECT_GE(most_model_state(r.recorder, 0), 2 * params);
  EXPECT_LT(most_model_state(r.recorder, 0), 2 * params + params / 4);  // measured: 2.10 B
  // Host traffic per step: every fp16 gradient out, every fp16 weight back.
  EXPECT_EQ(traffic(s, "gpu0.hbm", "host.dram"), 2 * params + 0u);
  EXPECT_EQ(traffic(s, "host.dram", "gpu0.hbm"), 2 * params + 0u);
  // Host DRAM holds the master weights and both moments from the start: 12 B per parameter.
  std::uint64_t dram_at_start = 0;
  for (const MemorySample& m : r.recorder.samples())
    if (m.tier == 1 && m.time_s == 0) dram_at_start = m.allocated_bytes;
  EXPECT_EQ(dram_at_start, 12 * params);
  // The step on the host: 14 FLOPs per parameter (Adam + mixed-precision casts) at 4.6
  // TFLOPS, or its bytes at 204.8 GB/s, whichever is longer; it runs after backward.
  double host_compute = 0;
  for (const Event& e : r.recorder.events())
    if (e.kind == EventKind::compute && e.device == 1) host_compute += e.end_s - e.start_s;
  EXPECT_GE(host_compute, 14.0 * params / 4.6e12);
  EXPECT_GT(s.iteration_time_s, s.compute_time_s + host_compute);
}
