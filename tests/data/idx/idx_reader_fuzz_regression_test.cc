// Reading across the reader's first 64 KiB chunk, added when
// tests/fuzz/idx_reader_fuzzer showed that a tiny corrupt file declaring
// gigabytes made every read reserve 64 MiB and zero 16 MiB.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/idx/idx_reader.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using Bytes = std::vector<uint8_t>;

class IdxReaderFuzzRegressionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        absl::StrCat(::testing::TempDir(), "/idx_fuzz_regression_", getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // An unsigned-byte IDX file of `items` items of 1000 bytes declaring
  // `declared` items.
  std::string Write(uint32_t declared, size_t items) {
    Bytes bytes = {0, 0, 8, 2};
    for (uint32_t d : {declared, 1000u}) {
      bytes.insert(
          bytes.end(),
          {static_cast<uint8_t>(d >> 24), static_cast<uint8_t>(d >> 16),
           static_cast<uint8_t>(d >> 8), static_cast<uint8_t>(d)});
    }
    for (size_t i = 0; i < items * 1000; ++i) {
      bytes.push_back(static_cast<uint8_t>(i * 31 + i / 1000));
    }
    const std::string path = absl::StrCat(dir_, "/f", declared, "_", items);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path;
  }

  std::string dir_;
};

TEST_F(IdxReaderFuzzRegressionTest, ReadsAcrossTheFirstChunk) {
  for (size_t items : {65u, 66u, 200u}) {  // 65 000 .. 200 000 bytes
    absl::StatusOr<IdxArray> a = ReadIdx(Write(items, items));
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_EQ(a->data.size(), items * 1000);
    for (size_t i = 0; i < a->data.size(); i += 997) {
      ASSERT_EQ(a->data[i], static_cast<uint8_t>(i * 31 + i / 1000)) << i;
    }
  }
}

TEST_F(IdxReaderFuzzRegressionTest, HugeDeclarationOverShortDataIsDataLoss) {
  for (size_t items : {0u, 3u, 100u}) {
    const std::string path = Write(4000000, items);
    absl::StatusOr<IdxArray> a = ReadIdx(path);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(a.status().message(),
              absl::StrCat(path,
                           ": truncated: expected 4000000000 bytes of data "
                           "for 4000000 items, got ",
                           items * 1000));
  }
}

}  // namespace
}  // namespace tessera
