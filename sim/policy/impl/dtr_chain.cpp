#include "sim/policy/impl/dtr_chain.h"

#include <string>

#include "sim/core/config.h"

namespace memsim {

namespace {

Op unit_op(std::string name, Phase phase, std::vector<BufferId> in, BufferId out) {
  Op op;
  op.name = std::move(name);
  op.kind = "matmul";
  op.phase = phase;
  op.inputs = std::move(in);
  op.outputs = {out};
  op.flops = kDtrUnitFlops;
  return op;
}

}  // namespace

Trace dtr_unit_chain(std::size_t layers) {
  Trace t;
  t.name = "unit-chain";
  t.description = "linear chain of " + std::to_string(layers) + " unit-cost, unit-size layers";
  t.buffers.reserve(2 * layers + 1);
  t.ops.reserve(2 * layers);
  std::vector<BufferId> act{t.add_buffer("t0", kDtrUnitBytes, Category::input)};
  for (std::size_t i = 1; i <= layers; ++i) {
    const BufferId out = t.add_buffer("t" + std::to_string(i), kDtrUnitBytes, Category::activation);
    t.add_op(unit_op("f" + std::to_string(i), Phase::forward, {act.back()}, out));
    act.push_back(out);
  }
  BufferId grad = 0;
  for (std::size_t i = layers; i >= 1; --i) {
    const BufferId g = t.add_buffer("g" + std::to_string(i), kDtrUnitBytes, Category::activation_grad);
    std::vector<BufferId> in{act[i]};
    if (i < layers) in.push_back(grad);
    t.add_op(unit_op("b" + std::to_string(i), Phase::backward, std::move(in), g));
    grad = g;
  }
  return t;
}

Trace dtr_simrd_chain(std::size_t layers) {
  Trace t;
  t.name = "simrd-unit-chain";
  t.description = "simrd's linear chain of " + std::to_string(layers) + " unit-cost, unit-size layers";
  t.buffers.reserve(2 * layers);
  t.ops.reserve(2 * layers);
  std::vector<BufferId> act;
  for (std::size_t i = 0; i < layers; ++i) {
    const BufferId out = t.add_buffer("t" + std::to_string(i), kDtrUnitBytes, Category::activation);
    std::vector<BufferId> in;
    if (i > 0) in.push_back(act.back());
    t.add_op(unit_op("f" + std::to_string(i), Phase::forward, std::move(in), out));
    act.push_back(out);
  }
  BufferId grad = 0;
  for (std::size_t i = layers; i-- > 0;) {
    const BufferId g = t.add_buffer("g" + std::to_string(i), kDtrUnitBytes, Category::activation_grad);
    std::vector<BufferId> in;
    if (i + 1 < layers) {
      if (i > 0) in.push_back(act[i - 1]);
      in.push_back(grad);
    }
    t.add_op(unit_op("b" + std::to_string(i), Phase::backward, std::move(in), g));
    grad = g;
  }
  return t;
}

// Measured with simrd at uwsampl/dtr-prototype eff53cc4 (simrd/), Python 3.11: heuristic
// DTREqClass on RuntimeV2EagerOptimized (the paper's DTR with equivalence classes and eager
// eviction), the chain built by simrd_experiments/uniform_linear/run.py's run(n, B, ...,
// releases=True); the figure is telemetry.summary's remat_compute, the baseline its
// model_compute (2n: the forward and the backward). Budgets as simrd's bounds.py rounds them:
// 2 sqrt(n) and the other multiples of sqrt(n) up (ceil), fractions b n. The command, per
// row: python3 chain.py N B (a driver calling run() after naming simrd's unnamed unit
// operator, which its telemetry needs; docs/reproductions.md has it in full).
std::span<const SimrdFigure> simrd_figures() {
  static constexpr SimrdFigure kFigures[] = {
      {1000, "1.0", 1000, 0, false},
      {1000, "0.75", 750, 250, false},
      {1000, "0.5", 500, 500, true},
      {1000, "0.25", 250, 750, true},
      {1000, "0.1", 100, 900, false},
      {1000, "0.05", 50, 1163, false},
      {1000, "4 sqrt(N)", 127, 873, false},
      {1000, "3 sqrt(N)", 95, 905, false},
      {1000, "2 sqrt(N)", 64, 957, true},
      {1000, "1.5 sqrt(N)", 48, 1222, false},
      {1000, "sqrt(N)", 32, 1569, false},
      {1000, "0.5 sqrt(N)", 16, 2736, false},
      {1000, "", 8, 7226, false},
      {1000, "", 4, 476012, false},
      {10000, "1.0", 10000, 0, false},
      {10000, "0.75", 7500, 2500, false},
      {10000, "0.5", 5000, 5000, true},
      {10000, "0.25", 2500, 7500, true},
      {10000, "0.1", 1000, 9000, false},
      {10000, "0.05", 500, 9500, false},
      {10000, "4 sqrt(N)", 400, 9600, false},
      {10000, "3 sqrt(N)", 300, 9700, false},
      {10000, "2 sqrt(N)", 200, 10905, true},
      {10000, "1.5 sqrt(N)", 150, 13173, false},
      {10000, "sqrt(N)", 100, 16204, false},
      {10000, "0.5 sqrt(N)", 50, 21617, false},
      {10000, "", 25, 34618, false},
      {10000, "", 12, 74166, false},
      {10000, "", 6, 417047, false},
  };
  return kFigures;
}

PlatformSpec dtr_unit_platform(std::uint64_t capacity_bytes) {
  return load_platform(ConfigNode::parse_text(
      "name: unit-gpu\n"
      "devices:\n"
      "  gpu0:\n"
      "    kind: gpu\n"
      "    compute: {fp32: 1TFLOPS}\n"
      "    launch_overhead: 0us\n"
      "    tiers:\n"
      "      hbm: {role: compute, capacity: " + std::to_string(capacity_bytes) + "B, bandwidth: 1000GB/s}\n"
      "  host:\n"
      "    kind: cpu\n"
      "    tiers:\n"
      "      dram: {role: offload, capacity: 1TiB, bandwidth: 100GB/s}\n"
      "links:\n"
      "  pcie0: {endpoints: [gpu0.hbm, host.dram], bandwidth: 10GB/s}\n",
      "unit-gpu.yaml"));
}

}  // namespace memsim
