// Helpers shared by the checkpoint tests: a scratch directory and whole-file
// reads and writes.
#ifndef TESSERA_TESTS_COMMON_CHECKPOINT_TEST_UTIL_H_
#define TESSERA_TESTS_COMMON_CHECKPOINT_TEST_UTIL_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace testing_util {

// A fresh directory under the test's temporary directory, removed with its
// contents on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string base = ::testing::TempDir();
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    std::string pattern = base + "/ckpt_test_XXXXXX";
    const char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << pattern;
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

inline void WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

}  // namespace testing_util
}  // namespace tessera

#endif  // TESSERA_TESTS_COMMON_CHECKPOINT_TEST_UTIL_H_
