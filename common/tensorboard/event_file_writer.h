#ifndef TESSERA_COMMON_EVENT_FILE_WRITER_H_
#define TESSERA_COMMON_EVENT_FILE_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "proto/tensorboard.pb.h"

namespace tessera {

// Writes a TensorBoard event file: TFRecord-framed (common/io/tf_record.h)
// tensorboard::Event messages, the first of which says file_version
// "brain.Event:2", exactly as TensorFlow's EventsWriter does. TensorBoard
// reads the folder the file is in.
//
// Records reach the file on Flush() or when the writer is destroyed (and
// when stdio's buffer fills); nothing is fsync'ed, so a crash of the
// machine may lose the last events. A reader sees whole records only up
// to the last flush.
//
// Thread safety: every method may be called from several threads at once.
class EventFileWriter {
 public:
  // Creates `dir` (and its parents) when missing and a new file
  // "events.out.tfevents.<unix seconds>.<hostname>" in it; when a file of
  // that name exists, ".1", ".2", ... is appended rather than overwriting
  // it. Writes and flushes the file_version record.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(
      const std::string& dir);

  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;
  // Flushes and closes the file.
  ~EventFileWriter();

  const std::string& path() const { return path_; }

  // One scalar summary value (TensorBoard's "scalars" tab) at `step`.
  absl::Status AddScalar(absl::string_view tag, int64_t step, float value);

  // A histogram of `values` in equal-width buckets
  // (common/tensorboard/summary_histogram.h). InvalidArgument when a value is
  // not finite; nothing is written then.
  absl::Status AddHistogram(absl::string_view tag, int64_t step,
                            absl::Span<const double> values);

  // A histogram the caller built (for example HistogramOfCounts).
  // InvalidArgument, and nothing written, when it is malformed.
  absl::Status AddHistogram(absl::string_view tag, int64_t step,
                            const tensorboard::HistogramProto& histogram);

  // Any event; wall_time is set to now when it is 0.
  absl::Status WriteEvent(tensorboard::Event event);

  // Hands everything written so far to the operating system (no fsync).
  absl::Status Flush();

 private:
  EventFileWriter(std::string path, std::FILE* file);
  absl::Status WriteRecordLocked(const std::string& data)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  std::FILE* const file_ ABSL_GUARDED_BY(mu_);
  // The first write error; every later call returns it.
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

// The wall time TensorBoard expects: seconds since the Unix epoch.
double EventWallTime();

}  // namespace tessera

#endif  // TESSERA_COMMON_EVENT_FILE_WRITER_H_
