// Dropping and recomputing in the engine, against timelines worked out by hand.
#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/run/run.h"
#include "sim/policy/policy.h"
#include "tests/sim/fixed_plan.h"

using namespace memsim;
using memsim::test::FixedPlan;

namespace {

// 1 TFLOPS, 1 us launch: an op of 1e9 FLOPs takes 1.001 ms.
// `host`: a host_overhead: line for the GPU, or none.
PlatformSpec gpu(const std::string& host = "") {
  return load_platform(ConfigNode::parse_text(R"(
name: gpu
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    launch_overhead: 1us
)" + (host.empty() ? "" : "    host_overhead: " + host + "\n") +
                                                  R"(    tiers:
      hbm: {role: compute, capacity: 1GiB, bandwidth: 1000GB/s}
)",
                                              "gpu.yaml"));
}

Op make_op(const std::string& name, std::vector<BufferId> in, std::vector<BufferId> out,
           std::vector<BufferId> updates = {}) {
  Op op;
  op.name = name;
  op.kind = "matmul";
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  op.updates = std::move(updates);
  op.flops = 1e9;
  return op;
}

// x (100 B, kept) -f-> a -g-> b -h-> c; k reads c and a (as a backward reads what the
// forward saved) and makes d (100 B). a, b, c are 1000 B each.
Trace saved_for_later() {
  Trace t;
  t.name = "saved";
  BufferId x = t.add_buffer("x", 100, Category::input, true);
  BufferId a = t.add_buffer("a", 1000, Category::activation);
  BufferId b = t.add_buffer("b", 1000, Category::activation);
  BufferId c = t.add_buffer("c", 1000, Category::activation);
  BufferId d = t.add_buffer("d", 100, Category::activation);
  t.add_op(make_op("f", {x}, {a}));
  t.add_op(make_op("g", {a}, {b}));
  t.add_op(make_op("h", {b}, {c}));
  t.add_op(make_op("k", {c, a}, {d}));
  validate(t, "saved");
  return t;
}

Plan with_frees(const Trace& t, std::vector<Step> extra_after_g) {
  // Compute steps in order, frees at last use, and `extra` steps right after g.
  Liveness l = compute_liveness(t);
  Plan p;
  for (const Op& op : t.ops) {
    p.steps.push_back({StepKind::compute, op.id, 0});
    if (op.name == "g")
      for (const Step& s : extra_after_g) p.steps.push_back(s);
    for (BufferId b : l.dies_after[op.id]) p.steps.push_back({StepKind::free, b, 0});
  }
  return p;
}

// `plan` with a step re-running op `rerun` just before `reader`'s compute step.
Plan recompute_before(Plan plan, OpId reader, OpId rerun) {
  for (std::size_t i = 0; i < plan.steps.size(); ++i)
    if (plan.steps[i].kind == StepKind::compute && plan.steps[i].id == reader) {
      plan.steps.insert(plan.steps.begin() + static_cast<std::ptrdiff_t>(i), {StepKind::recompute, rerun, 0});
      break;
    }
  return plan;
}

}  // namespace

TEST(Recompute, KeepingEverythingAsTheBaseline) {
  // x + a + b + c = 3100 B at h; four ops of 1.001 ms.
  Trace t = saved_for_later();
  FixedPlan p(with_frees(t, {}));
  Recorder rec;
  Summary s = simulate(gpu(), t, p, rec);
  EXPECT_EQ(s.tiers[0].usage.peak_allocated_bytes, 3100u);
  EXPECT_NEAR(s.iteration_time_s, 4 * 1.001e-3, 1e-15);
  EXPECT_EQ(s.recompute_time_s, 0.0);
}

TEST(Recompute, ADroppedBufferIsRemadeByItsReader) {
  // a dropped after g: h holds x + b + c = 2100 B; k remakes a by re-running f (x is kept):
  // x + c + a = 2100, + d = 2200 B (the peak). One extra f: 5 x 1.001 ms, 1.001 ms of it
  // recompute, 1e9 FLOPs recomputed.
  Trace t = saved_for_later();
  FixedPlan p(with_frees(t, {{StepKind::drop, 1, 0}}));
  Recorder rec;
  Summary s = simulate(gpu(), t, p, rec);
  EXPECT_EQ(s.status, "ok");
  EXPECT_EQ(s.tiers[0].usage.peak_allocated_bytes, 2200u);
  EXPECT_NEAR(s.iteration_time_s, 5 * 1.001e-3, 1e-15);
  EXPECT_NEAR(s.recompute_time_s, 1.001e-3, 1e-15);
  EXPECT_NEAR(s.compute_time_s, 4 * 1.001e-3, 1e-15);
  EXPECT_EQ(s.recompute_flops, 1e9);
  ASSERT_EQ(rec.events().size(), 5u);
  EXPECT_EQ(rec.events()[3].kind, EventKind::recompute);
  EXPECT_EQ(t.ops[rec.events()[3].op].name, "f");
}

TEST(Recompute, AChainOfDroppedBuffersIsRemadeInOrder) {
  // a and b both dropped after g; h reads b: remaking b needs a, dropped too, so f runs,
  // then g, then h; k reads b and a again, which h's remaking left resident. (A freed
  // buffer is dead: only a dropped one that is still live can be remade.)
  Trace t;
  t.name = "chain";
  BufferId x = t.add_buffer("x", 100, Category::input, true);
  BufferId a = t.add_buffer("a", 1000, Category::activation);
  BufferId b = t.add_buffer("b", 1000, Category::activation);
  BufferId c = t.add_buffer("c", 1000, Category::activation);
  BufferId d = t.add_buffer("d", 100, Category::activation);
  t.add_op(make_op("f", {x}, {a}));
  t.add_op(make_op("g", {a}, {b}));
  t.add_op(make_op("h", {b}, {c}));
  t.add_op(make_op("k", {c, b, a}, {d}));  // a stays live (not freed) until k
  FixedPlan p(with_frees(t, {{StepKind::drop, a, 0}, {StepKind::drop, b, 0}}));
  Recorder rec;
  Summary s = simulate(gpu(), t, p, rec);
  EXPECT_EQ(s.status, "ok");
  // h needs b, dropped after g: remade by g, which needs a, dropped: f, then g, then h.
  EXPECT_NEAR(s.recompute_time_s, 2 * 1.001e-3, 1e-15);
  std::vector<std::string> order;
  for (const Event& e : rec.events()) order.push_back(t.ops[e.op].name);
  EXPECT_EQ(order, (std::vector<std::string>{"f", "g", "f", "g", "h", "k"}));
}

TEST(Recompute, InPlaceUpdatesAreReplayed) {
  // f makes a, u updates it in place (an in-place ReLU), g reads it. Dropping a after u and
  // reading it in k re-runs f and then u: 2 recomputes.
  Trace t;
  t.name = "inplace";
  BufferId x = t.add_buffer("x", 100, Category::input, true);
  BufferId a = t.add_buffer("a", 1000, Category::activation);
  BufferId b = t.add_buffer("b", 1000, Category::activation);
  BufferId d = t.add_buffer("d", 100, Category::activation);
  t.add_op(make_op("f", {x}, {a}));
  t.add_op(make_op("u", {}, {}, {a}));
  t.add_op(make_op("g", {a}, {b}));
  t.add_op(make_op("k", {b, a}, {d}));
  Plan plan;
  plan.steps = {{StepKind::compute, 0, 0}, {StepKind::compute, 1, 0}, {StepKind::compute, 2, 0},
                {StepKind::drop, a, 0},    {StepKind::compute, 3, 0}};
  FixedPlan p(plan);
  Recorder rec;
  Summary s = simulate(gpu(), t, p, rec);
  std::vector<std::string> order;
  for (const Event& e : rec.events()) order.push_back(t.ops[e.op].name);
  EXPECT_EQ(order, (std::vector<std::string>{"f", "u", "g", "f", "u", "k"}));
  EXPECT_NEAR(s.recompute_time_s, 2 * 1.001e-3, 1e-15);
}

TEST(Recompute, AStepAheadOfUseRecomputesEarly) {
  // A plan may recompute f itself before k needs a: same cost, no wait inside k.
  Trace t = saved_for_later();
  // "recompute f" just before k's compute step.
  FixedPlan p(recompute_before(with_frees(t, {{StepKind::drop, 1, 0}}), 3, 0));
  Recorder rec;
  Summary s = simulate(gpu(), t, p, rec);
  EXPECT_NEAR(s.recompute_time_s, 1.001e-3, 1e-15);
  EXPECT_EQ(s.tiers[0].usage.peak_allocated_bytes, 2200u);
}

TEST(Recompute, TheHostIssuesARerunAsItIssuesEveryOp) {
  // 5 ms of host time per op, 1.001 ms of GPU: f, g and h are issued at 5, 10 and 15 ms. k
  // reads a, dropped after g: the host issues f again after h, at 20 ms, and k at 25 ms, so
  // the step ends at 26.001 ms (without the re-run's host time, f would run at once after h
  // and k at 20 ms: 21.001 ms).
  Trace t = saved_for_later();
  FixedPlan p(with_frees(t, {{StepKind::drop, 1, 0}}));
  Recorder rec;
  Summary s = simulate(gpu("{per_op: {default: 5ms}}"), t, p, rec);
  EXPECT_NEAR(s.iteration_time_s, 26.001e-3, 1e-12);
  ASSERT_EQ(rec.events().size(), 5u);
  EXPECT_EQ(rec.events()[3].kind, EventKind::recompute);
  EXPECT_NEAR(rec.events()[3].start_s, 20e-3, 1e-12);
  EXPECT_NEAR(rec.events()[4].start_s, 25e-3, 1e-12);
}

TEST(Recompute, TheHostIssuesAPlannedRerunInItsPlace) {
  // As above, with the re-run a plan step of its own just before k: the same 26.001 ms.
  Trace t = saved_for_later();
  FixedPlan p(recompute_before(with_frees(t, {{StepKind::drop, 1, 0}}), 3, 0));
  Recorder rec;
  Summary s = simulate(gpu("{per_op: {default: 5ms}}"), t, p, rec);
  EXPECT_NEAR(s.iteration_time_s, 26.001e-3, 1e-12);
  EXPECT_NEAR(s.recompute_time_s, 1.001e-3, 1e-15);
}

TEST(Recompute, DroppingABufferWithNoProducerIsAPolicyError) {
  Trace t = saved_for_later();
  FixedPlan p(Plan{{{StepKind::drop, 0, 0}}});
  Recorder rec;
  EXPECT_THROW(simulate(gpu(), t, p, rec), PolicyError);
}

TEST(Recompute, ARuntimeActionThatIsNoSwapOrDropIsAPolicyError) {
  // Runtime actions are plan steps, but only swaps and drops can be asked for while the step
  // runs: a hook asking to re-run an op is told so.
  class Hooks final : public RuntimeHooks {
   public:
    bool has_op_hooks() const override { return true; }
    void after_op(const RuntimeView&, OpId op, std::vector<Action>& actions) override {
      actions.push_back({StepKind::recompute, op, 0});
    }
  };
  class Recomputing final : public Policy {
   public:
    PlanResult plan(const PlanningContext& ctx) const override {
      return {plan_free_at_last_use(ctx.trace, ctx.liveness), "recomputing", {}, {},
              std::make_shared<Hooks>()};
    }
  };
  Trace t = saved_for_later();
  Recorder rec;
  EXPECT_THROW(simulate(gpu(), t, Recomputing(), rec), PolicyError);
}
