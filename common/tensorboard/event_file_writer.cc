#include "common/tensorboard/event_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/io/tf_record.h"
#include "common/tensorboard/summary_histogram.h"

namespace tessera {
namespace {

constexpr char kFileVersion[] = "brain.Event:2";
// Past this many name collisions in one second something else is wrong.
constexpr int kMaxNameSuffix = 1000;

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "localhost";
  }
  return name;
}

}  // namespace

double EventWallTime() {
  return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(
    const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat(
        "event file: cannot create folder ", dir, ": ", ec.message()));
  }
  const std::string base =
      absl::StrCat(dir, "/events.out.tfevents.",
                   absl::ToUnixSeconds(absl::Now()), ".", HostName());
  for (int n = 0; n <= kMaxNameSuffix; ++n) {
    const std::string path = n == 0 ? base : absl::StrCat(base, ".", n);
    // O_EXCL: two writers started in the same second never share a file.
    const int fd =
        open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat(
          "event file: cannot create ", path, ": ", std::strerror(errno)));
    }
    std::FILE* file = fdopen(fd, "wb");
    if (file == nullptr) {
      const int err = errno;
      close(fd);
      return absl::UnavailableError(absl::StrCat(
          "event file: cannot open ", path, ": ", std::strerror(err)));
    }
    std::unique_ptr<EventFileWriter> writer(new EventFileWriter(path, file));
    tensorboard::Event event;
    event.set_file_version(kFileVersion);
    if (absl::Status s = writer->WriteEvent(std::move(event)); !s.ok()) {
      return s;
    }
    if (absl::Status s = writer->Flush(); !s.ok()) return s;
    return writer;
  }
  return absl::AlreadyExistsError(
      absl::StrCat("event file: ", base, " and ", kMaxNameSuffix,
                   " numbered variants exist already"));
}

EventFileWriter::EventFileWriter(std::string path, std::FILE* file)
    : path_(std::move(path)), file_(file) {}

EventFileWriter::~EventFileWriter() {
  absl::MutexLock lock(&mu_);
  std::fclose(file_);
}

absl::Status EventFileWriter::AddScalar(absl::string_view tag, int64_t step,
                                        float value) {
  tensorboard::Event event;
  event.set_step(step);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(value);
  return WriteEvent(std::move(event));
}

absl::Status EventFileWriter::AddHistogram(absl::string_view tag, int64_t step,
                                           absl::Span<const double> values) {
  absl::StatusOr<tensorboard::HistogramProto> histogram =
      HistogramOfValues(values);
  if (!histogram.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(tag, ": ", histogram.status().message()));
  }
  return AddHistogram(tag, step, *histogram);
}

absl::Status EventFileWriter::AddHistogram(
    absl::string_view tag, int64_t step,
    const tensorboard::HistogramProto& histogram) {
  if (absl::Status s = ValidateHistogram(histogram); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(tag, ": ", s.message()));
  }
  tensorboard::Event event;
  event.set_step(step);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  *v->mutable_histo() = histogram;
  return WriteEvent(std::move(event));
}

absl::Status EventFileWriter::WriteEvent(tensorboard::Event event) {
  if (event.wall_time() == 0) event.set_wall_time(EventWallTime());
  std::string data;
  if (!event.SerializeToString(&data)) {
    return absl::InternalError(
        absl::StrCat("event file ", path_, ": cannot serialize an event"));
  }
  absl::MutexLock lock(&mu_);
  return WriteRecordLocked(data);
}

absl::Status EventFileWriter::WriteRecordLocked(const std::string& data) {
  if (!error_.ok()) return error_;
  std::string record;
  record.reserve(data.size() + kTfRecordHeaderBytes + kTfRecordFooterBytes);
  AppendTfRecord(data, &record);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    error_ = absl::UnavailableError(absl::StrCat(
        "event file ", path_, ": write failed: ", std::strerror(errno)));
  }
  return error_;
}

absl::Status EventFileWriter::Flush() {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (std::fflush(file_) != 0) {
    error_ = absl::UnavailableError(absl::StrCat(
        "event file ", path_, ": flush failed: ", std::strerror(errno)));
  }
  return error_;
}

}  // namespace tessera
