// IDX files for worker tests, written into a folder of the test's own.

#ifndef TESSERA_TESTS_WORKER_DATA_IDX_TEST_FILES_H_
#define TESSERA_TESTS_WORKER_DATA_IDX_TEST_FILES_H_

#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tessera {
namespace idx_test {

using Bytes = std::vector<uint8_t>;

// An IDX file: magic (two zero bytes, `type`, rank), big-endian dimensions,
// then `data` as it is.
inline Bytes IdxBytes(uint8_t type, const std::vector<uint32_t>& dims,
                      const Bytes& data) {
  Bytes out = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    out.insert(out.end(),
               {static_cast<uint8_t>(d >> 24), static_cast<uint8_t>(d >> 16),
                static_cast<uint8_t>(d >> 8), static_cast<uint8_t>(d)});
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// An IDX file of unsigned bytes.
inline Bytes Ubyte(const std::vector<uint32_t>& dims, const Bytes& data) {
  return IdxBytes(0x08, dims, data);
}

// A fixture whose every test has its own empty folder, per process too
// (ctest runs the cases of one binary as parallel processes).
class IdxFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* test =
        ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = absl::StrCat(::testing::TempDir(), "/", test->test_suite_name(), "_",
                        getpid(), "_", test->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WritePlain(const std::string& name, const Bytes& bytes) {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path;
  }

  std::string WriteGz(const std::string& name, const Bytes& bytes) {
    const std::string path = absl::StrCat(dir_, "/", name);
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(gzwrite(f, bytes.data(), bytes.size()),
              static_cast<int>(bytes.size()));
    gzclose(f);
    return path;
  }

  std::string dir_;
};

}  // namespace idx_test
}  // namespace tessera

#endif  // TESSERA_TESTS_WORKER_DATA_IDX_TEST_FILES_H_
