#include "common/data_format.h"

#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(DataFormatTest, EveryFormatIsNamedAndParsedBack) {
  for (DataFormat format : {DataFormat::kIdx, DataFormat::kCriteo,
                            DataFormat::kTfRecord, DataFormat::kCsv}) {
    absl::StatusOr<DataFormat> parsed = ParseDataFormat(DataFormatName(format));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, format);
  }
}

TEST(DataFormatTest, OnlyTfRecordAndCsvAreStreamed) {
  EXPECT_TRUE(IsStreamed(DataFormat::kTfRecord));
  EXPECT_TRUE(IsStreamed(DataFormat::kCsv));
  EXPECT_FALSE(IsStreamed(DataFormat::kIdx));
  EXPECT_FALSE(IsStreamed(DataFormat::kCriteo));
  EXPECT_TRUE(IsStreamedFormat("csv"));
  EXPECT_FALSE(IsStreamedFormat("criteo"));
  EXPECT_FALSE(IsStreamedFormat("parquet"));
  EXPECT_FALSE(IsStreamedFormat(""));
}

TEST(DataFormatTest, AnUnknownNameIsRefusedWithTheKnownOnes) {
  EXPECT_FALSE(DataFormatNamed("TFRecord").has_value());
  absl::StatusOr<DataFormat> parsed = ParseDataFormat("parquet");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(parsed.status().message());
  EXPECT_NE(message.find("\"parquet\""), std::string::npos) << message;
  EXPECT_NE(message.find("idx, criteo, tfrecord and csv"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace tessera
