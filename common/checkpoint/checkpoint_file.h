// One checkpoint file: a stream of named entries, each holding one or more
// typed arrays (a dense shard's values and each optimizer slot; a hash
// table's int64 ids, its rows and their slots), checksummed per entry and
// as a whole. Parameter servers write their shards in this format and the
// coordinator its manifest (common/checkpoint/checkpoint_dir.h). No gRPC or
// protobuf dependency, so fuzzers and tools can link it alone.
//
// Format (integers little-endian):
//   file   := header entry* footer
//   header := "TSRACKPT" | u32 version (1) | u32 masked crc32c(previous 12)
//   entry  := u32 meta_len | meta | u32 masked crc32c(meta_len, meta)
//             | data | u32 masked crc32c(data)
//   meta   := u16 name_len | name | u16 num_arrays | array*
//   array  := u16 key_len | key | u8 dtype | u8 rank | i64 dims[rank]
//   data   := the arrays' bytes, in order, row-major
//   footer := u64 num_entries | u32 masked crc32c(every byte before this
//             field) | "TSRAEND!"
// A reader checks every length against the bytes left before the footer
// before it allocates or reads, so garbage cannot make it allocate more than
// the file holds.
//
// Errors: every error message starts with "checkpoint <label>: " where the
// label is the file's last two path components ("ckpt-0000000120/ps-1.shards")
// and names the entry and byte offset where it applies. A truncated or
// corrupt file is DataLoss; a newer format version is Unimplemented; a
// missing file is NotFound; I/O failures keep their errno-derived code;
// misuse of the writer is FailedPrecondition or InvalidArgument.
//
// Thread safety: a writer or reader is used by one thread at a time.
#ifndef TESSERA_COMMON_CHECKPOINT_FILE_H_
#define TESSERA_COMMON_CHECKPOINT_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tessera {

// Element types. The first three have tensor.proto's DataType numbers.
// The 2-byte floats are an fp16/bf16 table's values as the server stores
// them (IEEE binary16; the upper half of a float), so such a checkpoint
// keeps the table's bits at half the size; they have no C++ type here, and
// are written and read as raw bytes (ReadArray(int, absl::Span<char>)).
enum class CheckpointDtype : uint8_t {
  kFloat32 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kUint8 = 4,  // raw bytes, e.g. a serialized protobuf
  kFloat16 = 5,
  kBFloat16 = 6,
};

// Bytes per element; 0 for a value that is not a CheckpointDtype.
size_t CheckpointDtypeSize(CheckpointDtype dtype);
absl::string_view CheckpointDtypeName(CheckpointDtype dtype);

template <typename T>
constexpr CheckpointDtype CheckpointDtypeOf() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, int32_t> ||
                    std::is_same_v<T, int64_t> || std::is_same_v<T, uint8_t> ||
                    std::is_same_v<T, char>,
                "no checkpoint dtype for this type");
  if constexpr (std::is_same_v<T, float>) return CheckpointDtype::kFloat32;
  if constexpr (std::is_same_v<T, int32_t>) return CheckpointDtype::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return CheckpointDtype::kInt64;
  return CheckpointDtype::kUint8;
}

// Limits a writer enforces and a reader checks.
inline constexpr size_t kMaxCheckpointNameBytes = 4096;
inline constexpr size_t kMaxCheckpointKeyBytes = 256;
inline constexpr size_t kMaxCheckpointArrays = 256;
inline constexpr size_t kMaxCheckpointRank = 8;
inline constexpr uint32_t kCheckpointFormatVersion = 1;

// One array of an entry: its key within the entry ("values", "ids",
// "slot/m"), element type and shape.
struct CheckpointArrayInfo {
  std::string key;
  CheckpointDtype dtype = CheckpointDtype::kFloat32;
  std::vector<int64_t> dims;

  int64_t num_elements() const;
  // num_elements() * CheckpointDtypeSize(dtype).
  int64_t byte_size() const;
};

struct CheckpointEntryInfo {
  std::string name;
  std::vector<CheckpointArrayInfo> arrays;
  // Offset of the entry's first byte in the file, for messages.
  int64_t offset = 0;

  // Index of the array named `key`, or -1.
  int FindArray(absl::string_view key) const;
  int64_t data_bytes() const;
};

// What a finished or verified file is: the manifest records both, so a
// checkpoint names the exact files it was made of.
struct CheckpointFileSummary {
  int64_t size_bytes = 0;
  uint32_t crc32c = 0;  // unmasked CRC32C of every byte before the footer CRC
  int64_t num_entries = 0;
};

// An array with its bytes, for writing from memory.
struct CheckpointArrayView {
  CheckpointArrayInfo info;
  absl::string_view bytes;  // exactly info.byte_size() bytes

  template <typename T>
  static CheckpointArrayView Of(std::string key, absl::Span<const T> values,
                                std::vector<int64_t> dims) {
    return CheckpointArrayView{
        {std::move(key), CheckpointDtypeOf<T>(), std::move(dims)},
        absl::string_view(reinterpret_cast<const char*>(values.data()),
                          values.size() * sizeof(T))};
  }
};

// Writes a checkpoint file under "<path>.tmp-<pid>" and, in Finish(), flushes,
// fsyncs and renames it to `path`, then fsyncs the directory, so `path`
// either does not exist or holds a complete file. A writer destroyed before
// Finish() succeeds removes its temporary file. Data passes through a 1 MiB
// buffer; larger appends go straight to the file, so writing a 1 GB shard
// does not copy it in memory.
class CheckpointWriter {
 public:
  // Creates the temporary file; the directory must exist.
  static absl::StatusOr<std::unique_ptr<CheckpointWriter>> Create(
      const std::string& path);

  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  ~CheckpointWriter();

  // Starts an entry with these arrays, whose bytes then follow through
  // Append(), in array order. REQUIRES: no entry is open. InvalidArgument
  // for an empty or too long name or key, a repeated key, too many arrays,
  // a negative dimension or a size that overflows 64 bits.
  absl::Status BeginEntry(absl::string_view name,
                          std::vector<CheckpointArrayInfo> arrays);
  // Appends data of the open entry; may be called any number of times with
  // pieces of any size. FailedPrecondition past the declared size.
  absl::Status Append(absl::string_view bytes);
  // Closes the entry. FailedPrecondition unless exactly the declared bytes
  // were appended.
  absl::Status EndEntry();

  // BeginEntry + Append of every array + EndEntry. InvalidArgument if an
  // array's bytes do not match its shape.
  absl::Status WriteEntry(absl::string_view name,
                          absl::Span<const CheckpointArrayView> arrays);

  // Writes the footer and makes the file durable under its final name.
  // REQUIRES: no entry is open. After it, only the destructor may be called.
  absl::StatusOr<CheckpointFileSummary> Finish();

  const std::string& path() const { return path_; }

 private:
  CheckpointWriter(std::string path, std::string tmp_path, int fd);

  absl::Status Write(absl::string_view bytes);  // through the buffer
  // Write() of bytes the whole-file CRC covers directly (all but entry data,
  // which is folded in from the entry's CRC).
  absl::Status WriteCovered(absl::string_view bytes);
  absl::Status Flush();
  absl::Status IoError(absl::string_view what, int error) const;

  const std::string path_;
  const std::string tmp_path_;
  int fd_;
  std::string buffer_;
  uint32_t file_crc_ = 0;
  int64_t offset_ = 0;  // bytes written so far, buffered or not
  int64_t num_entries_ = 0;
  bool finished_ = false;
  absl::Status error_;  // the first failure; every later call returns it
  // The open entry, if any.
  bool in_entry_ = false;
  int64_t entry_remaining_ = 0;
  int64_t entry_start_ = 0;
  uint32_t entry_crc_ = 0;
  std::string entry_name_;
};

// Reads a checkpoint file entry by entry, verifying as it goes:
//
//   auto reader = CheckpointReader::Open(path);
//   while (true) {
//     absl::StatusOr<bool> more = (*reader)->Next();
//     if (!more.ok()) return more.status();
//     if (!*more) break;  // footer and whole-file CRC verified
//     const CheckpointEntryInfo& e = (*reader)->entry();
//     ... (*reader)->ReadArray(e.FindArray("values"), &values) ...
//   }
//
// Data is handed out as it is read, before the entry's CRC can be checked:
// ReadArray of an entry's last array verifies the entry's CRC, and Next()
// verifies it for arrays the caller skipped, so a caller trusts what it read
// only once the file reached its end (Next() returned false). Memory use is
// a 1 MiB buffer plus what the caller reads into.
class CheckpointReader {
 public:
  // Opens `path` and checks the header and the presence of the footer.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(
      const std::string& path);

  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;
  ~CheckpointReader();

  // Moves to the next entry, first consuming and verifying the rest of the
  // current one. Returns false, after verifying the footer's entry count and
  // whole-file CRC, when there are no more entries. After an error every
  // call returns that error.
  absl::StatusOr<bool> Next();

  // The current entry. REQUIRES: the last Next() returned true.
  const CheckpointEntryInfo& entry() const { return entry_; }

  // Reads array `index` of the current entry into dst, which must have
  // exactly its byte_size(). Arrays are read in increasing index order;
  // arrays skipped over are consumed and checksummed. FailedPrecondition for
  // an index already passed or out of range, or a size mismatch.
  absl::Status ReadArray(int index, absl::Span<char> dst);
  // As above into a vector of T resized to fit; InvalidArgument when T is
  // not the array's dtype.
  template <typename T>
  absl::Status ReadArray(int index, std::vector<T>* out);

  // Size, whole-file CRC and entry count. REQUIRES: Next() returned false.
  const CheckpointFileSummary& summary() const { return summary_; }

  // The label used in messages, e.g. "ckpt-0000000120/ps-1.shards".
  const std::string& label() const { return label_; }
  int64_t file_size() const { return file_size_; }

 private:
  CheckpointReader(std::string label, int fd, int64_t file_size);

  absl::Status ReadHeader();
  absl::Status ReadEntryMeta();
  absl::Status FinishEntry();
  absl::Status VerifyFooter();
  // Reads exactly n bytes at the current offset into dst (nullptr: discard),
  // extending the running CRC(s).
  absl::Status ReadBytes(char* dst, int64_t n, bool in_data);
  absl::Status Fail(absl::Status status);
  absl::Status Corrupt(absl::string_view what) const;
  absl::Status EntryCorrupt(absl::string_view what) const;

  const std::string label_;
  int fd_;
  const int64_t file_size_;
  const int64_t footer_offset_;
  int64_t offset_ = 0;
  uint32_t file_crc_ = 0;
  std::string buffer_;
  size_t buffer_pos_ = 0;
  absl::Status error_;
  bool done_ = false;
  bool in_entry_ = false;
  int64_t num_entries_ = 0;
  CheckpointEntryInfo entry_;
  int next_array_ = 0;     // first array of entry_ not yet consumed
  uint32_t data_crc_ = 0;  // of entry_'s data consumed so far
  CheckpointFileSummary summary_;
};

// Reads and verifies the whole file without keeping its data.
absl::StatusOr<CheckpointFileSummary> VerifyCheckpointFile(
    const std::string& path);

// An entry with its arrays' bytes in memory.
struct CheckpointEntry {
  CheckpointEntryInfo info;
  std::vector<std::string> data;  // one string per array
};

// Reads a whole file into memory; for small files (manifests, tests,
// tools). Returns nothing unless the whole file verified.
absl::StatusOr<std::vector<CheckpointEntry>> ReadCheckpointFile(
    const std::string& path);

// The CRC32C of A followed by B, from crc(A), crc(B) and len(B), without
// reading the bytes again.
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

template <typename T>
absl::Status CheckpointReader::ReadArray(int index, std::vector<T>* out) {
  if (index < 0 || index >= static_cast<int>(entry_.arrays.size())) {
    return ReadArray(index, absl::Span<char>());  // reports the bad index
  }
  const CheckpointArrayInfo& info = entry_.arrays[index];
  if (info.dtype != CheckpointDtypeOf<T>()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint ", label_, ": entry '", entry_.name, "' array '", info.key,
        "' is ", CheckpointDtypeName(info.dtype), ", not ",
        CheckpointDtypeName(CheckpointDtypeOf<T>())));
  }
  out->resize(static_cast<size_t>(info.num_elements()));
  return ReadArray(index, absl::Span<char>(reinterpret_cast<char*>(out->data()),
                                           out->size() * sizeof(T)));
}

}  // namespace tessera

#endif  // TESSERA_COMMON_CHECKPOINT_FILE_H_
