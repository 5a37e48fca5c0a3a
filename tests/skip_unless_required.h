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

}  // namespace tessera

// A statement that skips the test, or fails it when `requirement` (one of
// the names above) is set; a message may be streamed into it. Braced by
// the switch, so that it is safe in an unbraced if/else.
#define TESSERA_SKIP_UNLESS_REQUIRED(requirement) \
  switch (0)                                      \
  case 0:                                         \
  default:                                        \
    if (::tessera::Required(requirement))         \
      GTEST_FAIL() << requirement << "=1: ";      \
    else                                          \
      GTEST_SKIP()

#endif  // TESSERA_TESTS_SKIP_UNLESS_REQUIRED_H_
