// How a test that needs a GPU leaves when none answers: it skips, saying
// why, unless TESSERA_REQUIRE_GPU=1, where the missing GPU is a failure
// (a GPU CI machine whose driver or GPU cannot run the build's kernels
// must not report green while skipping every GPU test).

#ifndef TESSERA_TESTS_GPU_TEST_UTIL_H_
#define TESSERA_TESTS_GPU_TEST_UTIL_H_

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace tessera {

inline bool GpuRequired() {
  const char* v = std::getenv("TESSERA_REQUIRE_GPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace tessera

// Skips (or, with TESSERA_REQUIRE_GPU=1, fails) the current test and
// returns, streaming the reason after it: TESSERA_NO_GPU() << "why";
#define TESSERA_NO_GPU()                                                      \
  return GTEST_MESSAGE_(                                                      \
      ::tessera::GpuRequired() ? "TESSERA_REQUIRE_GPU=1, but no GPU can run " \
                                 "this test"                                  \
                               : "",                                          \
      ::tessera::GpuRequired() ? ::testing::TestPartResult::kFatalFailure     \
                               : ::testing::TestPartResult::kSkip)

#endif  // TESSERA_TESTS_GPU_TEST_UTIL_H_
