#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_file.h"
#include "common/checkpoint/checkpoint_format.h"
#include "common/io/crc32c.h"

namespace tessera {
namespace {

using checkpoint_internal::ArraysProblem;
using checkpoint_internal::GetFixed;
using checkpoint_internal::IsValidDtype;
using checkpoint_internal::kBufferBytes;
using checkpoint_internal::kEnforceCrcs;
using checkpoint_internal::kFooterBytes;
using checkpoint_internal::kFooterMagic;
using checkpoint_internal::kHeaderBytes;
using checkpoint_internal::kHeaderMagic;
using checkpoint_internal::kMaxMetaBytes;
using checkpoint_internal::LabelOf;
using checkpoint_internal::NameProblem;

// Parses an entry's metadata; every failure says what is wrong.
class MetaParser {
 public:
  explicit MetaParser(absl::string_view meta) : rest_(meta) {}

  bool ReadU8(uint8_t* v) { return ReadFixed(v); }
  bool ReadU16(uint16_t* v) { return ReadFixed(v); }
  bool ReadI64(int64_t* v) { return ReadFixed(v); }
  bool ReadBytes(size_t n, std::string* out) {
    if (rest_.size() < n) return false;
    out->assign(rest_.data(), n);
    rest_.remove_prefix(n);
    return true;
  }
  bool done() const { return rest_.empty(); }

 private:
  template <typename T>
  bool ReadFixed(T* v) {
    if (rest_.size() < sizeof(T)) return false;
    *v = GetFixed<T>(rest_.data());
    rest_.remove_prefix(sizeof(T));
    return true;
  }

  absl::string_view rest_;
};
}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    const std::string& path) {
  std::string label = LabelOf(path);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return absl::ErrnoToStatus(
        error, absl::StrCat("checkpoint ", label, ": cannot open ", path));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    close(fd);
    return absl::ErrnoToStatus(
        error, absl::StrCat("checkpoint ", label, ": cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", label, ": ", path, " is not a file"));
  }
  std::unique_ptr<CheckpointReader> reader(
      new CheckpointReader(std::move(label), fd, st.st_size));
  if (absl::Status s = reader->ReadHeader(); !s.ok()) return s;
  return reader;
}

CheckpointReader::CheckpointReader(std::string label, int fd, int64_t file_size)
    : label_(std::move(label)),
      fd_(fd),
      file_size_(file_size),
      footer_offset_(file_size - kFooterBytes) {}

CheckpointReader::~CheckpointReader() { close(fd_); }

absl::Status CheckpointReader::Fail(absl::Status status) {
  error_ = status;
  return status;
}

absl::Status CheckpointReader::Corrupt(absl::string_view what) const {
  return absl::DataLossError(absl::StrCat("checkpoint ", label_, ": ", what));
}

absl::Status CheckpointReader::EntryCorrupt(absl::string_view what) const {
  return Corrupt(absl::StrCat("entry '", absl::CHexEscape(entry_.name), "' ",
                              what, " (entry at offset ", entry_.offset, ")"));
}

absl::Status CheckpointReader::ReadBytes(char* dst, int64_t n, bool in_data) {
  while (n > 0) {
    if (buffer_pos_ == buffer_.size()) {
      const int64_t left = file_size_ - offset_;
      if (left <= 0) {
        return Fail(Corrupt(
            absl::StrCat("unexpected end of file at offset ", offset_)));
      }
      // Large reads into the caller's memory skip the buffer.
      if (dst != nullptr && n >= static_cast<int64_t>(kBufferBytes)) {
        const ssize_t got = pread(fd_, dst, static_cast<size_t>(n), offset_);
        if (got < 0) {
          const int error = errno;
          if (error == EINTR) continue;
          return Fail(
              absl::ErrnoToStatus(error, absl::StrCat("checkpoint ", label_,
                                                      ": read error at "
                                                      "offset ",
                                                      offset_)));
        }
        if (got == 0) {
          return Fail(Corrupt(
              absl::StrCat("file shrank while reading, at offset ", offset_)));
        }
        if (in_data)
          data_crc_ = crc32c::Extend(data_crc_, dst, got);
        else
          file_crc_ = crc32c::Extend(file_crc_, dst, got);
        dst += got;
        n -= got;
        offset_ += got;
        continue;
      }
      buffer_.resize(static_cast<size_t>(
          std::min<int64_t>(left, static_cast<int64_t>(kBufferBytes))));
      const ssize_t got = pread(fd_, buffer_.data(), buffer_.size(), offset_);
      if (got < 0) {
        const int error = errno;
        buffer_.clear();
        buffer_pos_ = 0;
        if (error == EINTR) continue;
        return Fail(
            absl::ErrnoToStatus(error, absl::StrCat("checkpoint ", label_,
                                                    ": read error at "
                                                    "offset ",
                                                    offset_)));
      }
      buffer_.resize(static_cast<size_t>(got));
      buffer_pos_ = 0;
      if (got == 0) {
        return Fail(Corrupt(
            absl::StrCat("file shrank while reading, at offset ", offset_)));
      }
    }
    const int64_t take = std::min<int64_t>(
        n, static_cast<int64_t>(buffer_.size() - buffer_pos_));
    const char* src = buffer_.data() + buffer_pos_;
    if (in_data)
      data_crc_ = crc32c::Extend(data_crc_, src, take);
    else
      file_crc_ = crc32c::Extend(file_crc_, src, take);
    if (dst != nullptr) {
      std::memcpy(dst, src, static_cast<size_t>(take));
      dst += take;
    }
    buffer_pos_ += static_cast<size_t>(take);
    offset_ += take;
    n -= take;
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::ReadHeader() {
  if (file_size_ < static_cast<int64_t>(sizeof(kHeaderMagic))) {
    return Fail(Corrupt(absl::StrCat("truncated: the file has ", file_size_,
                                     " bytes, fewer than its 8-byte magic")));
  }
  char header[kHeaderBytes];
  const int64_t header_bytes = std::min(file_size_, kHeaderBytes);
  if (absl::Status s = ReadBytes(header, header_bytes, false); !s.ok()) {
    return s;
  }
  if (std::memcmp(header, kHeaderMagic, sizeof(kHeaderMagic)) != 0) {
    return Fail(Corrupt(absl::StrCat(
        "not a checkpoint file: bad magic \"",
        absl::CHexEscape(absl::string_view(header, sizeof(kHeaderMagic))),
        "\"")));
  }
  if (file_size_ < kHeaderBytes + kFooterBytes) {
    return Fail(Corrupt(absl::StrCat("truncated: the file has ", file_size_,
                                     " bytes, fewer than a header and footer "
                                     "(",
                                     kHeaderBytes + kFooterBytes, ")")));
  }
  const uint32_t version = GetFixed<uint32_t>(header + 8);
  const uint32_t stored = crc32c::Unmask(GetFixed<uint32_t>(header + 12));
  if (kEnforceCrcs && crc32c::Value(header, 12) != stored) {
    return Fail(Corrupt("header CRC mismatch (offset 0)"));
  }
  if (version != kCheckpointFormatVersion) {
    return Fail(absl::UnimplementedError(
        absl::StrCat("checkpoint ", label_, ": format version ", version,
                     "; this build reads version ", kCheckpointFormatVersion)));
  }
  // The header bytes are part of the whole-file CRC; ReadBytes already
  // extended file_crc_ with them. The footer's magic is checked up front so
  // that a truncated file is named as such before any entry is parsed.
  char magic[sizeof(kFooterMagic)];
  const ssize_t got = pread(fd_, magic, sizeof(magic),
                            file_size_ - static_cast<int64_t>(sizeof(magic)));
  if (got != static_cast<ssize_t>(sizeof(magic)) ||
      std::memcmp(magic, kFooterMagic, sizeof(magic)) != 0) {
    return Fail(Corrupt(
        absl::StrCat("truncated or damaged: no footer at the end of its ",
                     file_size_, " bytes")));
  }
  return absl::OkStatus();
}

namespace {

// An entry's header (its name and arrays) into *info; what is malformed
// about it, empty when nothing is.
std::string ParseEntryMeta(const std::string& meta, CheckpointEntryInfo* info) {
  MetaParser parser(meta);
  uint16_t name_len = 0;
  uint16_t num_arrays = 0;
  if (!parser.ReadU16(&name_len) || !parser.ReadBytes(name_len, &info->name) ||
      !parser.ReadU16(&num_arrays)) {
    return "malformed header (name)";
  }
  for (uint16_t i = 0; i < num_arrays; ++i) {
    CheckpointArrayInfo a;
    uint16_t key_len = 0;
    uint8_t dtype = 0;
    uint8_t rank = 0;
    if (!parser.ReadU16(&key_len) || !parser.ReadBytes(key_len, &a.key) ||
        !parser.ReadU8(&dtype) || !parser.ReadU8(&rank)) {
      return absl::StrCat("malformed header (array #", i, ")");
    }
    if (!IsValidDtype(dtype)) {
      return absl::StrCat("array #", i, " has unknown dtype code ",
                          static_cast<int>(dtype));
    }
    a.dtype = static_cast<CheckpointDtype>(dtype);
    if (rank > kMaxCheckpointRank) {
      return absl::StrCat("array #", i, " has rank ", static_cast<int>(rank),
                          ", more than ", kMaxCheckpointRank);
    }
    a.dims.resize(rank);
    for (uint8_t d = 0; d < rank; ++d) {
      if (!parser.ReadI64(&a.dims[d])) {
        return absl::StrCat("malformed header (array #", i, " dims)");
      }
    }
    info->arrays.push_back(std::move(a));
  }
  if (!parser.done()) return "malformed header (trailing bytes)";
  return "";
}

}  // namespace

absl::Status CheckpointReader::ReadEntryMeta() {
  const int64_t start = offset_;
  const int64_t index = num_entries_;
  auto bad = [&](absl::string_view what) {
    return Fail(Corrupt(
        absl::StrCat("entry #", index, " at offset ", start, ": ", what)));
  };
  int64_t left = footer_offset_ - offset_;
  if (left < 8) {
    return bad(absl::StrCat("only ", left,
                            " bytes before the footer, too few for an entry"));
  }
  char len_bytes[4];
  if (absl::Status s = ReadBytes(len_bytes, 4, false); !s.ok()) return s;
  const uint32_t meta_len = GetFixed<uint32_t>(len_bytes);
  left -= 4;
  // The metadata, its CRC and the data CRC must fit before the footer.
  if (meta_len > kMaxMetaBytes || meta_len > left - 8) {
    return bad(absl::StrCat("header length ", meta_len, " exceeds the ",
                            std::max<int64_t>(left - 8, 0),
                            " bytes left before the footer"));
  }
  std::string meta(meta_len, '\0');
  if (absl::Status s = ReadBytes(meta.data(), meta_len, false); !s.ok()) {
    return s;
  }
  char crc_bytes[4];
  if (absl::Status s = ReadBytes(crc_bytes, 4, false); !s.ok()) return s;
  uint32_t crc = crc32c::Value(len_bytes, 4);
  crc = crc32c::Extend(crc, meta.data(), meta.size());
  if (kEnforceCrcs && crc != crc32c::Unmask(GetFixed<uint32_t>(crc_bytes))) {
    return bad("header CRC mismatch");
  }
  // The CRC matched, so a malformed header was written that way: still
  // reported, never trusted.
  CheckpointEntryInfo info;
  info.offset = start;
  if (std::string malformed = ParseEntryMeta(meta, &info); !malformed.empty()) {
    return bad(malformed);
  }
  std::string problem =
      NameProblem("the entry name", info.name, kMaxCheckpointNameBytes);
  int64_t data_bytes = 0;
  if (problem.empty()) problem = ArraysProblem(info.arrays, &data_bytes);
  if (!problem.empty()) {
    return bad(absl::StrCat("'", absl::CHexEscape(info.name), "': ", problem));
  }
  left = footer_offset_ - offset_;
  if (data_bytes > left - 4) {
    return bad(absl::StrCat("'", absl::CHexEscape(info.name), "' declares ",
                            data_bytes, " data bytes but only ",
                            std::max<int64_t>(left - 4, 0),
                            " are left before the footer"));
  }
  entry_ = std::move(info);
  next_array_ = 0;
  data_crc_ = 0;
  in_entry_ = true;
  ++num_entries_;
  return absl::OkStatus();
}

absl::Status CheckpointReader::FinishEntry() {
  // Consume the arrays the caller did not read.
  for (; next_array_ < static_cast<int>(entry_.arrays.size()); ++next_array_) {
    if (absl::Status s =
            ReadBytes(nullptr, entry_.arrays[next_array_].byte_size(), true);
        !s.ok()) {
      return s;
    }
  }
  const int64_t data_bytes = entry_.data_bytes();
  file_crc_ =
      Crc32cCombine(file_crc_, data_crc_, static_cast<uint64_t>(data_bytes));
  char crc_bytes[4];
  if (absl::Status s = ReadBytes(crc_bytes, 4, false); !s.ok()) return s;
  in_entry_ = false;
  if (kEnforceCrcs &&
      data_crc_ != crc32c::Unmask(GetFixed<uint32_t>(crc_bytes))) {
    return Fail(EntryCorrupt("data CRC mismatch"));
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::VerifyFooter() {
  char count_bytes[8];
  if (absl::Status s = ReadBytes(count_bytes, 8, false); !s.ok()) return s;
  const uint64_t count = GetFixed<uint64_t>(count_bytes);
  char crc_bytes[4];
  const uint32_t computed = file_crc_;
  if (absl::Status s = ReadBytes(crc_bytes, 4, false); !s.ok()) return s;
  if (kEnforceCrcs &&
      computed != crc32c::Unmask(GetFixed<uint32_t>(crc_bytes))) {
    return Fail(
        Corrupt(absl::StrCat("whole-file CRC mismatch (footer at "
                             "offset ",
                             footer_offset_, ")")));
  }
  if (count != static_cast<uint64_t>(num_entries_)) {
    return Fail(
        Corrupt(absl::StrCat("the footer records ", count,
                             " entries but the file holds ", num_entries_)));
  }
  done_ = true;
  summary_.size_bytes = file_size_;
  summary_.crc32c = computed;
  summary_.num_entries = num_entries_;
  return absl::OkStatus();
}

absl::StatusOr<bool> CheckpointReader::Next() {
  if (!error_.ok()) return error_;
  if (done_) return false;
  if (in_entry_) {
    if (absl::Status s = FinishEntry(); !s.ok()) return s;
  }
  if (offset_ == footer_offset_) {
    if (absl::Status s = VerifyFooter(); !s.ok()) return s;
    return false;
  }
  if (absl::Status s = ReadEntryMeta(); !s.ok()) return s;
  return true;
}

absl::Status CheckpointReader::ReadArray(int index, absl::Span<char> dst) {
  if (!error_.ok()) return error_;
  const std::string where = absl::StrCat("checkpoint ", label_, ": entry '",
                                         absl::CHexEscape(entry_.name), "'");
  if (num_entries_ == 0 || done_) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", label_, ": ReadArray with no entry"));
  }
  if (index < 0 || index >= static_cast<int>(entry_.arrays.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " has no array #", index, "; it has ", entry_.arrays.size()));
  }
  const CheckpointArrayInfo& info = entry_.arrays[index];
  if (!in_entry_ || index < next_array_) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " array '", info.key, "' was already read or skipped"));
  }
  if (static_cast<int64_t>(dst.size()) != info.byte_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, " array '", info.key, "' has ", info.byte_size(),
                     " bytes; the destination has ", dst.size()));
  }
  for (; next_array_ < index; ++next_array_) {
    if (absl::Status s =
            ReadBytes(nullptr, entry_.arrays[next_array_].byte_size(), true);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ReadBytes(dst.data(), info.byte_size(), true); !s.ok()) {
    return s;
  }
  ++next_array_;
  // With the last array read the entry's CRC can be checked now, so a caller
  // reading every array learns of corruption before it uses the data.
  if (next_array_ == static_cast<int>(entry_.arrays.size())) {
    return FinishEntry();
  }
  return absl::OkStatus();
}
}  // namespace tessera
