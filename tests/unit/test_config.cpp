#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/params.h"

using namespace memsim;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(Config, ReportsFileLineColumnAndKeyPath) {
  auto root = ConfigNode::parse_text("a:\n  b:\n    capacity: eighty\n", "x.yaml");
  auto cap = root.at("a").at("b").at("capacity");
  EXPECT_EQ(error_of([&] { cap.as_bytes(); }),
            "x.yaml:3:15: a.b.capacity: expected a size like '80GiB' or '512MB', got 'eighty'");
}

TEST(Config, MissingKeyPointsAtTheMap) {
  auto root = ConfigNode::parse_text("top:\n  x: 1\n", "m.yaml");
  EXPECT_EQ(error_of([&] { root.at("top").at("y"); }),
            "m.yaml:2:3: top: missing required key 'y'");
}

TEST(Config, UnknownKeyIsAnError) {
  auto root = ConfigNode::parse_text("x: 1\ncapacty: 2\n", "u.yaml");
  EXPECT_EQ(error_of([&] { root.allow_only({"x", "capacity"}); }),
            "u.yaml:2:1: capacty: unknown key 'capacty' (did you mean 'capacity'?); expected one of: x, capacity");
}

TEST(Config, MalformedYaml) {
  EXPECT_EQ(error_of([&] { ConfigNode::parse_text("a: [1, 2\n", "bad.yaml"); }).substr(0, 9),
            "bad.yaml:");
}

TEST(Config, SequencesCarryIndices) {
  auto root = ConfigNode::parse_text("xs: [1, two]\n", "s.yaml");
  auto items = root.at("xs").items();
  EXPECT_EQ(items[0].as_int(), 1);
  EXPECT_EQ(error_of([&] { items[1].as_int(); }), "s.yaml:1:9: xs[1]: expected an integer, got 'two'");
}

TEST(Config, OverrideNamesItsOrigin) {
  auto root = ConfigNode::parse_text("workload:\n  batch: 32\n", "w.yaml");
  root.override_value({"workload", "batch"}, "abc", "--set workload.batch=abc");
  EXPECT_EQ(error_of([&] { root.at("workload").at("batch").as_int(); }),
            "--set workload.batch=abc: workload.batch: expected an integer, got 'abc'");
  root.override_value({"workload", "batch"}, "64", "--set workload.batch=64");
  EXPECT_EQ(root.at("workload").at("batch").as_int(), 64);
}

TEST(Params, DefaultsRequiredAndUnknown) {
  std::vector<ParamSpec> specs{{"depth", "layers", std::nullopt}, {"batch", "samples", "32"}};
  auto ok = ConfigNode::parse_text("model: m\ndepth: 50\n", "p.yaml");
  Params p(ok, specs, "model m", {"model"});
  EXPECT_EQ(p.get("depth").as_int(), 50);
  EXPECT_EQ(p.get("batch").as_int(), 32);
  auto missing = ConfigNode::parse_text("model: m\n", "p.yaml");
  EXPECT_EQ(error_of([&] { Params(missing, specs, "model m", {"model"}); }),
            "p.yaml:1:1: missing required key 'depth' (model m requires it: layers)");
  auto unknown = ConfigNode::parse_text("model: m\ndepth: 1\ndepht: 2\n", "p.yaml");
  EXPECT_EQ(error_of([&] { Params(unknown, specs, "model m", {"model"}); }),
            "p.yaml:3:1: depht: unknown key 'depht' (did you mean 'depth'?); model m takes: depth, batch");
}
