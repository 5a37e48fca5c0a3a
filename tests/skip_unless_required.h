// Tests that need what a machine may lack (Fashion-MNIST from Debian's
// dataset-fashion-mnist, a working openssl for TLS certificates) skip
// without it, so that a developer's partial machine still runs the rest.
// A run that must prove everything says so: TESSERA_REQUIRE_DATA=1 and
// TESSERA_REQUIRE_TLS=1 (deploy/test.sh, hence CI, sets both) turn the
// skip into a failure, so a missing package cannot pass the suite as 73
// quiet skips.
//
//   if (!fs::exists(kData)) TESSERA_SKIP_UNLESS_REQUIRED(kRequireData)
//       << kData << " is not installed";

#ifndef TESSERA_TESTS_SKIP_UNLESS_REQUIRED_H_
#define TESSERA_TESTS_SKIP_UNLESS_REQUIRED_H_

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace tessera {

inline constexpr char kRequireData[] = "TESSERA_REQUIRE_DATA";
inline constexpr char kRequireTls[] = "TESSERA_REQUIRE_TLS";

// Whether the environment variable `name` is "1".
inline bool Required(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

// The first line of the skip's (or failure's) message.
inline const char* RequiredPrefix(const char* name) {
  if (!Required(name)) return "";
  return std::strcmp(name, kRequireTls) == 0
             ? "TESSERA_REQUIRE_TLS=1, and this test cannot run:"
             : "TESSERA_REQUIRE_DATA=1, and this test cannot run:";
}

}  // namespace tessera

// Returns from the test as skipped, or as failed when `requirement` (one
// of the names above) is set; a message may be streamed into it, and goes
// with either outcome.
#define TESSERA_SKIP_UNLESS_REQUIRED(requirement)                      \
  return GTEST_MESSAGE_(::tessera::RequiredPrefix(requirement),        \
                        ::tessera::Required(requirement)               \
                            ? ::testing::TestPartResult::kFatalFailure \
                            : ::testing::TestPartResult::kSkip)

#endif  // TESSERA_TESTS_SKIP_UNLESS_REQUIRED_H_
