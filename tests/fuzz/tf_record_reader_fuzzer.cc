// Fuzzes the TFRecord file reader (plain, gzip and zlib, detected from the
// bytes) through a memory file: reading every record, skipping and counting
// must agree, and never crash or over-allocate.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "data/records/tf_record_file_reader.h"
#include "tests/fuzz/memfd_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::fuzz::MemFile file(data, size);
  auto reader = tessera::TfRecordFileReader::Open(file.path());
  if (!reader.ok()) return 0;
  int64_t read = 0;
  absl::string_view record;
  bool clean = true;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) {
      // Only a data CRC error lets reading go on.
      if ((*reader)->index() != read + 1) {
        clean = false;
        break;
      }
      ++read;
      continue;
    }
    if (!*more) break;
    if (record.size() > size * 1100 + 64) std::abort();
    ++read;
  }
  auto skipper = tessera::TfRecordFileReader::Open(file.path());
  if (!skipper.ok()) std::abort();
  absl::StatusOr<int64_t> skipped = (*skipper)->Skip(1 << 20);
  // Skipping checks less than reading: it never finds fewer records in a
  // file that reads cleanly.
  if (clean && skipped.ok() && *skipped != read) std::abort();
  return 0;
}
