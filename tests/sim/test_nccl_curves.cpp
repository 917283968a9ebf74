// The shipped dgx-a100 preset's all-reduce against nccl-tests measured on 2, 4 and 8 A100s of
// one DGX node (../shared/validation/measured-steps/a100-nccl-allreduce-{2,4,8}gpu.csv, its
// README says what ran): every measured size from 1 MiB to 1 GiB, out of place, within 10%.
// The preset's `collectives:` parameters were fitted to these curves (docs/time-model.md), so
// this checks the model's form holds over the whole range, not only at the fitted points.
// Skipped, with a message, where ../shared is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/config.h"
#include "sim/core/presets.h"
#include "sim/policy/policy.h"
#include "sim/run/run.h"
#include "tests/sim/all_reduces.h"
#include "tests/platform_helpers.h"

using namespace memsim;
namespace fs = std::filesystem;

namespace {

fs::path measured(std::uint32_t n) {
  return fs::path(MEMSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "measured-steps" /
         ("a100-nccl-allreduce-" + std::to_string(n) + "gpu.csv");
}

struct Point {
  std::uint64_t bytes;
  double seconds;
};

// size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s): the out-of-place time.
std::vector<Point> read_curve(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<Point> out;
  while (std::getline(in, line)) {
    std::stringstream s(line);
    std::string size, count, type, ns;
    std::getline(s, size, ',');
    std::getline(s, count, ',');
    std::getline(s, type, ',');
    std::getline(s, ns, ',');
    out.push_back({std::stoull(size), std::stod(ns) * 1e-9});
  }
  return out;
}

// One all-reduce per measured size on ranks 0..n-1, one after another on the group's stream,
// as nccl-tests runs them back to back.
Trace all_reduces(const std::vector<Point>& points, std::uint32_t n) {
  std::vector<std::uint64_t> sizes;
  for (const Point& p : points) sizes.push_back(p.bytes);
  return test::all_reduces(sizes, n, false, "nccl-tests");
}

}  // namespace

class NcclCurve : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(NcclCurve, AllReduceOnDgxA100IsWithinTenPercentOfNcclTestsFrom1MiBTo1GiB) {
  const std::uint32_t n = GetParam();
  if (!fs::exists(measured(n))) GTEST_SKIP() << measured(n).string() << " is absent: the measurements are not on this machine";
  const auto points = read_curve(measured(n));
  ASSERT_EQ(points.size(), 1024u);
  PlatformSpec p = test::preset_platform("dgx-a100");
  // Every message's buffer is resident from the start (half a TiB per GPU in all): room for
  // them, since memory is not what this checks.
  for (TierSpec& t : p.tiers) t.capacity_bytes = std::uint64_t{1} << 50;
  ASSERT_TRUE(p.collectives.on()) << "dgx-a100 has no collectives: section";
  Recorder rec;
  auto none = find_policy("none")->create(Params(ConfigNode::parse_text("{}", "p.yaml"), find_policy("none")->params, "none"));
  simulate(p, all_reduces(points, n), *none, rec);
  std::vector<double> took(points.size(), -1);
  for (const Event& e : rec.events())
    if (e.kind == EventKind::comm && e.device == 0) took.at(e.op / n) = e.end_s - e.start_s;
  double worst = 0, sum = 0;
  std::uint64_t worst_at = 0;
  for (std::size_t k = 0; k < points.size(); ++k) {
    ASSERT_GE(took[k], 0) << "no comm event for size " << points[k].bytes;
    const double e = std::abs(took[k] - points[k].seconds) / points[k].seconds;
    sum += e;
    if (e > worst) {
      worst = e;
      worst_at = points[k].bytes;
    }
  }
  RecordProperty("mean_error_pct", std::to_string(100 * sum / points.size()));
  EXPECT_LT(worst, 0.10) << n << " GPUs: worst " << 100 * worst << "% at " << worst_at << " bytes; mean "
                         << 100 * sum / points.size() << "%";
  EXPECT_LT(sum / points.size(), 0.07) << n << " GPUs";
}

INSTANTIATE_TEST_SUITE_P(DgxA100, NcclCurve, ::testing::Values(2u, 4u, 8u));
