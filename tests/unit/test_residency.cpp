// The residency machine without SimGrid: exec::replay() on hand-made plans against answers
// worked out by hand, and a policy's runtime hooks driven through a fake RuntimeView.
#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/exec/replay.h"
#include "sim/memory/memory_state.h"
#include "sim/platform/platform.h"
#include "sim/policy/policy.h"

using namespace memsim;

namespace {

Op op(const std::string& name, Phase phase, std::vector<BufferId> in, std::vector<BufferId> out) {
  Op o;
  o.name = name;
  o.kind = "matmul";
  o.phase = phase;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  return o;
}

// x (100, input) -> f1 -> a (1000) -> f2 -> b (10) -> g2 reads b, a -> ga (1000) -> g1 reads
// ga, x -> gx (100). Under none: at g2, x + a + b + ga = 2110 is the peak.
struct Chain {
  Trace t;
  BufferId x, a, b, ga, gx;
  Chain() {
    t.name = "chain";
    x = t.add_buffer("x", 100, Category::input);
    a = t.add_buffer("a", 1000, Category::activation);
    b = t.add_buffer("b", 10, Category::activation);
    ga = t.add_buffer("ga", 1000, Category::activation_grad);
    gx = t.add_buffer("gx", 100, Category::activation_grad);
    t.add_op(op("f1", Phase::forward, {x}, {a}));
    t.add_op(op("f2", Phase::forward, {a}, {b}));
    t.add_op(op("g2", Phase::backward, {b, a}, {ga}));
    t.add_op(op("g1", Phase::backward, {ga, x}, {gx}));
    validate(t, "chain");
  }
  Plan none() const { return plan_free_at_last_use(t, compute_liveness(t)); }
};

Plan with_step_after(Plan plan, StepKind after_kind, std::uint32_t after_id, Step step) {
  for (std::size_t i = 0; i < plan.steps.size(); ++i)
    if (plan.steps[i].kind == after_kind && plan.steps[i].id == after_id) {
      plan.steps.insert(plan.steps.begin() + static_cast<std::ptrdiff_t>(i) + 1, step);
      return plan;
    }
  throw std::logic_error("no such step");
}

}  // namespace

TEST(Residency, NoneFreesEachBufferAfterItsLastUse) {
  Chain c;
  const exec::Replayed r = exec::replay(c.t, c.none());
  ASSERT_EQ(r.peak_bytes.size(), 1u);
  EXPECT_EQ(r.peak_bytes[0], 2110u);
  EXPECT_EQ(r.total_peak_bytes, 2110u);
  EXPECT_EQ(r.recompute_ops, 0u);
  EXPECT_EQ(exec::baseline_peak_bytes(c.t), 2110u);
  // Nothing freed: 100 + 1000 + 10 + 1000 + 100.
  EXPECT_EQ(exec::keep_all_peak_bytes(c.t), 2210u);
}

TEST(Residency, ADroppedBufferIsRemadeByItsProducerAtItsReader) {
  // a dropped after f2: the peak moves to f1 (x + a) or g2 after the remake (x + b + a + ga),
  // and f1 runs again once, before g2.
  Chain c;
  const Plan plan = with_step_after(c.none(), StepKind::compute, 1, {StepKind::drop, c.a, 0});
  const std::vector<double> durations{1e-3, 2e-3, 3e-3, 4e-3};
  const exec::Replayed r = exec::replay(c.t, plan, durations);
  EXPECT_EQ(r.recompute_ops, 1u);
  EXPECT_DOUBLE_EQ(r.recompute_s, 1e-3);
  EXPECT_EQ(r.peak_bytes[0], 2110u);
  // The observer sees f1 twice: its run, then its re-run for g2 with b alive beside it.
  std::vector<std::pair<std::string, std::uint64_t>> seen;
  exec::replay(c.t, plan, durations, [&](const Op& o, const std::vector<std::uint64_t>& live) {
    seen.emplace_back(o.name, live[0]);
  });
  const std::vector<std::pair<std::string, std::uint64_t>> want{
      {"f1", 1100}, {"f2", 1110}, {"f1", 1110}, {"g2", 2110}, {"g1", 1200}};
  EXPECT_EQ(seen, want);
}

TEST(Residency, RemakesRecurseThroughDroppedInputs) {
  // Both a and b dropped: g2 needs b, whose producer f2 needs a: f1 then f2 run again.
  Chain c;
  Plan plan = with_step_after(c.none(), StepKind::compute, 1, {StepKind::drop, c.a, 0});
  plan = with_step_after(plan, StepKind::drop, c.a, {StepKind::drop, c.b, 0});
  std::vector<std::string> order;
  const exec::Replayed r = exec::replay(c.t, plan, {}, [&](const Op& o, const std::vector<std::uint64_t>&) {
    order.push_back(o.name);
  });
  EXPECT_EQ(r.recompute_ops, 2u);
  EXPECT_EQ(order, (std::vector<std::string>{"f1", "f2", "f1", "f2", "g2", "g1"}));
}

TEST(Residency, ReadingAFreedBufferIsAPolicyError) {
  Chain c;
  const Plan plan = with_step_after(c.none(), StepKind::compute, 1, {StepKind::free, c.a, 0});
  EXPECT_THROW(exec::replay(c.t, plan), PolicyError);
}

TEST(Residency, DroppingABufferNoOpMakesIsAPolicyError) {
  Chain c;
  const Plan plan = with_step_after(c.none(), StepKind::compute, 0, {StepKind::drop, c.x, 0});
  EXPECT_THROW(exec::replay(c.t, plan), PolicyError);
}

TEST(Residency, SwapsLandAtTheirStepInZeroTime) {
  // a swapped out after f2, with no swap-in: g2 brings it back on demand, so at g2 the
  // peak is the same; between f2 and g2 nothing holds it.
  Chain c;
  Plan plan = with_step_after(c.none(), StepKind::compute, 1, {StepKind::swap_out, c.a, 1});
  std::vector<std::uint64_t> at;
  exec::replay(c.t, plan, {}, [&](const Op&, const std::vector<std::uint64_t>& live) {
    at.push_back(live[0]);
  });
  EXPECT_EQ(at, (std::vector<std::uint64_t>{1100, 1110, 2110, 1200}));
  // Placed elsewhere at the start, x counts nothing until f1 reads it (on demand).
  Plan placed = c.none();
  placed.placements.push_back({c.x, 1});
  at.clear();
  exec::replay(c.t, placed, {}, [&](const Op&, const std::vector<std::uint64_t>& live) {
    at.push_back(live[0]);
  });
  EXPECT_EQ(at.front(), 1100u);
}

namespace {

// What a runtime policy sees, without the engine: a MemoryState filled by hand.
class FakeView final : public RuntimeView {
 public:
  FakeView(const Trace& t, const PlatformSpec& p)
      : trace_(t), platform_(p), liveness_(compute_liveness(t)), memory_(p, t) {}
  double now_s() const override { return now_; }
  const Trace& trace() const override { return trace_; }
  const Liveness& liveness() const override { return liveness_; }
  const PlatformSpec& platform() const override { return platform_; }
  const MemoryState& memory() const override { return memory_; }
  OpId current_op() const override { return op_; }
  bool in_flight(BufferId) const override { return false; }
  bool dropped(BufferId) const override { return false; }
  bool in_use(BufferId) const override { return false; }
  MemoryState& mutable_memory() { return memory_; }
  double now_ = 0;
  OpId op_ = 0;

 private:
  const Trace& trace_;
  const PlatformSpec& platform_;
  Liveness liveness_;
  MemoryState memory_;
};

}  // namespace

TEST(Residency, SwapLrusHooksEvictTheLeastRecentlyUsedWithoutTheEngine) {
  // 2100 B of HBM holding x, a and b (1110 B) when g2 asks for ga (1000 B): the hook answers
  // a swap-out of what was used longest ago and is not an operand of g2 — x.
  Chain c;
  const PlatformSpec p = load_platform(ConfigNode::parse_text(R"(
name: box
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    tiers:
      hbm: {role: compute, capacity: 2100B, bandwidth: 1TB/s}
  host:
    kind: cpu
    tiers:
      dram: {role: offload, capacity: 1GiB, bandwidth: 100GB/s}
links:
  pcie: {endpoints: [gpu0.hbm, host.dram], bandwidth: 10GB/s}
)", "box.yaml"));
  const PolicyInfo* info = find_policy("swap-lru");
  const auto policy = info->create(Params(ConfigNode::parse_text("{}", "p.yaml"), info->params, "swap-lru"));
  const Liveness l = compute_liveness(c.t);
  const std::vector<double> durations(c.t.ops.size(), 1e-3);
  const PlanningContext ctx{c.t, l, p, durations, {2100, 1ull << 30}};
  const PlanResult planned = policy->plan(ctx);
  ASSERT_TRUE(planned.hooks);
  FakeView view(c.t, p);
  for (BufferId b : {c.x, c.a, c.b}) ASSERT_TRUE(view.mutable_memory().allocate(b, 0, 0));
  std::vector<Action> actions;
  planned.hooks->before_op(view, 0, actions);  // f1 uses x and a
  planned.hooks->before_op(view, 1, actions);  // f2 uses a and b
  actions.clear();
  // g2 needs 1000 B more; b and a are its operands: only x can go.
  planned.hooks->on_alloc_failure(view, AllocationFailure{0, 1000, 2}, actions);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, StepKind::swap_out);
  EXPECT_EQ(actions[0].id, c.x);
}
