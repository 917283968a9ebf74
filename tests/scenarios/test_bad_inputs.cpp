// Every file under tests/bad_inputs/ is refused by `memsim validate` with exit code 1 and
// exactly the message in its .expected file: file, line, column, key, expected, found.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

std::vector<std::string> bad_inputs() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(fs::path(MEMSIM_SOURCE_DIR) / "tests/bad_inputs"))
    if (e.path().extension() != ".expected") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class BadInput : public ::testing::TestWithParam<std::string> {};

TEST_P(BadInput, RefusedWithItsExactMessage) {
  const std::string file = "tests/bad_inputs/" + GetParam();
  const fs::path expected_path =
      fs::path(MEMSIM_SOURCE_DIR) / fs::path(file).replace_extension(".expected");
  ASSERT_TRUE(fs::exists(expected_path)) << "no .expected file for " << file;
  CliResult r = run_memsim("validate " + file);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, slurp(expected_path.string()));
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(All, BadInput, ::testing::ValuesIn(bad_inputs()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(BadInputs, TheRequiredKindsAreAllThere) {
  const auto names = bad_inputs();
  for (const char* required : {"wrong_unit.yaml", "unknown_key.yaml", "missing_key.yaml",
                               "negative_capacity.yaml", "malformed.yaml", "unknown_buffer.json",
                               "cyclic.json"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
}

}  // namespace
