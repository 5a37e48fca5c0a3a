// The formats a job's data can be in (DataConfig.format in
// proto/job.proto) and what follows from each: code asks a property
// (IsStreamed) or compares with the enum, never with a format's name.
#ifndef TESSERA_COMMON_DATA_FORMAT_H_
#define TESSERA_COMMON_DATA_FORMAT_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

enum class DataFormat {
  kIdx,       // MNIST-style IDX image and label files, loaded whole
  kCriteo,    // Criteo TSV click logs (train and test), loaded whole
  kTfRecord,  // TFRecord files of tf.train.Example, streamed
  kCsv,       // CSV files, streamed
};

// "idx", "criteo", "tfrecord" or "csv": the name a job file gives.
const char* DataFormatName(DataFormat format);

// The format a job file names `name`; nullopt for any other name.
std::optional<DataFormat> DataFormatNamed(absl::string_view name);

// DataFormatNamed, or InvalidArgument naming `name` and every format.
absl::StatusOr<DataFormat> ParseDataFormat(absl::string_view name);

// Read record by record from shards of files that are assigned to the
// workers (tfrecord, csv), rather than loaded whole by every worker (idx,
// criteo).
bool IsStreamed(DataFormat format);

// IsStreamed of the format named `name`; false for a name that is none.
bool IsStreamedFormat(absl::string_view name);

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_FORMAT_H_
