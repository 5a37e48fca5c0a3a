#include "tests/skip_unless_required.h"

#include <cstdlib>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

// What a test whose data is missing does.
void TestWithoutItsData() {
  TESSERA_SKIP_UNLESS_REQUIRED(kRequireData) << "/nowhere is not installed";
  ADD_FAILURE() << "not reached";
}

TEST(SkipUnlessRequiredTest, RequiredDataThatIsMissingFailsTheTest) {
  ::setenv(kRequireData, "1", 1);
  EXPECT_FATAL_FAILURE(TestWithoutItsData(),
                       "TESSERA_REQUIRE_DATA=1, and this test cannot run:\n"
                       "/nowhere is not installed");
  ::unsetenv(kRequireData);
}

TEST(SkipUnlessRequiredTest, OnlyOneTurnsTheSkipIntoAFailure) {
  ::setenv(kRequireData, "0", 1);
  EXPECT_FALSE(Required(kRequireData));
  ::unsetenv(kRequireData);
  EXPECT_FALSE(Required(kRequireData));
  ::setenv(kRequireTls, "1", 1);
  EXPECT_TRUE(Required(kRequireTls));
  ::unsetenv(kRequireTls);
}

}  // namespace
}  // namespace tessera
