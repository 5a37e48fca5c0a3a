#include "common/data_format.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

constexpr DataFormat kFormats[] = {DataFormat::kIdx, DataFormat::kCriteo,
                                   DataFormat::kTfRecord, DataFormat::kCsv};

}  // namespace

const char* DataFormatName(DataFormat format) {
  switch (format) {
    case DataFormat::kIdx:
      return "idx";
    case DataFormat::kCriteo:
      return "criteo";
    case DataFormat::kTfRecord:
      return "tfrecord";
    case DataFormat::kCsv:
      return "csv";
  }
  return "unknown";
}

std::optional<DataFormat> DataFormatNamed(absl::string_view name) {
  for (DataFormat format : kFormats) {
    if (name == DataFormatName(format)) return format;
  }
  return std::nullopt;
}

absl::StatusOr<DataFormat> ParseDataFormat(absl::string_view name) {
  if (std::optional<DataFormat> format = DataFormatNamed(name)) return *format;
  return absl::InvalidArgumentError(absl::StrCat(
      "data format \"", name, "\" is none of idx, criteo, tfrecord and csv"));
}

bool IsStreamed(DataFormat format) {
  return format == DataFormat::kTfRecord || format == DataFormat::kCsv;
}

bool IsStreamedFormat(absl::string_view name) {
  std::optional<DataFormat> format = DataFormatNamed(name);
  return format.has_value() && IsStreamed(*format);
}

}  // namespace tessera
