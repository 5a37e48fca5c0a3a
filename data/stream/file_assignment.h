// Which files of a streamed data set each worker reads, as tf.data's FILE
// auto-shard policy decides it: the files, sorted by name, go round-robin
// to the shards. With fewer files than shards every shard gets an equal
// run of records instead (its slices of one or two files), so no worker
// idles.
//
// The coordinator globs and counts once (ExpandFileGlobs, CountRecords in
// record_reader.h), assigns, and sends every worker the whole assignment,
// so any worker can serve any shard's step.

#ifndef TESSERA_DATA_STREAM_FILE_ASSIGNMENT_H_
#define TESSERA_DATA_STREAM_FILE_ASSIGNMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/job.pb.h"

namespace tessera {

// The files matching `patterns` (glob(3) syntax), sorted and without
// repeats. InvalidArgument naming the pattern when one matches nothing or
// when there are no patterns; NotFound naming the folder when the pattern
// is in one that does not exist; errno's code naming the folder when one
// cannot be read.
absl::StatusOr<std::vector<std::string>> ExpandFileGlobs(
    absl::Span<const std::string> patterns);

// The records of a shard.
int64_t ShardSize(const StreamShard& shard);

// Assigns `files` (with `counts[i]` records each) to `num_shards` shards:
// round-robin whole files when there are at least as many files as
// shards, else equal record ranges (sizes differ by at most one).
// InvalidArgument when num_shards < 1 or the spans' sizes differ.
absl::StatusOr<std::vector<StreamShard>> AssignFiles(
    absl::Span<const std::string> files, absl::Span<const int64_t> counts,
    int num_shards);

// Records [begin, end) of the concatenation of `files` in order, as a
// shard: evaluation reads the test files in order, a range per step.
// OutOfRange when the range is not inside the files' records.
absl::StatusOr<StreamShard> RecordRange(absl::Span<const std::string> files,
                                        absl::Span<const int64_t> counts,
                                        int64_t begin, int64_t end);

// What a coordinator sends the workers of a streamed job
// (proto/worker_service.proto WorkerConfig.train_shards and test_files).
struct StreamedDataSet {
  std::vector<StreamShard> train_shards;  // one per worker
  std::vector<FileSlice> test_files;      // each whole: [0, its records)
  int64_t train_records = 0;
  int64_t test_records = 0;
};

// Globs `data`'s training (`train`) or test files and counts every file's
// records, as AssignStreamedData does: the files sorted, each whole as
// [0, its records). The tools that read a streamed set in file order
// (prediction, evaluation, the one-process trainer) start here.
absl::StatusOr<std::vector<FileSlice>> CountStreamedFiles(
    const DataConfig& data, bool train);

// Globs `data`'s train_files and test_files, counts every file's records
// (reading each through, files in parallel on up to one thread per core:
// gzip files are decompressed, plain TFRecord files walked by record
// lengths) and assigns the training files to
// `num_workers` shards. Errors: an empty glob, a file that cannot be read
// or counted (naming it and the bad record), a bad csv format, a shard
// left without records, or no test records.
absl::StatusOr<StreamedDataSet> AssignStreamedData(const DataConfig& data,
                                                   int num_workers);

}  // namespace tessera

#endif  // TESSERA_DATA_STREAM_FILE_ASSIGNMENT_H_
