// compress (Gist): the rewritten trace, and its memory and time in the engine, by hand.
#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/exec/replay.h"
#include "sim/core/error.h"
#include "sim/run/run.h"
#include "sim/policy/policy.h"

using namespace memsim;

namespace {

// 1 TFLOPS, no launch overhead, a 100 GB/s tier: an op of 1e9 FLOPs takes 1 ms, an encode
// of B bytes moved B / 1e11 s.
PlatformSpec gpu() {
  return load_platform(ConfigNode::parse_text(R"(
name: gpu
devices:
  gpu0:
    kind: gpu
    compute: {fp32: 1TFLOPS}
    launch_overhead: 0us
    tiers:
      hbm: {role: compute, capacity: 1GiB, bandwidth: 100GB/s}
)",
                                              "gpu.yaml"));
}

std::unique_ptr<Policy> compress(const std::string& params = "{}") {
  auto node = ConfigNode::parse_text(params, "test");
  const PolicyInfo* info = find_policy("compress");
  return info->create(Params(node, info->params, "policy compress"));
}

Op make_op(const std::string& name, const std::string& kind, Phase phase,
           std::vector<BufferId> in, BufferId out) {
  Op op;
  op.name = name;
  op.kind = kind;
  op.phase = phase;
  op.inputs = std::move(in);
  op.outputs = {out};
  op.flops = 1e9;
  return op;
}

// Every activation 4000 B (1000 fp32 elements); x is a persistent input.
//   forward   f: x -> a;  relu: a -> r;  g: r -> y;  relu2: y -> s;  loss: s -> l (4 B)
//   backward  lb: l -> gs;  r2b: gs, s -> gy (relu_backward);  gb: gy, r -> gr (matmul);
//             rb: gr, r -> ga (relu_backward);  fb: ga, x -> gx
// Stashed: s (only relu_backward reads it: binarized, 125 B) and r (read by gb too: sparse,
// 0.5 x 1000 x (4 + 1) = 2500 B).
Trace two_relus() {
  Trace t;
  t.name = "relus";
  auto act = [&](const std::string& n, std::uint64_t bytes = 4000) {
    return t.add_buffer(n, bytes, Category::activation);
  };
  BufferId x = t.add_buffer("x", 4000, Category::input, true);
  BufferId a = act("a"), r = act("r"), y = act("y"), s = act("s"), l = act("l", 4);
  BufferId gs = act("gs"), gy = act("gy"), gr = act("gr"), ga = act("ga"), gx = act("gx");
  t.add_op(make_op("f", "matmul", Phase::forward, {x}, a));
  t.add_op(make_op("relu", "relu", Phase::forward, {a}, r));
  t.add_op(make_op("g", "matmul", Phase::forward, {r}, y));
  t.add_op(make_op("relu2", "relu", Phase::forward, {y}, s));
  t.add_op(make_op("loss", "mse_loss", Phase::forward, {s}, l));
  t.add_op(make_op("lb", "mse_loss_backward", Phase::backward, {l}, gs));
  t.add_op(make_op("r2b", "relu_backward", Phase::backward, {gs, s}, gy));
  t.add_op(make_op("gb", "matmul_backward", Phase::backward, {gy, r}, gr));
  t.add_op(make_op("rb", "relu_backward", Phase::backward, {gr, r}, ga));
  t.add_op(make_op("fb", "matmul_backward", Phase::backward, {ga, x}, gx));
  validate(t, "relus");
  return t;
}

const Buffer& named(const Trace& t, const std::string& name) {
  for (const Buffer& b : t.buffers)
    if (b.name == name) return b;
  throw std::runtime_error("no buffer " + name);
}

std::vector<std::string> op_names(const Trace& t) {
  std::vector<std::string> names;
  for (const Op& op : t.ops) names.push_back(op.name);
  return names;
}

std::optional<Trace> trace_of(const std::optional<Rewritten>& r) {
  if (!r) return std::nullopt;
  return r->trace;
}

}  // namespace

TEST(CompressRewrite, EncodesAfterTheLastForwardUseAndDecodesBeforeTheFirstBackwardUse) {
  auto p = compress();
  const auto rewritten = p->rewrite(two_relus(), gpu());
  const auto out = trace_of(rewritten);
  ASSERT_TRUE(out.has_value());
  validate(*out, "rewritten");
  EXPECT_EQ(op_names(*out), (std::vector<std::string>{"f", "relu", "g", "r.encode", "relu2", "loss",
                                                      "s.encode", "lb", "s.decode", "r2b", "r.decode",
                                                      "gb", "rb", "fb"}));
  EXPECT_EQ(named(*out, "s.encoded").bytes, 125u);
  EXPECT_EQ(named(*out, "r.encoded").bytes, 2500u);
  EXPECT_EQ(named(*out, "r.decoded").bytes, 4000u);
  // The backward ops read the decoded copies; the originals die at their encode.
  const Op& gb = out->ops[11];
  EXPECT_EQ(out->buffers[gb.inputs[1]].name, "r.decoded");
  EXPECT_EQ(out->buffers[out->ops[9].inputs[1]].name, "s.decoded");
  const Liveness l = compute_liveness(*out);
  EXPECT_EQ(out->ops[l.last_use[named(*out, "r").id]].name, "r.encode");
  EXPECT_EQ(out->ops[3].kind, "encode");
  EXPECT_EQ(out->ops[3].bytes_moved, 6500.0);
  EXPECT_EQ(rewritten->label.rfind("compress(mode=binarize+sparse, sparsity=0.5: 1 binarized, 1 sparse, 0 reduced; ", 0),
            0u)
      << rewritten->label;
}

TEST(CompressRewrite, LossyModesStashEveryActivationNarrower) {
  auto p = compress("{mode: fp16}");
  const auto out = trace_of(p->rewrite(two_relus(), gpu()));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(named(*out, "s.encoded").bytes, 2000u);
  EXPECT_EQ(named(*out, "r.encoded").bytes, 2000u);
  auto p8 = compress("{mode: binarize+fp8}");
  const auto out8 = trace_of(p8->rewrite(two_relus(), gpu()));
  EXPECT_EQ(named(*out8, "s.encoded").bytes, 125u);
  EXPECT_EQ(named(*out8, "r.encoded").bytes, 1000u);
}

TEST(CompressRewrite, SparseOnlyWhenItIsSmaller) {
  // Sparse costs (1 - sparsity) x 5 B per 4 B element: at 0.1 it is larger, nothing changes.
  const auto same = compress("{mode: sparse, sparsity: 0.1}")->rewrite(two_relus(), gpu());
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->trace.buffers.size(), two_relus().buffers.size());
  EXPECT_EQ(same->trace.ops.size(), two_relus().ops.size());
  // At 0.3: 0.7 x 1000 x 5 = 3500 B for both ReLU outputs (binarize not asked for).
  const auto out = trace_of(compress("{mode: sparse, sparsity: 0.3}")->rewrite(two_relus(), gpu()));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(named(*out, "s.encoded").bytes, 3500u);
  EXPECT_EQ(named(*out, "r.encoded").bytes, 3500u);
}

TEST(CompressRewrite, BadModesAreInputErrors) {
  EXPECT_THROW(compress("{mode: zip}"), InputError);
  EXPECT_THROW(compress("{mode: fp16+fp8}"), InputError);
  EXPECT_THROW(compress("{sparsity: 1.5}"), InputError);
}

TEST(CompressRun, PeakAndTimeWithTheCodecs) {
  // none peaks at 20000 B (x, r, s, gs, gy at r2b); with r stashed in 2500 B and s in 125 B
  // the peak is 18500 B, at r2b: x, r.encoded, gs, s.decoded, gy. Ten 1 ms ops plus the
  // codecs: (6500 + 4125 + 4125 + 6500) B / 100 GB/s.
  const Trace t = two_relus();
  auto p = compress();
  Trace rewritten = p->rewrite(t, gpu())->trace;
  Recorder rec;
  Summary s = simulate(gpu(), rewritten, *p, rec);
  ASSERT_EQ(s.status, "ok");
  EXPECT_EQ(exec::baseline_peak_bytes(t), 20000u);
  EXPECT_EQ(s.tiers[0].usage.peak_allocated_bytes, 18500u);
  EXPECT_NEAR(s.iteration_time_s, 10e-3 + 21250 / 1e11, 1e-12);
}
