// The planning core of the static recomputation policies (policy/impl/ckpt_common.h) and
// the in-place rewrite, on traces worked out by hand and on the model generators.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/exec/replay.h"
#include "sim/core/params.h"
#include "sim/policy/impl/ckpt_common.h"
#include "sim/policy/policy.h"
#include "sim/workload/models/models.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

std::unique_ptr<Policy> policy(const std::string& name, const std::string& yaml = "{}") {
  auto node = ConfigNode::parse_text(yaml, "p.yaml");
  return find_policy(name)->create(Params(node, find_policy(name)->params, name));
}

// A static plan with no platform: no durations, no caps (enough for the plans tested here).
PlanResult plan_of(const Policy& p, const Trace& t) {
  static const PlatformSpec none;
  static const std::vector<double> no_durations;
  const Liveness l = compute_liveness(t);
  return p.plan(PlanningContext{t, l, none, no_durations, {}});
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

Op op(const std::string& name, const std::string& kind, Phase phase, std::vector<BufferId> in,
      std::vector<BufferId> out) {
  Op o;
  o.name = name;
  o.kind = kind;
  o.phase = phase;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  o.flops = 1e6;
  return o;
}

}  // namespace

TEST(CkptPlan, WithoutRecomputationTheLoweringIsNone) {
  // Same peak as the ideal allocator under `none`, every op once in issue order.
  for (const std::string yaml :
       {"{model: chain, layers: 16, width: 64, batch: 8}", "{model: mlp, batch: 4}",
        "{model: resnet, depth: 18, batch: 2, image_size: 64}",
        "{model: lstm, seq_len: 6, hidden: 32, input_size: 16, batch: 4}",
        "{model: resnet, depth: 20, variant: cifar, batch: 2, inplace: false}"}) {
    SCOPED_TRACE(yaml);
    const Trace t = generate(yaml);
    const ckpt::Lowered l = ckpt::lower(t, ckpt::Schedule(t), {});
    EXPECT_EQ(l.max_peak(), exec::baseline_peak_bytes(t));
    EXPECT_EQ(l.recompute_ops, 0u);
    OpId next = 0;
    for (const Step& s : l.plan.steps) {
      EXPECT_NE(s.kind, StepKind::drop);
      if (s.kind == StepKind::compute) EXPECT_EQ(s.id, next++);
    }
    EXPECT_EQ(next, t.ops.size());
    // The mirror run over the plan agrees with the planner's own account.
    EXPECT_EQ(ckpt::replay(t, l.plan, {}).max_peak(), l.max_peak());
  }
}

TEST(CkptPlan, StagesOfAPlainChain) {
  const Trace t = generate("{model: chain, layers: 16, width: 64, batch: 8}");
  const ckpt::Stages st = ckpt::find_stages(t, 0, "revolve");
  ASSERT_EQ(st.count(), 16u);  // the loss joins the tail: nothing of it is read back
  EXPECT_TRUE(st.reads_state_only);
  for (std::size_t s = 1; s <= 16; ++s) {
    EXPECT_EQ(st.ops(s), std::vector<OpId>{op_named(t, "layers." + std::to_string(s - 1)).id});
    EXPECT_EQ(st.state_bytes[s], 8u * 64 * 4);
  }
  // G_16 is the loss's backward (it reads the last layer's output); G_s for s < 16 is the
  // weight gradient of layer s (0-based), which reads layer s-1's output.
  EXPECT_EQ(st.group_first[16], op_named(t, "mse_loss.backward").id);
  EXPECT_EQ(st.group_first[3], op_named(t, "layers.3.backward_weight").id);
}

TEST(CkptPlan, StagesOfAnLstmAreItsTimeSteps) {
  const Trace t = generate("{model: lstm, seq_len: 12, hidden: 32, input_size: 16, batch: 4}");
  const ckpt::Stages st = ckpt::find_stages(t, 0, "bptt-optimal");
  // The backward of a step reads its gates: not a plain chain.
  EXPECT_FALSE(st.reads_state_only);
  // One stage per step, after the initial states' fills.
  EXPECT_GE(st.count(), 12u);
  EXPECT_LE(st.count(), 14u);
  // A step's state is h and c; its backward reads the gates (4 h), c_{t-1}, c_t and h_t.
  const std::uint64_t h = 4 * 32 * 4;
  EXPECT_EQ(st.state_bytes[st.count() / 2], 2 * h);
  EXPECT_EQ(st.internal_bytes[st.count() / 2], 7 * h);
}

TEST(CkptPlan, ResidualBlocksAreStages) {
  const Trace t = generate("{model: resnet, depth: 20, variant: cifar, batch: 2}");
  const ckpt::Stages st = ckpt::find_stages(t, 0, "revolve");
  // Stem, nine basic blocks: cuts only where a block's output alone crosses.
  EXPECT_GE(st.count(), 9u);
  EXPECT_FALSE(st.reads_state_only);
}

TEST(CkptPlan, ProjectionShortcutsMergeIntoTheirBlock) {
  // ResNet-50's first block of each layer has a downsample branch whose backward runs before
  // the main branch's: cutting inside such a block breaks the backward's order, so those
  // stages merge; the greedy cuts still split some identity blocks in two.
  const Trace t = generate("{model: resnet, depth: 50, batch: 2, image_size: 64}");
  const ckpt::Stages st = ckpt::find_stages(t, 0, "revolve");
  EXPECT_GE(st.count(), 10u);
  EXPECT_LE(st.count(), 40u);
}

TEST(CkptPlan, ABackwardReadingFarBackIsNotAChain) {
  // f0 -> a0 -> f1 -> a1 -> f2 -> a2; a backward op reads a2 and a0 (two stages back).
  Trace t;
  t.name = "skip";
  const BufferId x = t.add_buffer("x", 100, Category::input);
  const BufferId a0 = t.add_buffer("a0", 100, Category::activation);
  const BufferId a1 = t.add_buffer("a1", 100, Category::activation);
  const BufferId a2 = t.add_buffer("a2", 100, Category::activation);
  const BufferId g = t.add_buffer("g", 100, Category::activation_grad);
  const BufferId g2 = t.add_buffer("g2", 100, Category::activation_grad);
  t.add_op(op("f0", "matmul", Phase::forward, {x}, {a0}));
  t.add_op(op("f1", "matmul", Phase::forward, {a0}, {a1}));
  t.add_op(op("f2", "matmul", Phase::forward, {a1}, {a2}));
  t.add_op(op("loss.backward", "mse_loss_backward", Phase::backward, {a2}, {g}));
  t.add_op(op("f2.backward", "matmul_backward", Phase::backward, {g, a2, a0}, {g2}));
  validate(t, "skip");
  EXPECT_EQ(message_of([&] { ckpt::find_stages(t, 0, "revolve"); }),
            "skip: revolve needs a chain-shaped trace: backward op 'f2.backward' reads 'a0' (made "
            "in forward stage 1 by 'f0') together with what stage 3 made; a chain's backward reads "
            "only its own stage and the state before it; one stage is left once the stages it "
            "spans are merged");
  // Chen's segments need no chain.
  EXPECT_NO_THROW(plan_of(*policy("checkpoint-sqrt"), t));
}

TEST(CkptPlan, SqrtOnASixteenLayerChainKeepsTheSegmentBoundaries) {
  // 17 forward ops (16 layers and the loss) in 4 segments of 4 (the loss in the last):
  // layers 3, 7 and 11 end a segment and are kept; the last segment keeps everything;
  // the other 9 outputs are dropped after the forward and remade once each.
  const Trace t = generate("{model: chain, layers: 16, width: 64, batch: 1024}");
  auto p = policy("checkpoint-sqrt");
  const PlanResult planned = plan_of(*p, t);
  const Plan& plan = planned.plan;
  std::set<std::string> dropped;
  std::vector<std::string> recomputed;
  for (const Step& s : plan.steps) {
    if (s.kind == StepKind::drop) dropped.insert(t.buffers[s.id].name);
    if (s.kind == StepKind::recompute) recomputed.push_back(t.ops[s.id].name);
  }
  std::set<std::string> want;
  for (int i : {0, 1, 2, 4, 5, 6, 8, 9, 10}) want.insert("layers." + std::to_string(i) + ".out");
  EXPECT_EQ(dropped, want);
  // Each segment recomputed in order when its backward begins: the last segment first.
  EXPECT_EQ(recomputed, (std::vector<std::string>{"layers.8", "layers.9", "layers.10", "layers.4",
                                                  "layers.5", "layers.6", "layers.0", "layers.1",
                                                  "layers.2"}));
  EXPECT_EQ(planned.label, "checkpoint-sqrt(segments=4)");
  const ckpt::Lowered r = ckpt::replay(t, plan, {});
  EXPECT_EQ(r.recompute_ops, 9u);
  EXPECT_LT(r.max_peak(), exec::baseline_peak_bytes(t));
}

TEST(CkptPlan, InPlaceSavingsWorkedOutByHand) {
  // w (100, weight), x (400, input); a, b, gb, ga 1000; c, gc, gw 100; l 4.
  //   f: x, w -> a       r: a -> b (relu, out of place)   h: b, w -> c     loss: c -> l
  //   loss.bw: c -> gc   h.bw: gc, b, w -> gb             r.bw: gb, b -> ga (relu_backward)
  //   f.bw: ga, w -> gw
  // none: at r.bw w + b + gb + ga = 3100. In place, r overwrites a (dies there) and r.bw
  // overwrites gb (dies there): the peak is h.bw's w + b + gc + gb = 2200. keep-all holds
  // everything: 500 + 1000 + 1000 + 100 + 4 + 100 + 1000 + 1000 + 100 = 4804.
  Trace t;
  t.name = "relu";
  const BufferId w = t.add_buffer("w", 100, Category::weight, true);
  const BufferId x = t.add_buffer("x", 400, Category::input);
  const BufferId a = t.add_buffer("a", 1000, Category::activation);
  const BufferId b = t.add_buffer("b", 1000, Category::activation);
  const BufferId c = t.add_buffer("c", 100, Category::activation);
  const BufferId l = t.add_buffer("l", 4, Category::activation);
  const BufferId gc = t.add_buffer("gc", 100, Category::activation_grad);
  const BufferId gb = t.add_buffer("gb", 1000, Category::activation_grad);
  const BufferId ga = t.add_buffer("ga", 1000, Category::activation_grad);
  const BufferId gw = t.add_buffer("gw", 100, Category::gradient);
  t.add_op(op("f", "matmul", Phase::forward, {x, w}, {a}));
  t.add_op(op("r", "relu", Phase::forward, {a}, {b}));
  t.add_op(op("h", "matmul", Phase::forward, {b, w}, {c}));
  t.add_op(op("loss", "mse_loss", Phase::forward, {c}, {l}));
  t.add_op(op("loss.bw", "mse_loss_backward", Phase::backward, {c}, {gc}));
  t.add_op(op("h.bw", "matmul_backward", Phase::backward, {gc, b, w}, {gb}));
  t.add_op(op("r.bw", "relu_backward", Phase::backward, {gb, b}, {ga}));
  t.add_op(op("f.bw", "matmul_backward", Phase::backward, {ga, w}, {gw}));
  validate(t, "relu");
  EXPECT_EQ(exec::baseline_peak_bytes(t), 3100u);

  auto p = policy("inplace");
  const auto rewritten = p->rewrite(t, PlatformSpec{});
  ASSERT_TRUE(rewritten.has_value());
  const Trace* r = &rewritten->trace;
  EXPECT_EQ(r->buffers.size(), t.buffers.size() - 2);
  EXPECT_EQ(exec::baseline_peak_bytes(*r), 2200u);
  const Op& relu = op_named(*r, "r");
  EXPECT_TRUE(relu.outputs.empty());
  ASSERT_EQ(relu.updates.size(), 1u);
  EXPECT_EQ(r->buffers[relu.updates[0]].name, "a");
  const Op& back = op_named(*r, "r.bw");
  ASSERT_EQ(back.updates.size(), 1u);
  EXPECT_EQ(r->buffers[back.updates[0]].name, "gb");
  // h reads the relu's result, now in a; its backward too.
  EXPECT_EQ(r->buffers[op_named(*r, "h").inputs[0]].name, "a");
  EXPECT_EQ(rewritten->label, "inplace(2 ops in place)");
  (void)gw;
  (void)ga;
  (void)gc;
  (void)l;
  (void)c;
}
