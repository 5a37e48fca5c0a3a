#ifndef TESSERA_COMMON_EVENT_FILE_READER_H_
#define TESSERA_COMMON_EVENT_FILE_READER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/tensorboard.pb.h"

namespace tessera {

// Reads every event of a TensorBoard event file (as EventFileWriter or
// TensorFlow writes them), checking each record's CRCs. DataLoss, naming
// the file and byte offset, when a record is cut short, a CRC does not
// match or a record is not an Event.
absl::StatusOr<std::vector<tensorboard::Event>> ReadEventFile(
    const std::string& path);

// The event files ("*tfevents*") directly in `dir`, sorted by name (the
// order TensorBoard reads them in).
absl::StatusOr<std::vector<std::string>> ListEventFiles(const std::string& dir);

}  // namespace tessera

#endif  // TESSERA_COMMON_EVENT_FILE_READER_H_
