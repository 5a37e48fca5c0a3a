// A job as a file: the text-format JobConfig that the coordinator and the
// one-process trainer both read, and the file names a data folder holds.

#ifndef TESSERA_COMMON_JOB_FILE_H_
#define TESSERA_COMMON_JOB_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"

namespace tessera {

// Reads a job from a text-format JobConfig file; errors name the file,
// line and column. NotFound when the file does not exist, InvalidArgument
// when it is larger than 1 MiB (e.g. /dev/zero given by mistake).
absl::StatusOr<JobConfig> ReadJobFile(const std::string& path);

// Points `data` at the files of folder `dir`: the four IDX files of an
// MNIST-format set (*-ubyte.gz, or *-ubyte when only the gunzipped one
// exists), train.tsv and test.tsv for "criteo" (each .tsv.gz when only
// that one exists), and for the streamed formats (tfrecord, csv) the
// same file names and patterns, in `dir`. The readers tell gzip from
// plain by the file's first bytes, not by its name.
void SetDataDir(const std::string& dir, DataConfig* data);

}  // namespace tessera

#endif  // TESSERA_COMMON_JOB_FILE_H_
