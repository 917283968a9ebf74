// closest_name and did_you_mean: typos, transpositions, prefixes, case, and names too far
// from every candidate.
#include <gtest/gtest.h>

#include "sim/core/suggest.h"

namespace memsim {
namespace {

const std::vector<std::string> kCommands = {"run", "info", "explain", "validate", "trace", "calibrate",
                                            "list", "sweep", "fit"};

TEST(Suggest, OneEditAway) {
  EXPECT_EQ(closest_name("runn", kCommands), "run");
  EXPECT_EQ(closest_name("lsit", kCommands), "list");  // a transposition is one edit
  EXPECT_EQ(closest_name("INFO", kCommands), "info");
  EXPECT_EQ(did_you_mean("swap-lur", {"swap-lru", "swap-budget", "dtr"}), "; did you mean 'swap-lru'?");
}

TEST(Suggest, APrefixOfALongerName) {
  EXPECT_EQ(closest_name("gpt2", {"gpt2-xl", "resnet50"}), "gpt2-xl");
}

TEST(Suggest, NothingClose) {
  EXPECT_EQ(closest_name("zzzz", kCommands), "");
  EXPECT_EQ(did_you_mean("zzzz", kCommands), "");
  EXPECT_EQ(did_you_mean("", kCommands), "");
  // Short names allow one edit only: "fat" is one from "fit", "fan" two.
  EXPECT_EQ(closest_name("fat", kCommands), "fit");
  EXPECT_EQ(closest_name("fan", kCommands), "");
}

TEST(Suggest, TheClosestWins) {
  EXPECT_EQ(closest_name("resnet5", {"resnet18", "resnet50", "resnet101"}), "resnet50");
}

}  // namespace
}  // namespace memsim

namespace memsim {
namespace {

TEST(Suggest, NotForNumbers) { EXPECT_EQ(closest_name("17", {"11", "13", "16", "19"}), ""); }

}  // namespace
}  // namespace memsim
