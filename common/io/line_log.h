// Append-only logs of one record per line (steps.jsonl, metrics.jsonl,
// eval.jsonl). A writer killed in the middle of a line leaves the line cut
// short; a later writer that appended after it would glue its first record
// onto the torn one, making a line that no reader can parse. So every
// writer ends the file with a whole line before it appends.

#ifndef TESSERA_COMMON_IO_LINE_LOG_H_
#define TESSERA_COMMON_IO_LINE_LOG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

// Cuts a torn last line (bytes after the file's last '\n') off the file at
// `path`, and returns how many bytes it cut (0 when the file ends with a
// whole line, is empty or is missing). The torn line is a record its writer
// never finished; the record before it is kept. Files that are not regular
// (a pipe, /dev/full) are left alone. Errors name the file and the system
// call's reason.
absl::StatusOr<int64_t> CutTornLastLine(const std::string& path);

// Appends `line` and its '\n' to the file at `path` (created if missing)
// in one write, after CutTornLastLine. `line` must not hold a '\n'.
absl::Status AppendWholeLine(const std::string& path, absl::string_view line);

}  // namespace tessera

#endif  // TESSERA_COMMON_IO_LINE_LOG_H_
