#pragma once
// The collective tests' two-node platform: two nodes of two GPUs, links of 1000 GB/s and
// 1 us to the node's switch, a NIC of 10 GB/s and 5 us per GPU to the fabric's switch.
// `tail` is appended to the YAML (a `collectives:` section).
#include <string>

namespace memsim::test {

inline std::string two_nodes_yaml(const std::string& tail = "") {
  return R"(name: two-nodes
nodes: 2
devices:
  gpu0: {kind: gpu, compute: {fp32: 10TFLOPS}, tiers: {hbm: {role: compute, capacity: 80GiB, bandwidth: 100000GB/s}}}
  gpu1: {kind: gpu, compute: {fp32: 10TFLOPS}, tiers: {hbm: {role: compute, capacity: 80GiB, bandwidth: 100000GB/s}}}
switches: [nvs]
links:
  nv0: {endpoints: [gpu0.hbm, nvs], bandwidth: 1000GB/s, latency: 1us}
  nv1: {endpoints: [gpu1.hbm, nvs], bandwidth: 1000GB/s, latency: 1us}
fabric:
  switches: [net]
  links:
    nic0: {endpoints: [gpu0.hbm, net], bandwidth: 10GB/s, latency: 5us}
    nic1: {endpoints: [gpu1.hbm, net], bandwidth: 10GB/s, latency: 5us}
)" + tail;
}

}  // namespace memsim::test
