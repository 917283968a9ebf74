#include <gtest/gtest.h>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/json_syntax.h"
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

// A file holds one document: a second one would be ignored without a word.
TEST(Config, ASecondDocumentIsAnErrorWhereItStarts) {
  EXPECT_EQ(error_of([&] { ConfigNode::parse_text("a: 1\n---\nb: 2\n", "two.yaml"); }),
            "two.yaml:2:1: a second document starts here; a file holds one (YAML's '---' starts another)");
  EXPECT_EQ(error_of([&] { ConfigNode::parse_text("a: 1\n---\n", "empty.yaml"); }),
            "empty.yaml:2:1: a second document starts here; a file holds one (YAML's '---' starts another)");
  // A marker that opens the one document, or one that ends it, is no second document.
  EXPECT_EQ(ConfigNode::parse_text("---\na: 1\n", "one.yaml").at("a").as_int(), 1);
  EXPECT_EQ(ConfigNode::parse_text("a: 1\n...\n", "one.yaml").at("a").as_int(), 1);
  EXPECT_TRUE(ConfigNode::parse_text("", "nothing.yaml").is_null());
}

// A .json file is JSON: what YAML would also take there is an error; a YAML file keeps YAML's
// reading.
TEST(Config, AJsonFileIsStrictJson) {
  EXPECT_EQ(error_of([&] { ConfigNode::parse_text("{\"a\": 1}\n{\"a\": 2}\n", "c.json"); }),
            "c.json:2:1: malformed JSON: syntax error while parsing value - unexpected '{'; expected end of input");
  EXPECT_EQ(error_of([&] { ConfigNode::parse_text("{\"a\": 064}", "c.json"); }),
            "c.json:1:7: malformed JSON: the number 064 starts with a 0: JSON has no leading zeros");
  EXPECT_EQ(error_of([&] { ConfigNode::parse_text("{\"a\": 1, # note\n \"b\": 2}", "c.json"); }).substr(0, 26),
            "c.json:1:10: malformed JSO");
  const auto json = ConfigNode::parse_text("{\"n\": \"64\", \"x\": \"0.5\", \"f\": \"true\", \"w\": \"eight\"}", "c.json");
  EXPECT_EQ(error_of([&] { json.at("n").as_int(); }), "c.json:1:7: n: expected an integer, got the string \"64\"");
  EXPECT_EQ(error_of([&] { json.at("x").as_double(); }), "c.json:1:18: x: expected a number, got the string \"0.5\"");
  EXPECT_EQ(error_of([&] { json.at("f").as_bool(); }), "c.json:1:30: f: expected true or false, got the string \"true\"");
  EXPECT_EQ(error_of([&] { json.at("w").as_int(); }), "c.json:1:43: w: expected an integer, got 'eight'");
  const auto yaml = ConfigNode::parse_text("n: \"64\"\nm: 064\n", "c.yaml");
  EXPECT_EQ(yaml.at("n").as_int(), 64);
  EXPECT_EQ(yaml.at("m").as_int(), 64);
}

TEST(JsonSyntax, LeadingZerosAreFoundAtTheirNumber) {
  EXPECT_EQ(json_syntax_error("[1, -01.5]", "l.json"),
            "l.json:1:5: malformed JSON: the number -01.5 starts with a 0: JSON has no leading zeros");
  EXPECT_EQ(json_syntax_error("[0, 0.5, -0, 1e05, 10]", "l.json"), std::nullopt);
  EXPECT_EQ(json_syntax_error("{\"a\": [1, 2", "l.json"),
            "l.json:1:12: truncated JSON: syntax error while parsing array - unexpected end of input; expected ']'");
  EXPECT_TRUE(names_json_file("x/config.json"));
  EXPECT_TRUE(names_json_file("t.json.gz"));
  EXPECT_FALSE(names_json_file("config.yaml"));
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
