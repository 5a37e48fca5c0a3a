#include "data/criteo/hex_id.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(HexIdTest, ParsesOneToSixteenDigitsOfEitherCase) {
  uint64_t id = 0;
  ASSERT_TRUE(ParseHexId("68fd1e64", &id));
  EXPECT_EQ(id, 0x68fd1e64u);
  ASSERT_TRUE(ParseHexId("A", &id));
  EXPECT_EQ(id, 10u);
  ASSERT_TRUE(ParseHexId("FFFFFFFFFFFFFFFF", &id));
  EXPECT_EQ(id, UINT64_MAX);
}

TEST(HexIdTest, RefusesEmptyLongOrNonHexTextAndKeepsTheOutput) {
  uint64_t id = 7;
  EXPECT_FALSE(ParseHexId("", &id));
  EXPECT_FALSE(ParseHexId("12345678901234567", &id));
  EXPECT_FALSE(ParseHexId("12g4", &id));
  EXPECT_FALSE(ParseHexId("-1", &id));
  EXPECT_EQ(id, 7u);
}

TEST(HexIdTest, WritesSixteenLowerCaseDigitsThatParseBack) {
  std::string text = "x";
  AppendHexId(0xABCDEFu, &text);
  EXPECT_EQ(text, "x0000000000abcdef");
  uint64_t id = 0;
  ASSERT_TRUE(ParseHexId(text.substr(1), &id));
  EXPECT_EQ(id, 0xABCDEFu);
}

}  // namespace
}  // namespace tessera
