#include "common/tensorboard/event_file_reader.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/io/tf_record.h"

namespace tessera {

absl::StatusOr<std::vector<tensorboard::Event>> ReadEventFile(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<TfRecordReader>> reader =
      TfRecordReader::Open(path);
  if (!reader.ok()) return reader.status();
  std::vector<tensorboard::Event> events;
  std::string record;
  while (true) {
    const int64_t offset = (*reader)->offset();
    absl::Status s = (*reader)->Next(&record);
    if (absl::IsOutOfRange(s)) break;
    if (!s.ok()) return s;
    tensorboard::Event event;
    if (!event.ParseFromString(record)) {
      return absl::DataLossError(
          absl::StrCat(path, ": record at byte ", offset, " is not an Event"));
    }
    events.push_back(std::move(event));
  }
  return events;
}

absl::StatusOr<std::vector<std::string>> ListEventFiles(
    const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && absl::StrContains(name, "tfevents")) {
      files.push_back(entry.path().string());
    }
  }
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot list ", dir, ": ", ec.message()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace tessera
