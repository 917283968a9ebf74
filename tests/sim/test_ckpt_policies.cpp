// The static recomputation policies in the engine: what each plans is what the engine runs
// (peak and recomputation as the planner predicted), against counts worked out from the
// papers' formulas. One simulation per test (SimGrid's engine is a process singleton).
#include <gtest/gtest.h>

#include <set>

#include "sim/core/config.h"
#include "sim/exec/replay.h"
#include "sim/core/params.h"
#include "sim/cost/cost_model.h"
#include "sim/run/run.h"
#include "sim/policy/impl/ckpt_common.h"
#include "sim/policy/policy.h"
#include "sim/policy/schedule/chain.h"
#include "sim/policy/schedule/remat_milp.h"
#include "sim/workload/models/models.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

// 1 TFLOPS fp32, 1 us launch, a roomy tier unless told.
PlatformSpec gpu(const std::string& capacity = "16GiB") {
  return load_platform(ConfigNode::parse_text(R"(
name: gpu
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    launch_overhead: 1us
    tiers:
      hbm: {role: compute, capacity: )" + capacity + R"(, bandwidth: 1000GB/s}
)",
                                              "gpu.yaml"));
}

std::unique_ptr<Policy> policy(const std::string& name, const std::string& yaml = "{}") {
  auto node = ConfigNode::parse_text(yaml, "p.yaml");
  return find_policy(name)->create(Params(node, find_policy(name)->params, name));
}

// Runs the policy through run(), as `memsim run` does, and checks the engine saw what the
// planner predicted.
struct Outcome {
  Summary summary;
  ckpt::Lowered predicted;
  Trace trace;
  std::string label;
};
Outcome run_policy(Trace trace, PlatformSpec platform, const Policy& p) {
  RunInputs in;
  in.platform = std::move(platform);
  in.workloads.push_back(std::move(trace));
  in.policy = &p;
  RunResult r = run(in);
  Outcome out;
  out.predicted = ckpt::replay(r.trace, r.plan, op_durations(r.trace, in.platform));
  out.summary = std::move(r.summary);
  out.label = out.summary.policy;
  if (out.summary.status == "ok") {
    EXPECT_EQ(out.summary.tiers[0].usage.peak_allocated_bytes, out.predicted.max_peak());
    EXPECT_NEAR(out.summary.recompute_time_s, out.predicted.recompute_s, 1e-12);
  }
  out.trace = std::move(r.trace);
  return out;
}

const char* kChain = "{model: chain, layers: 16, width: 64, batch: 1024}";
constexpr double kLayerFlops = 2.0 * 1024 * 64 * 64;

}  // namespace

TEST(CkptEngine, SqrtRecomputesNineLayersOfASixteenLayerChain) {
  auto p = policy("checkpoint-sqrt");
  const Trace t = generate(kChain);
  Outcome r = run_policy(t, gpu(), *p);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_EQ(r.summary.recompute_flops, 9 * kLayerFlops);
  // Of the 16 layer outputs (1024 x 64 fp32 = 256 KiB each) 9 are dropped and at most 3 of
  // them are back at once: the peak falls by at least 6 of them.
  EXPECT_LT(r.summary.tiers[0].usage.peak_allocated_bytes, exec::baseline_peak_bytes(t) - 6 * 256 * 1024);
}

TEST(CkptEngine, RevolveRecomputesWhatGriewankCounts) {
  // A plain chain of 16 layers: Griewank's chain of 16 steps, the last layer's first run
  // taped into the last step's reversal, so with s slots t(16, s + 1) - 15 layers run again
  // (18 at two slots; laying the loss as a 17th step, t(17, s + 1) - 16, would be 20).
  auto p = policy("revolve", "{slots: 2}");
  Outcome r = run_policy(generate(kChain), gpu(), *p);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_EQ(schedule::revolve_cost(16, 3) - 15, 18u);
  EXPECT_EQ(r.summary.recompute_flops, 18 * kLayerFlops);
  EXPECT_EQ(r.label, "revolve(slots=2, stages=16)");
}

TEST(CkptEngine, RevolveWithNoSlotsRecomputesQuadratically) {
  auto p = policy("revolve", "{slots: 0}");
  Outcome r = run_policy(generate(kChain), gpu(), *p);
  EXPECT_EQ(r.summary.status, "ok");
  // From the input every time, but the 15th layer's output stays through the 16th's
  // backward: 14 + 13 + ... + 1 = 105 layers.
  EXPECT_EQ(r.summary.recompute_flops, 105 * kLayerFlops);
}

TEST(CkptEngine, RevolveFitsAHalfBudgetWithTheMostSlots) {
  auto p = policy("revolve", "{budget: 0.5}");
  const Trace t = generate("{model: chain, layers: 32, width: 64, batch: 1024}");
  Outcome r = run_policy(t, gpu(), *p);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_LE(r.summary.tiers[0].usage.peak_allocated_bytes, exec::baseline_peak_bytes(t) / 2);
  EXPECT_GT(r.summary.recompute_flops, 0);
  // One slot more would not fit: the plan with it peaks above the budget.
  const std::string label = r.label;
  const auto at = label.find("slots=");
  ASSERT_NE(at, std::string::npos);
  const int slots = std::stoi(label.substr(at + 6));
  auto more = policy("revolve", "{slots: " + std::to_string(slots + 1) + "}");
  const Plan plan = plan_for(*more, t, gpu()).plan;
  EXPECT_GT(ckpt::replay(t, plan, {}).max_peak(), exec::baseline_peak_bytes(t) / 2);
}

TEST(CkptEngine, ABudgetNoScheduleReachesEndsOomWithTheReason) {
  // 5% of the baseline is below the weights, gradients and momentum alone.
  auto p = policy("revolve", "{budget: 0.05}");
  Outcome r = run_policy(generate(kChain), gpu(), *p);
  EXPECT_EQ(r.summary.status, "oom");
  ASSERT_TRUE(r.summary.oom.has_value());
  EXPECT_NE(r.summary.oom->reason.find("revolve: no schedule fits"), std::string::npos) << r.summary.oom->reason;
}

TEST(CkptEngine, BpttOnAnRnnRecomputesWhatTheTableSays) {
  // T = 10 steps: cell_t reads h_{t-1} and makes h_t (1000 B, the hidden state) and g_t (2000 B,
  // what its backward reads); the backward of step t reads g_t and h_{t-1}. The internal
  // state (g_t, h_{t-1}, h_t) is 4 hidden states: alpha = 4.
  Trace t;
  t.name = "rnn";
  const int T = 10;
  const BufferId w = t.add_buffer("w", 100, Category::weight, true);
  std::vector<BufferId> h{t.add_buffer("h0", 1000, Category::input)}, g{kNoOp};
  auto op = [](std::string name, std::string kind, Phase ph, std::vector<BufferId> in,
               std::vector<BufferId> out) {
    Op o;
    o.name = std::move(name);
    o.kind = std::move(kind);
    o.phase = ph;
    o.inputs = std::move(in);
    o.outputs = std::move(out);
    o.flops = 1e9;
    return o;
  };
  for (int s = 1; s <= T; ++s) {
    h.push_back(t.add_buffer("h" + std::to_string(s), 1000, Category::activation));
    g.push_back(t.add_buffer("g" + std::to_string(s), 2000, Category::activation));
    t.add_op(op("cell" + std::to_string(s), "lstm_cell", Phase::forward, {h[s - 1], w}, {h[s], g[s]}));
  }
  BufferId gh = t.add_buffer("gh" + std::to_string(T), 1000, Category::activation_grad);
  t.add_op(op("loss.backward", "mse_loss_backward", Phase::backward, {h[T]}, {gh}));
  for (int s = T; s >= 1; --s) {
    const BufferId prev = t.add_buffer("gh" + std::to_string(s - 1), 1000, Category::activation_grad);
    t.add_op(op("cell" + std::to_string(s) + ".backward", "lstm_cell_backward", Phase::backward,
                {gh, g[s], h[s - 1]}, {prev}));
    gh = prev;
  }
  validate(t, "rnn");
  auto p = policy("bptt-optimal", "{slots: 3}");
  Outcome r = run_policy(t, gpu(), *p);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_EQ(r.label, "bptt-optimal(slots=3, steps=10, alpha=4)");
  EXPECT_EQ(r.summary.recompute_flops, static_cast<double>(schedule::BpttTable(T, 3, 4).cost(3) - T) * 1e9);
}

TEST(CkptEngine, BpttFitsAnLstmIntoHalfItsMemory) {
  auto p = policy("bptt-optimal", "{budget: 0.5}");
  const Trace t = generate("{model: lstm, seq_len: 40, hidden: 64, input_size: 32, batch: 16}");
  Outcome r = run_policy(t, gpu(), *p);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_LE(r.summary.tiers[0].usage.peak_allocated_bytes, exec::baseline_peak_bytes(t) / 2);
  EXPECT_GT(r.summary.recompute_flops, 0);
}

TEST(CkptEngine, SqrtOnAResNetReplaysInPlaceUpdates) {
  // Pre-activation blocks: in-place ReLUs after batch norms and in-place residual adds; the
  // engine remakes those buffers with their updates, as the planner expected.
  auto p = policy("checkpoint-sqrt");
  const Trace t = generate("{model: resnet, depth: 56, variant: cifar, batch: 32}");
  Outcome r = run_policy(t, gpu(), *p);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_GT(r.summary.recompute_time_s, 0);
  EXPECT_LT(r.summary.tiers[0].usage.peak_allocated_bytes, exec::baseline_peak_bytes(t));
}

TEST(CkptEngine, SelectiveRecomputesOnlyTheAttentionCore) {
  auto p = policy("checkpoint-selective");
  const Trace t = generate(
      "{model: gpt, layers: 2, hidden: 64, heads: 4, vocab: 100, max_positions: 128, seq_len: 128, "
      "batch: 4, attention_impl: materialized, dropout: 0.1}");
  Outcome r = run_policy(t, gpu(), *p);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_GT(r.summary.recompute_flops, 0);
  EXPECT_LT(r.summary.tiers[0].usage.peak_allocated_bytes, exec::baseline_peak_bytes(t));
  std::set<std::string> kinds;
  const Plan plan = plan_for(*p, r.trace, gpu()).plan;
  for (const Step& s : plan.steps)
    if (s.kind == StepKind::recompute) kinds.insert(r.trace.ops[s.id].kind);
  EXPECT_EQ(kinds, (std::set<std::string>{"bmm", "softmax", "dropout"}));
}

TEST(CkptEngine, CheckmateRunsItsOptimalScheduleOnTheSkipGraph) {
  // The ten-node graph of the MILP unit test as a trace: f0..f3, a loss, four backward ops
  // and a weight gradient. Each forward op's FLOPs make its cost.
  Trace t;
  t.name = "skip";
  const BufferId x = t.add_buffer("x", 200, Category::input);
  std::vector<BufferId> a;
  for (int i = 0; i < 4; ++i) a.push_back(t.add_buffer("a" + std::to_string(i), 400, Category::activation));
  const BufferId l = t.add_buffer("l", 100, Category::activation);
  std::vector<BufferId> gr;
  for (int i = 0; i < 4; ++i) gr.push_back(t.add_buffer("g" + std::to_string(i), 400, Category::activation_grad));
  const BufferId gw = t.add_buffer("gw", 100, Category::gradient);
  auto op = [&](std::string name, Phase ph, std::vector<BufferId> in, std::vector<BufferId> out, double f) {
    Op o;
    o.name = std::move(name);
    o.kind = "matmul";
    o.phase = ph;
    o.inputs = std::move(in);
    o.outputs = std::move(out);
    o.flops = f;
    t.add_op(o);
  };
  op("f0", Phase::forward, {x}, {a[0]}, 1e9);
  op("f1", Phase::forward, {a[0]}, {a[1]}, 3e9);
  op("f2", Phase::forward, {a[1]}, {a[2]}, 2e9);
  op("f3", Phase::forward, {a[2], a[0]}, {a[3]}, 2e9);
  op("loss", Phase::forward, {a[3]}, {l}, 1e9);
  op("b3", Phase::backward, {l, a[3]}, {gr[3]}, 1e9);
  op("b2", Phase::backward, {gr[3], a[2]}, {gr[2]}, 1e9);
  op("b1", Phase::backward, {gr[2], a[1], a[0]}, {gr[1]}, 1e9);
  op("b0", Phase::backward, {gr[1], a[0]}, {gr[0]}, 1e9);
  op("w", Phase::backward, {gr[0]}, {gw}, 1e9);
  validate(t, "skip");
  // Every value kept needs 200 + 4 x 400 + 100 + 400 = 2300 B at b3; give 1900.
  const PlatformSpec platform = gpu("1900B");
  schedule::RematGraph g;
  const auto d = op_durations(t, platform);
  g.cost.assign(d.begin(), d.end());
  g.mem = {400, 400, 400, 400, 100, 400, 400, 400, 400, 100};
  g.workspace.assign(10, 0);
  g.recomputable = {true, true, true, true, true, false, false, false, false, false};
  g.deps = {{}, {0}, {1}, {2, 0}, {3}, {4, 3}, {5, 2}, {6, 1, 0}, {7, 0}, {8}};
  g.constant = 200;
  const schedule::RematAnswer best = schedule::solve_remat(g, 1900, {});
  ASSERT_TRUE(best.found);
  ASSERT_GT(best.cost, 0);

  // Limits of work, not of time, so that the verdict is the same on a loaded machine.
  auto p = policy("checkmate", "{seconds: none, nodes: 10000}");
  Outcome r = run_policy(t, platform, *p);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_LE(r.summary.tiers[0].usage.peak_allocated_bytes, 1900u);
  EXPECT_NEAR(r.summary.recompute_time_s, best.cost, 1e-12);
  EXPECT_EQ(r.label, "checkmate(10 ops, optimal)");
}

TEST(CkptEngine, CheckmateFitsAResNetWhereSqrtDoes) {
  // A conv's backward makes the activation gradient with the weight gradient that the
  // optimizer reads at the end: counted as one value, the activation gradients of the whole
  // backward stayed until then and the program was infeasible at budgets checkpoint-sqrt
  // meets (0.6 of this ResNet-14: sqrt peaks at 18.3 of 20.8 MiB).
  auto p = policy("checkmate", "{budget: 0.6, seconds: none, nodes: 200, iterations: 2000}");
  const Trace t = generate("{model: resnet, depth: 14, variant: cifar, batch: 32}");
  Outcome r = run_policy(t, gpu(), *p);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_EQ(r.label.find("no schedule"), std::string::npos) << r.label;
  EXPECT_LE(static_cast<double>(r.summary.tiers[0].usage.peak_allocated_bytes),
            0.6 * static_cast<double>(exec::baseline_peak_bytes(t)));
  EXPECT_GT(r.summary.recompute_time_s, 0);
}

TEST(CkptEngine, InplaceRunsTheRewrittenTrace) {
  // ResNet-20 with its ReLUs out of place: the rewrite puts them (and their backward ops) in
  // place again, and the engine's peak is the rewritten trace's baseline.
  auto p = policy("inplace");
  const Trace t = generate("{model: resnet, depth: 20, variant: cifar, batch: 16, inplace: false}");
  Outcome r = run_policy(t, gpu(), *p);
  EXPECT_EQ(r.summary.status, "ok");
  EXPECT_EQ(r.summary.tiers[0].usage.peak_allocated_bytes, exec::baseline_peak_bytes(r.trace));
  EXPECT_LT(exec::baseline_peak_bytes(r.trace), exec::baseline_peak_bytes(t));
  EXPECT_LT(r.trace.buffers.size(), t.buffers.size());
}
