// The recomputation planners on a step of several replicas (one per device, as a platform of
// many GPUs runs a workload without a parallel section): each device is planned over its own
// ops and buffers, so what one device's planning touches does not grow with the replicas
// beside it (it did: every device scanned the whole step and sized its marks by every
// buffer, quadratic in replicas), and each replica is planned as it would be alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/config.h"
#include "sim/core/params.h"
#include "sim/policy/impl/ckpt_common.h"
#include "sim/policy/policy.h"
#include "sim/workload/models/models.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

Trace replicas(const Trace& one, std::size_t n) {
  std::vector<std::string> devices;
  for (std::size_t k = 0; k < n; ++k) devices.push_back("gpu" + std::to_string(k));
  return combine_per_device(std::vector<Trace>(n, one), devices);
}

PlanResult plan_of(const std::string& name, const std::string& yaml, const Trace& t) {
  static const PlatformSpec none;
  static const std::vector<double> no_durations;
  auto node = ConfigNode::parse_text(yaml, "p.yaml");
  const auto p = find_policy(name)->create(Params(node, find_policy(name)->params, name));
  const Liveness l = compute_liveness(t);
  return p->plan(PlanningContext{t, l, none, no_durations, {}});
}

// The plan's steps about device d's ops and buffers, in order, with ids made relative to the
// device's first op and buffer.
std::vector<std::pair<StepKind, std::uint64_t>> steps_of(const Trace& t, const Plan& plan, std::uint32_t d,
                                                         OpId first_op, BufferId first_buffer) {
  std::vector<std::pair<StepKind, std::uint64_t>> out;
  for (const Step& s : plan.steps) {
    const bool on_op = s.kind == StepKind::compute || s.kind == StepKind::recompute;
    if (on_op ? t.ops[s.id].device != d : t.buffers[s.id].device != d) continue;
    out.emplace_back(s.kind, s.id - (on_op ? first_op : first_buffer));
  }
  return out;
}

}  // namespace

TEST(CkptReplicas, EachDevicesOpsAndBuffersDoNotGrowWithTheReplicasBesideIt) {
  const Trace one = generate("{model: chain, layers: 12, width: 64, batch: 4}");
  const ckpt::DeviceOps alone(one);
  ASSERT_EQ(alone.forward.size(), 1u);
  const std::size_t buffers = alone.buffers(one, 0).size();
  for (std::size_t n : {2u, 5u, 9u}) {
    SCOPED_TRACE(n);
    const Trace t = replicas(one, n);
    const ckpt::DeviceOps ops(t);
    ASSERT_EQ(ops.forward.size(), n);
    for (std::uint32_t d = 0; d < n; ++d) {
      EXPECT_EQ(ops.forward[d].size(), alone.forward[0].size());
      EXPECT_EQ(ops.later[d].size(), alone.later[0].size());
      for (OpId o : ops.forward[d]) EXPECT_EQ(t.ops[o].device, d);
      for (OpId o : ops.later[d]) EXPECT_EQ(t.ops[o].device, d);
      const std::vector<BufferId> mine = ops.buffers(t, d);
      EXPECT_EQ(mine.size(), buffers);
      for (BufferId b : mine) EXPECT_EQ(t.buffers[b].device, d) << t.buffers[b].name;
    }
  }
}

TEST(CkptReplicas, EveryReplicasStagesAreTheOnesItHasAlone) {
  for (const std::string yaml : {"{model: chain, layers: 12, width: 64, batch: 4}",
                                 "{model: lstm, seq_len: 6, hidden: 32, input_size: 16, batch: 4}"}) {
    SCOPED_TRACE(yaml);
    const Trace one = generate(yaml);
    const ckpt::Stages alone = ckpt::find_stages(one, 0, "revolve");
    const Trace t = replicas(one, 4);
    const std::vector<ckpt::Stages> all = ckpt::find_stages(t, "revolve");
    ASSERT_EQ(all.size(), 4u);
    for (std::uint32_t d = 0; d < 4; ++d) {
      SCOPED_TRACE(d);
      const auto shift = static_cast<OpId>(d * one.ops.size());
      const ckpt::Stages& st = all[d];
      EXPECT_EQ(st.device, d);
      EXPECT_EQ(st.begin, alone.begin);
      EXPECT_EQ(st.state_bytes, alone.state_bytes);
      EXPECT_EQ(st.internal_bytes, alone.internal_bytes);
      EXPECT_EQ(st.reads_state_only, alone.reads_state_only);
      ASSERT_EQ(st.forward.size(), alone.forward.size());
      for (std::size_t q = 0; q < st.forward.size(); ++q) EXPECT_EQ(st.forward[q], alone.forward[q] + shift);
      ASSERT_EQ(st.group_first.size(), alone.group_first.size());
      for (std::size_t s = 0; s < st.group_first.size(); ++s)
        EXPECT_EQ(st.group_first[s], alone.group_first[s] == kNoOp ? kNoOp : alone.group_first[s] + shift);
      // The one-device call finds the same.
      EXPECT_EQ(ckpt::find_stages(t, d, "revolve").begin, st.begin);
    }
  }
}

TEST(CkptReplicas, EachReplicaIsPlannedAsItIsAlone) {
  const Trace one = generate("{model: chain, layers: 16, width: 64, batch: 4}");
  const Trace t = replicas(one, 3);
  for (const auto& [name, yaml] : std::vector<std::pair<std::string, std::string>>{
           {"checkpoint-sqrt", "{}"}, {"checkpoint-sqrt", "{segments: 3}"}, {"revolve", "{slots: 2}"},
           {"bptt-optimal", "{slots: 3}"}}) {
    SCOPED_TRACE(name + " " + yaml);
    const PlanResult alone = plan_of(name, yaml, one);
    const PlanResult all = plan_of(name, yaml, t);
    EXPECT_EQ(all.label, alone.label);
    const auto expected = steps_of(one, alone.plan, 0, 0, 0);
    EXPECT_NE(std::count_if(expected.begin(), expected.end(),
                            [](const auto& s) { return s.first == StepKind::recompute; }),
              0);  // something is recomputed
    for (std::uint32_t d = 0; d < 3; ++d)
      EXPECT_EQ(steps_of(t, all.plan, d, static_cast<OpId>(d * one.ops.size()),
                         static_cast<BufferId>(d * one.buffers.size())),
                expected)
          << "device " << d;
  }
}
