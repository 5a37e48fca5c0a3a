#include "common/io/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(Crc32c, StandardCheckValue) {
  // The check value of CRC-32C for "123456789" (RFC 3720, iSCSI).
  EXPECT_EQ(crc32c::Value("123456789", 9), 0xE3069283u);
}

TEST(Crc32c, KnownVectorsFromRfc3720) {
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c::Value(zeros.data(), zeros.size()), 0x8A9136AAu);
  std::string ones(32, '\xff');
  EXPECT_EQ(crc32c::Value(ones.data(), ones.size()), 0x62A8AB43u);
}

TEST(Crc32c, ExtendEqualsValueOfConcatenation) {
  const std::string a = "hello ", b = "world";
  EXPECT_EQ(
      crc32c::Extend(crc32c::Value(a.data(), a.size()), b.data(), b.size()),
      crc32c::Value("hello world", 11));
}

TEST(Crc32c, MaskRoundTripsAndChangesTheValue) {
  const uint32_t crc = crc32c::Value("foo", 3);
  EXPECT_NE(crc32c::Mask(crc), crc);
  EXPECT_EQ(crc32c::Unmask(crc32c::Mask(crc)), crc);
}

}  // namespace
}  // namespace tessera
