// Pipeline schedules on the engine, against what they keep and how long they wait, worked
// out by hand. The step is eight equal layers with no weights: layer i's forward takes F
// FLOPs, reads x_i and makes x_(i+1) (small, sent to the next stage) and s_i (saved for its
// backward, S bytes); its backward takes 2F, reads g_(i+1) and s_i and makes g_i. On p = 4
// stages (two layers each) with m = 8 micro-batches, every stage's forward of a micro-batch
// takes t_f = 2F / R and its backward 2 t_f, and the links are fast enough to ignore.
//   1F1B: stage s runs p - s - 1 forwards before its first backward, so at its peak stage 0
//         holds 4 micro-batches' saved activations, stage 3 one.
//   GPipe: every stage runs all m forwards first and holds all 8.
//   Both flush after (m + p - 1)(t_f + t_b), each stage computing m (t_f + t_b) of it: a
//   bubble of (p - 1) / (m + p - 1) = 3/11 on every stage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "sim/core/config.h"
#include "sim/policy/policy.h"
#include "sim/run/run.h"
#include "sim/workload/parallel.h"
#include "sim/workload/pipeline.h"

using namespace memsim;

namespace {

constexpr int kLayers = 8;
constexpr std::uint32_t kStages = 4, kMicroBatches = 8;
constexpr double kF = 1e9;                      // FLOPs of a layer's forward
constexpr std::uint64_t kSaved = 1u << 20;      // S
constexpr std::uint64_t kSent = 1u << 10;       // x_i

// Four GPUs on one switch; links of 1000 GB/s and 1 ns, so a 1 KiB message takes about a
// nanosecond against forward passes of 0.2 ms.
PlatformSpec star(const std::string& host = "") {
  std::string y = "name: star\ndevices:\n";
  for (int i = 0; i < 4; ++i)
    y += "  gpu" + std::to_string(i) + ":\n    kind: gpu\n    compute: {fp32: 10TFLOPS}\n" +
         (host.empty() ? "" : "    host_overhead: " + host + "\n") +
         "    tiers:\n      hbm: {role: compute, capacity: 80GiB, bandwidth: 100000GB/s}\n";
  y += "switches: [sw]\nlinks:\n";
  for (int i = 0; i < 4; ++i)
    y += "  l" + std::to_string(i) + ": {endpoints: [gpu" + std::to_string(i) +
         ".hbm, sw], bandwidth: 1000GB/s, latency: 1ns}\n";
  return load_platform(ConfigNode::parse_text(y, "platform.yaml"));
}

Trace layers() {
  Trace t;
  t.name = "layers";
  std::vector<BufferId> x{t.add_buffer("x0", kSent, Category::input)}, saved;
  for (int i = 0; i < kLayers; ++i) {
    const std::string name = "layers." + std::to_string(i);
    x.push_back(t.add_buffer(name + ".x", kSent, Category::activation));
    saved.push_back(t.add_buffer(name + ".saved", kSaved, Category::activation));
    Op op;
    op.name = name;
    op.kind = "matmul";
    op.inputs = {x[i]};
    op.outputs = {x[i + 1], saved[i]};
    op.flops = kF;
    t.add_op(std::move(op));
  }
  BufferId g = x.back();  // the last layer's output stands for the loss's gradient
  for (int i = kLayers - 1; i >= 0; --i) {
    const std::string name = "layers." + std::to_string(i);
    const BufferId gi = t.add_buffer(name + ".grad_input", kSent, Category::activation_grad);
    Op op;
    op.name = name + ".backward";
    op.kind = "matmul_backward";
    op.phase = Phase::backward;
    op.inputs = {g, saved[i]};
    op.outputs = {gi};
    op.flops = 2 * kF;
    t.add_op(std::move(op));
    g = gi;
  }
  return t;
}

// The step on `star(host)` under `schedule` over `chunks` chunks per stage.
RunResult run_schedule(PipelineSchedule schedule, std::uint32_t chunks = 1, const std::string& host = "") {
  ParallelSettings s;
  s.pp = kStages;
  s.micro_batches = kMicroBatches;
  s.schedule = schedule;
  s.virtual_stages = chunks;
  RunInputs in;
  in.platform = star(host);
  in.workloads = {parallelize(layers(), s)};
  auto policy = find_policy("none")->create(Params(ConfigNode::parse_text("{}", "p.yaml"), find_policy("none")->params, "none"));
  in.policy = policy.get();
  return run(in);
}

// Saved activations a stage held at its peak, in micro-batches (S twice per micro-batch:
// two layers), rounded: the small x_i and gradients in flight are under one S.
double micro_batches_at_peak(const Summary& s, std::size_t tier) {
  const auto& usage = s.tiers.at(tier).usage;
  return static_cast<double>(usage.peak_by_category[static_cast<std::size_t>(Category::activation)]) / (2.0 * kSaved);
}

}  // namespace

TEST(Pipeline, OneFOneBKeepsPMinusSMicroBatchesAndBubblesPMinusOneOverMPlusPMinusOne) {
  const RunResult r = run_schedule(PipelineSchedule::one_f_one_b);
  const Summary& s = r.summary;
  ASSERT_EQ(s.status, "ok");
  ASSERT_EQ(s.pipeline.size(), kStages);
  for (std::uint32_t st = 0; st < kStages; ++st)
    EXPECT_NEAR(micro_batches_at_peak(s, st), kStages - st, 0.01) << "stage " << st;
  const double tf = 2 * kF / 10e12, tb = 2 * tf;
  EXPECT_NEAR(s.passes_end_s, (kMicroBatches + kStages - 1) * (tf + tb), 1e-3 * s.passes_end_s);
  for (const PipelineStageSummary& st : s.pipeline) {
    EXPECT_NEAR(st.compute_s, kMicroBatches * (tf + tb), 1e-9) << "stage " << st.stage;
    EXPECT_NEAR(st.bubble_fraction, 3.0 / 11.0, 1e-3) << "stage " << st.stage;
  }
  // Every stage sent its micro-batches' outputs on and their gradients back.
  std::size_t sends = 0, recvs = 0;
  for (const Op& op : r.trace.ops) {
    sends += op.kind == "send";
    recvs += op.kind == "recv";
  }
  EXPECT_EQ(sends, 2u * (kStages - 1) * kMicroBatches);
  EXPECT_EQ(recvs, sends);
}

TEST(Pipeline, GPipeKeepsEveryMicroBatchOnEveryStage) {
  const RunResult r = run_schedule(PipelineSchedule::gpipe);
  const Summary& s = r.summary;
  ASSERT_EQ(s.status, "ok");
  for (std::uint32_t st = 0; st < kStages; ++st)
    EXPECT_NEAR(micro_batches_at_peak(s, st), kMicroBatches, 0.01) << "stage " << st;
  const double tf = 2 * kF / 10e12, tb = 2 * tf;
  EXPECT_NEAR(s.passes_end_s, (kMicroBatches + kStages - 1) * (tf + tb), 1e-3 * s.passes_end_s);
  for (const PipelineStageSummary& st : s.pipeline) EXPECT_NEAR(st.bubble_fraction, 3.0 / 11.0, 1e-3);
}

TEST(Pipeline, InterleavingShrinksTheBubbleAndKeepsMore) {
  // Two chunks per stage (layers 2s and 2s + 4 on stage s): Megatron's interleaved 1F1B
  // divides the bubble by the chunks, (p - 1) / (v m + p - 1) here by the same count of
  // chunk-sized passes, and stage 0 warms up with 2 (p - 1) + (v - 1) p = 10 chunk forwards.
  ParallelSettings ps;
  ps.pp = kStages;
  ps.micro_batches = kMicroBatches;
  ps.schedule = PipelineSchedule::interleaved;
  ps.virtual_stages = 2;
  RunInputs in;
  in.platform = star();
  in.workloads = {parallelize(layers(), ps)};
  auto policy = find_policy("none")->create(Params(ConfigNode::parse_text("{}", "p.yaml"), find_policy("none")->params, "none"));
  in.policy = policy.get();
  const Summary s = run(in).summary;
  ASSERT_EQ(s.status, "ok");
  for (const PipelineStageSummary& st : s.pipeline) EXPECT_NEAR(st.bubble_fraction, 3.0 / 19.0, 1e-3) << st.stage;
  // Stage 0 at its peak: the 10 warm-up chunk forwards (each one layer, S) and the first of
  // the steady state's, before any backward: 11 S, i.e. 5.5 two-layer micro-batches.
  EXPECT_NEAR(micro_batches_at_peak(s, 0), 5.5, 0.01);
}

namespace {

// The stage's exchanges: each run of sends and receives that follow each other in the
// device's program order (op-id order), as op ids.
std::vector<std::vector<OpId>> exchanges(const Trace& t, std::uint32_t device) {
  std::vector<std::vector<OpId>> calls;
  bool open = false;
  for (const Op& op : t.ops) {
    if (op.device != device) continue;
    const bool p2p = op.kind == "send" || op.kind == "recv";
    if (p2p && !open) calls.emplace_back();
    if (p2p) calls.back().push_back(op.id);
    open = p2p;
  }
  return calls;
}

// Megatron-LM's host: the sends and receives between two computations go out in one
// batch_isend_irecv, then torch.cuda.synchronize(). No op after an exchange may start before
// every send and receive of it has ended (one blocking call per send or receive would
// deadlock neighbouring stages). Returns the run, checked so.
RunResult run_synchronized(PipelineSchedule schedule, std::uint32_t chunks) {
  RunResult r = run_schedule(schedule, chunks, "{per_op: 20us, sync_after: [send, recv]}");
  EXPECT_EQ(r.summary.status, "ok");
  std::map<OpId, std::pair<double, double>> span;  // each op's first run
  for (const Event& e : r.recorder.events())
    if ((e.kind == EventKind::compute || e.kind == EventKind::comm) && e.op != kNoOp) span.try_emplace(e.op, e.start_s, e.end_s);
  std::size_t checked = 0;
  for (std::uint32_t stage = 0; stage < kStages; ++stage) {
    double gate = 0;  // when the last exchange before the op ended
    std::vector<OpId> call;
    for (const Op& op : r.trace.ops) {
      if (op.device != stage || !span.count(op.id)) continue;
      const bool p2p = op.kind == "send" || op.kind == "recv";
      if (!p2p && !call.empty()) {
        for (OpId o : call) gate = std::max(gate, span.at(o).second);
        call.clear();
      }
      EXPECT_GE(span.at(op.id).first, gate - 1e-12) << op.name;
      ++checked;
      if (p2p) call.push_back(op.id);
    }
  }
  EXPECT_EQ(checked, r.trace.ops.size());
  return r;
}

}  // namespace

TEST(Pipeline, OneFOneBOnAHostThatSynchronizesIssuesNothingBeforeAnExchangeEnds) {
  const RunResult r = run_synchronized(PipelineSchedule::one_f_one_b, 1);
  // The host's 20 us per op and the waits make the step longer than the bare schedule's.
  const double tf = 2 * kF / 10e12, tb = 2 * tf;
  EXPECT_GT(r.summary.passes_end_s, (kMicroBatches + kStages - 1) * (tf + tb));
}

TEST(Pipeline, InterleavedExchangesOnceAfterEachForwardAndBackwardPairAsMegatronDoes) {
  constexpr std::uint32_t kChunks = 2;
  const RunResult r = run_synchronized(PipelineSchedule::interleaved, kChunks);
  // Megatron's interleaved order: after the warm-up's W_s chunk forwards (one exchange each),
  // a forward and a backward chunk compute back to back and then exchange once, then the
  // cool-down's backwards one exchange each: v m + W_s steps. Stage 0 receives nothing before
  // its first step and exchanges nothing after its last; the others receive before the first
  // and send after the last.
  for (std::uint32_t stage = 0; stage < kStages; ++stage) {
    const std::uint32_t warmup = 2 * (kStages - stage - 1) + (kChunks - 1) * kStages;
    const std::uint32_t steps = kChunks * kMicroBatches + warmup;
    EXPECT_EQ(exchanges(r.trace, stage).size(), stage == 0 ? steps - 1 : steps + 1) << "stage " << stage;
  }
}
