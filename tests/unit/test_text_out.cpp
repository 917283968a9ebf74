// The buffered text writer: doubles printed as fmt's "{}" prints them (so switching the
// writers to it changes no output byte), CSV quoting, and files written through the buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "sim/core/text_out.h"

namespace memsim {
namespace {

std::string printed(double v) {
  std::string s;
  append_double(s, v);
  return s;
}

TEST(TextOut, DoublesAsFmtPrintsThem) {
  const double cases[] = {0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1.5, 100000.0, 1e15, 1e16, 1.2345e16,
                          9999999999999998.0, 1e-4, 1.5e-4, 9.99e-5, 1e-5, 5.13443282051282e-06,
                          123456.789, 2.5e-300, 1.7976931348623157e308, 4.9e-324, 0.001, 42.0,
                          std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (double v : cases) EXPECT_EQ(printed(v), fmt::format("{}", v)) << "value " << v;
  EXPECT_EQ(printed(std::nan("")), fmt::format("{}", std::nan("")));
}

TEST(TextOut, RandomDoublesAsFmtPrintsThem) {
  std::mt19937_64 rng(7);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    std::uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (std::isnan(v)) continue;
    ASSERT_EQ(printed(v), fmt::format("{}", v)) << "bits " << bits;
    // And the magnitudes timelines hold: seconds from nanoseconds to hours.
    const double t = std::ldexp(static_cast<double>(rng() >> 11), -static_cast<int>(rng() % 80));
    ASSERT_EQ(printed(t), fmt::format("{}", t));
    ++checked;
  }
  EXPECT_GT(checked, 100000);
}

TEST(TextOut, DoublesKeptByTheirBitsComeBackAsFormatted) {
  // Values that repeat, values whose slots collide, -0 beside 0, and the longest forms: each
  // written through DoubleTexts must read as format_double() writes it, found or not.
  DoubleTexts texts;
  std::mt19937_64 rng(11);
  std::vector<double> pool = {0.0, -0.0, 1e-4, 9.99e-5, -2.2250738585072014e-308, 1.7976931348623157e308,
                              std::numeric_limits<double>::infinity(), 4.9e-324};
  for (int i = 0; i < 3000; ++i)
    pool.push_back(std::ldexp(static_cast<double>(rng() >> 11), -static_cast<int>(rng() % 80)));
  for (int i = 0; i < 200000; ++i) {
    const double v = pool[rng() % pool.size()];
    char got[kMaxDoubleChars], want[kMaxDoubleChars];
    const std::string_view a(got, static_cast<std::size_t>(texts.format(got, v) - got));
    const std::string_view b(want, static_cast<std::size_t>(format_double(want, v) - want));
    ASSERT_EQ(a, b) << "value " << v << " at " << i;
  }
}

TEST(TextOut, IntegersAndCsvFields) {
  std::string s;
  TextOut out(s);
  out.put(std::uint64_t{18446744073709551615u}).put(',').put(std::int64_t{-5}).put(',').put(0);
  out.put(',').put_csv("plain").put(',').put_csv("a,b").put(',').put_csv("say \"hi\"");
  EXPECT_EQ(s, "18446744073709551615,-5,0,plain,\"a,b\",\"say \"\"hi\"\"\"");
}

TEST(TextOut, FileThroughTheBuffer) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("memsim-textout-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "big.csv").string();
  std::string expected;
  {
    OutputFile file(path);
    TextOut out(file);
    for (std::uint64_t i = 0; i < 300000; ++i) {  // several mebibytes: flushed many times
      out.put(i).put(',').put(static_cast<double>(i) / 7).put('\n');
      expected += fmt::format("{},{}\n", i, static_cast<double>(i) / 7);
    }
    EXPECT_FALSE(std::filesystem::exists(path)) << "visible before it is complete";
    out.finish();
  }
  std::ifstream in(path);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), expected);
  // Abandoned (an error on the way): nothing left behind, the old file untouched.
  {
    OutputFile file(path);
    TextOut out(file);
    out.put("partial");
  }
  EXPECT_EQ(std::filesystem::file_size(path), expected.size());
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memsim
