// Replicas sharing links: vdnn on the DGX A100 preset, where each pair of GPUs sits behind one
// PCIe switch with one uplink to the host (configs/devices/dgx-a100.yaml). The expected
// slowdown of the copies comes from the preset's link bandwidths, read here.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "sim/core/config.h"
#include "sim/core/units.h"

using nlohmann::json;

namespace {

json run_vdnn(const std::string& devices) {
  const std::string out = std::string(::testing::TempDir()) + "contention_" + std::to_string(::getpid()) +
                          "_" + (devices.empty() ? std::string("all") : devices);
  CliResult r = run_memsim("run dgx-a100 resnet50 --policy vdnn --json --out '" + out + "'" +
                           (devices.empty() ? "" : " --devices " + devices));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

double link_bandwidth(const std::string& name) {
  const auto p = memsim::ConfigNode::parse_file(std::string(MEMSIM_SOURCE_DIR) + "/configs/devices/dgx-a100.yaml");
  return p.at("links").at(name).at("bandwidth").as_unit(memsim::UnitKind::bandwidth);
}

}  // namespace

TEST(ContentionCli, EightVdnnReplicasAreSlowedByTheSharedPcieSwitches) {
  // Each GPU's own link and each switch's uplink carry the same bandwidth, and two GPUs share
  // an uplink: with every GPU copying, each copy gets half the uplink, so a replica's copies
  // take twice as long as one GPU's alone. GPUs behind different switches share nothing.
  const double own = link_bandwidth("pcie-gpu0"), uplink = link_bandwidth("pcie-up0");
  const double expected = own / std::min(own, uplink / 2);  // 2 on this preset
  const json alone = run_vdnn("gpu0");
  const json apart = run_vdnn("gpu0,gpu2");  // different switches
  const json pair = run_vdnn("gpu0,gpu1");   // one switch
  const json all = run_vdnn("");
  const double copy_alone = alone["transfer_time_s"].get<double>();
  const double copy_all = all["transfer_time_s"].get<double>() / 8;
  std::printf("per step: alone %.1f ms, 8 replicas %.1f ms; copies per GPU %.1f ms -> %.1f ms (x%.3f, "
              "links imply x%.3f)\n",
              alone["iteration_time_s"].get<double>() * 1e3, all["iteration_time_s"].get<double>() * 1e3,
              copy_alone * 1e3, copy_all * 1e3, copy_all / copy_alone, expected);
  EXPECT_NEAR(copy_all / copy_alone, expected, 0.01 * expected);
  EXPECT_GT(all["iteration_time_s"].get<double>(), alone["iteration_time_s"].get<double>() * 1.2);
  // The step cannot slow by more than its copies do.
  EXPECT_LT(all["iteration_time_s"].get<double>(), alone["iteration_time_s"].get<double>() * expected);
  // Where the contention is: two GPUs apart run as one alone, two on one switch as all eight.
  EXPECT_NEAR(apart["iteration_time_s"].get<double>(), alone["iteration_time_s"].get<double>(), 1e-9);
  EXPECT_NEAR(pair["iteration_time_s"].get<double>(), all["iteration_time_s"].get<double>(), 1e-9);
  EXPECT_EQ(all["swap_out_bytes"].get<std::uint64_t>(), 8 * alone["swap_out_bytes"].get<std::uint64_t>());
}

TEST(ContentionCli, DevicesMustBeComputeDevicesOfThePlatform) {
  CliResult r = run_memsim("run dgx-a100 resnet50 --devices gpu0,gpu9 --out /tmp/memsim-never");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--devices: platform dgx-a100 has no compute device 'gpu9'"), std::string::npos) << r.err;
}
