// The plan's longest-path bound (sim/plan/path_bound.h) on steps small enough to work out by
// hand: a collective waits for the in-place updates of what it reads (a gradient accumulated
// over micro-batches before it is all-reduced); a receive ends no earlier than its send; a
// collective takes at least its bytes over the rank's links at NCCL's best efficiency; ops of
// two streams with nothing between them overlap. Whether the bound stays below the simulated
// step over every layout of a search is cli Plan.BranchAndBoundFindsTheBestOfEveryLayout.
#include <gtest/gtest.h>

#include <string>

#include "sim/cost/cost_model.h"
#include "sim/plan/path_bound.h"
#include "sim/platform/platform.h"
#include "tests/platform_helpers.h"

using namespace memsim;

namespace {

// DGX A100 without the host's time to issue ops, so that the longest path is the devices' alone.
PlatformSpec dgx_a100() { return test::without_host_overhead(test::preset_platform("dgx-a100")); }

Op compute(const std::string& name, std::uint32_t device, std::uint16_t stream, double flops) {
  Op op;
  op.name = name;
  op.kind = "linear";
  op.device = device;
  op.stream = stream;
  op.dtype = DType::fp16;
  op.flops = flops;
  return op;
}

Op collective(const std::string& name, const char* kind, std::uint32_t device, std::uint64_t bytes) {
  Op op;
  op.name = name;
  op.kind = kind;
  op.device = device;
  op.group = "g";
  op.message_bytes = bytes;
  return op;
}

}  // namespace

TEST(PathBound, ACollectiveWaitsForTheInPlaceUpdatesOfWhatItReads) {
  const PlatformSpec platform = dgx_a100();
  Trace t;
  t.groups.push_back({"g", {0, 1, 2, 3, 4, 5, 6, 7}});
  const std::uint64_t bytes = 1ull << 30;
  const BufferId grad = t.add_buffer("grad", bytes, Category::gradient);
  Op make = compute("backward@mb0", 0, 0, 1e13);
  make.outputs = {grad};
  t.add_op(make);
  for (int k = 1; k < 4; ++k) {
    Op add = compute("backward@mb" + std::to_string(k), 0, 0, 1e13);
    add.updates = {grad};
    t.add_op(add);
  }
  Op reduce = collective("all_reduce", "all_reduce", 0, bytes);
  reduce.updates = {grad};
  t.add_op(reduce);

  const std::vector<double> d = op_durations(t, platform);
  const double chain = d[0] + d[1] + d[2] + d[3];
  // 7/8 of the tensor leaves over gpu0's NVLink (300 GB/s) at the simple protocol's 0.881 less
  // the ring's fill (0.63 / 8), then the least protocol latency (LL128 29.1 us, simple 26.6 us).
  const CollectiveModel& nccl = platform.collectives;
  const double rate = 300e9 * 0.881 * (1 - nccl.ring_fill / 8);
  const double all_reduce = 7.0 / 8 * static_cast<double>(bytes) / rate + 26.6e-6;
  const auto path = longest_path_s(t, platform);
  ASSERT_TRUE(path);
  EXPECT_NEAR(*path, chain + all_reduce, 1e-12);
}

TEST(PathBound, AReceiveEndsNoEarlierThanItsSendAndIndependentStreamsOverlap) {
  PlatformSpec platform = dgx_a100();
  platform.devices[platform.op_devices()[1]].streams = 2;
  Trace t;
  t.groups.push_back({"g", {0, 1}});
  const std::uint64_t bytes = 256ull << 20;
  const BufferId x = t.add_buffer("x", bytes, Category::activation);
  const BufferId y = t.add_buffer("y", bytes, Category::activation);
  Op first = compute("stage0.forward", 0, 0, 2e13);
  first.outputs = {x};
  t.add_op(first);
  Op send = collective("send", "send", 0, bytes);
  send.inputs = {x};
  t.add_op(send);
  Op recv = collective("recv", "recv", 1, bytes);
  recv.outputs = {y};
  t.add_op(recv);
  Op second = compute("stage1.forward", 1, 0, 2e13);
  second.inputs = {y};
  t.add_op(second);
  // On another stream of device 1 and reading nothing: it need not wait for the receive.
  t.add_op(compute("stage1.side", 1, 1, 2e13));

  const std::vector<double> d = op_durations(t, platform);
  const double p2p = static_cast<double>(bytes) / (300e9 * 0.881 * (1 - platform.collectives.ring_fill / 2)) + 26.6e-6;
  const auto path = longest_path_s(t, platform);
  ASSERT_TRUE(path);
  EXPECT_NEAR(*path, d[0] + p2p + d[3], 1e-12);  // the side op overlaps
}
