#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_file.h"
#include "common/checkpoint/checkpoint_format.h"
#include "common/io/atomic_file.h"
#include "common/io/crc32c.h"

namespace tessera {
namespace {

using checkpoint_internal::ArraysProblem;
using checkpoint_internal::EncodeFixed32;
using checkpoint_internal::kBufferBytes;
using checkpoint_internal::kFooterMagic;
using checkpoint_internal::kHeaderMagic;
using checkpoint_internal::LabelOf;
using checkpoint_internal::NameProblem;
using checkpoint_internal::PutFixed;

std::string EncodeMeta(absl::string_view name,
                       const std::vector<CheckpointArrayInfo>& arrays) {
  std::string meta;
  PutFixed(static_cast<uint16_t>(name.size()), &meta);
  meta.append(name.data(), name.size());
  PutFixed(static_cast<uint16_t>(arrays.size()), &meta);
  for (const CheckpointArrayInfo& a : arrays) {
    PutFixed(static_cast<uint16_t>(a.key.size()), &meta);
    meta.append(a.key);
    PutFixed(static_cast<uint8_t>(a.dtype), &meta);
    PutFixed(static_cast<uint8_t>(a.dims.size()), &meta);
    for (int64_t d : a.dims) PutFixed(d, &meta);
  }
  return meta;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointWriter>> CheckpointWriter::Create(
    const std::string& path) {
  std::string tmp_path = absl::StrCat(path, ".tmp-", getpid());
  const int fd =
      open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int error = errno;
    return absl::ErrnoToStatus(
        error, absl::StrCat("checkpoint ", LabelOf(path), ": cannot create ",
                            tmp_path));
  }
  std::unique_ptr<CheckpointWriter> writer(
      new CheckpointWriter(path, std::move(tmp_path), fd));
  std::string header(kHeaderMagic, sizeof(kHeaderMagic));
  PutFixed(kCheckpointFormatVersion, &header);
  PutFixed(crc32c::Mask(crc32c::Value(header.data(), header.size())), &header);
  if (absl::Status s = writer->WriteCovered(header); !s.ok()) return s;
  return writer;
}

CheckpointWriter::CheckpointWriter(std::string path, std::string tmp_path,
                                   int fd)
    : path_(std::move(path)), tmp_path_(std::move(tmp_path)), fd_(fd) {
  buffer_.reserve(kBufferBytes);
}

CheckpointWriter::~CheckpointWriter() {
  if (fd_ >= 0) close(fd_);
  if (!finished_) unlink(tmp_path_.c_str());
}

absl::Status CheckpointWriter::IoError(absl::string_view what,
                                       int error) const {
  return absl::ErrnoToStatus(
      error, absl::StrCat("checkpoint ", LabelOf(path_), ": ", what));
}

absl::Status CheckpointWriter::Flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return error_ = IoError(absl::StrCat("cannot write ", tmp_path_), errno);
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  return absl::OkStatus();
}

absl::Status CheckpointWriter::Write(absl::string_view bytes) {
  offset_ += static_cast<int64_t>(bytes.size());
  if (buffer_.size() + bytes.size() <= kBufferBytes) {
    buffer_.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  if (absl::Status s = Flush(); !s.ok()) return s;
  if (bytes.size() < kBufferBytes) {
    buffer_.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  // Large pieces go straight to the file rather than through the buffer.
  while (!bytes.empty()) {
    const ssize_t n = write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return error_ = IoError(absl::StrCat("cannot write ", tmp_path_), errno);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status CheckpointWriter::WriteCovered(absl::string_view bytes) {
  if (absl::Status s = Write(bytes); !s.ok()) return s;
  file_crc_ = crc32c::Extend(file_crc_, bytes.data(), bytes.size());
  return absl::OkStatus();
}

absl::Status CheckpointWriter::BeginEntry(
    absl::string_view name, std::vector<CheckpointArrayInfo> arrays) {
  if (!error_.ok()) return error_;
  const std::string label = LabelOf(path_);
  if (finished_ || in_entry_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", label, ": BeginEntry('", absl::CHexEscape(name),
        "') while ", finished_ ? "finished" : "an entry is open"));
  }
  std::string problem =
      NameProblem("the entry name", name, kMaxCheckpointNameBytes);
  int64_t total = 0;
  if (problem.empty()) problem = ArraysProblem(arrays, &total);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", label, ": entry '", absl::CHexEscape(name),
                     "': ", problem));
  }
  const std::string meta = EncodeMeta(name, arrays);
  std::string head = EncodeFixed32(static_cast<uint32_t>(meta.size()));
  head.append(meta);
  PutFixed(crc32c::Mask(crc32c::Value(head.data(), head.size())), &head);
  if (absl::Status s = WriteCovered(head); !s.ok()) return s;
  entry_start_ = offset_;
  in_entry_ = true;
  entry_name_ = std::string(name);
  entry_remaining_ = total;
  entry_crc_ = 0;
  return absl::OkStatus();
}

absl::Status CheckpointWriter::Append(absl::string_view bytes) {
  if (!error_.ok()) return error_;
  if (!in_entry_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", LabelOf(path_), ": Append with no entry open"));
  }
  if (static_cast<int64_t>(bytes.size()) > entry_remaining_) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", LabelOf(path_), ": entry '", entry_name_,
                     "': ", bytes.size(), " bytes appended but only ",
                     entry_remaining_, " remain of the declared arrays"));
  }
  if (absl::Status s = Write(bytes); !s.ok()) return s;
  entry_crc_ = crc32c::Extend(entry_crc_, bytes.data(), bytes.size());
  entry_remaining_ -= static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::Status CheckpointWriter::EndEntry() {
  if (!error_.ok()) return error_;
  if (!in_entry_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", LabelOf(path_), ": EndEntry with no entry open"));
  }
  if (entry_remaining_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", LabelOf(path_), ": entry '", entry_name_,
        "' ended with ", entry_remaining_, " declared bytes not appended"));
  }
  // The data went into entry_crc_ only; fold it into the file's CRC without
  // a second pass over the bytes.
  file_crc_ = Crc32cCombine(file_crc_, entry_crc_,
                            static_cast<uint64_t>(offset_ - entry_start_));
  const std::string crc = EncodeFixed32(crc32c::Mask(entry_crc_));
  if (absl::Status s = WriteCovered(crc); !s.ok()) return s;
  in_entry_ = false;
  ++num_entries_;
  return absl::OkStatus();
}

absl::Status CheckpointWriter::WriteEntry(
    absl::string_view name, absl::Span<const CheckpointArrayView> arrays) {
  std::vector<CheckpointArrayInfo> infos;
  infos.reserve(arrays.size());
  for (const CheckpointArrayView& a : arrays) infos.push_back(a.info);
  int64_t total = 0;
  if (!ArraysProblem(infos, &total).empty()) {
    return BeginEntry(name, std::move(infos));  // reports the problem
  }
  // Checked before anything is written, so a mismatch leaves the file as it
  // was.
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (static_cast<int64_t>(arrays[i].bytes.size()) != infos[i].byte_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", LabelOf(path_), ": entry '", absl::CHexEscape(name),
          "' array '", absl::CHexEscape(infos[i].key), "' has ",
          arrays[i].bytes.size(), " bytes; its shape needs ",
          infos[i].byte_size()));
    }
  }
  if (absl::Status s = BeginEntry(name, std::move(infos)); !s.ok()) return s;
  for (const CheckpointArrayView& a : arrays) {
    if (absl::Status s = Append(a.bytes); !s.ok()) return s;
  }
  return EndEntry();
}

absl::StatusOr<CheckpointFileSummary> CheckpointWriter::Finish() {
  if (!error_.ok()) return error_;
  const std::string label = LabelOf(path_);
  if (finished_ || in_entry_) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", label, ": Finish() while ",
                     finished_ ? "already finished" : "an entry is open"));
  }
  std::string count;
  PutFixed(static_cast<uint64_t>(num_entries_), &count);
  if (absl::Status s = WriteCovered(count); !s.ok()) return s;
  std::string tail = EncodeFixed32(crc32c::Mask(file_crc_));
  tail.append(kFooterMagic, sizeof(kFooterMagic));
  if (absl::Status s = Write(tail); !s.ok()) return s;
  if (absl::Status s = Flush(); !s.ok()) return s;
  if (fsync(fd_) != 0) {
    return error_ = IoError(absl::StrCat("cannot fsync ", tmp_path_), errno);
  }
  const int rc = close(fd_);
  fd_ = -1;
  if (rc != 0) {
    return error_ = IoError(absl::StrCat("cannot close ", tmp_path_), errno);
  }
  if (rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return error_ = IoError(
               absl::StrCat("cannot rename ", tmp_path_, " to ", path_), errno);
  }
  finished_ = true;
  // The rename is durable only once the directory is synced.
  if (absl::Status s = SyncParentFolder(path_); !s.ok()) {
    return error_ = absl::Status(
               s.code(), absl::StrCat("checkpoint ", label, ": ", s.message()));
  }
  CheckpointFileSummary summary;
  summary.size_bytes = offset_;
  summary.crc32c = file_crc_;
  summary.num_entries = num_entries_;
  return summary;
}

}  // namespace tessera
