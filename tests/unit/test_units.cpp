#include <gtest/gtest.h>

#include "sim/core/units.h"

using namespace memsim;

TEST(Units, SizesDecimalAndBinary) {
  EXPECT_EQ(parse_bytes("512B"), 512u);
  EXPECT_EQ(parse_bytes("40GB"), 40'000'000'000u);
  EXPECT_EQ(parse_bytes("40GiB"), 40ull * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("1.5KiB"), 1536u);
  EXPECT_EQ(parse_bytes(" 2 MiB "), 2u * 1048576);
  EXPECT_EQ(parse_bytes("1TiB"), 1099511627776ull);
}

TEST(Units, RejectsMissingOrWrongUnits) {
  EXPECT_FALSE(parse_bytes("40"));
  EXPECT_FALSE(parse_bytes("40gb"));  // units are case-sensitive: gb is not GB
  EXPECT_FALSE(parse_bytes("40GB/s"));
  EXPECT_FALSE(parse_bytes("-1GiB"));
  EXPECT_FALSE(parse_bytes("1.5B"));  // no fractions of a byte
  EXPECT_FALSE(parse_bytes("eighty"));
  EXPECT_FALSE(parse_unit("5", UnitKind::time));
  EXPECT_FALSE(parse_unit("5GB", UnitKind::time));
  EXPECT_FALSE(parse_unit("19.5TFLOP", UnitKind::rate));
}

TEST(Units, BandwidthRatesTimes) {
  EXPECT_DOUBLE_EQ(*parse_unit("1555GB/s", UnitKind::bandwidth), 1555e9);
  EXPECT_DOUBLE_EQ(*parse_unit("1.5TB/s", UnitKind::bandwidth), 1.5e12);
  EXPECT_DOUBLE_EQ(*parse_unit("10GiB/s", UnitKind::bandwidth), 10.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(*parse_unit("19.5TFLOPS", UnitKind::rate), 19.5e12);
  EXPECT_DOUBLE_EQ(*parse_unit("2PFLOPS", UnitKind::rate), 2e15);
  EXPECT_DOUBLE_EQ(*parse_unit("5us", UnitKind::time), 5e-6);
  EXPECT_DOUBLE_EQ(*parse_unit("250ns", UnitKind::time), 250e-9);
  EXPECT_DOUBLE_EQ(*parse_unit("1.5ms", UnitKind::time), 1.5e-3);
  EXPECT_DOUBLE_EQ(*parse_unit("2s", UnitKind::time), 2.0);
  EXPECT_DOUBLE_EQ(*parse_unit("1e3GB/s", UnitKind::bandwidth), 1e12);
}

TEST(Units, HumanForms) {
  EXPECT_EQ(format_bytes(40.0 * 1073741824.0), "40 GiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_seconds(0.0123), "12.3 ms");
  EXPECT_EQ(format_bandwidth(31.5e9), "31.5 GB/s");
}
