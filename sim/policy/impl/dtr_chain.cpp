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
