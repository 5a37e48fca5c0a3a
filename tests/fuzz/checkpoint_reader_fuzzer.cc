// Fuzzes the checkpoint reader through a memory file. Built with
// FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, under which the reader computes
// but does not enforce CRCs, so mutations reach the length and metadata
// checks behind them (the CRC checks themselves are unit-tested). The first
// input byte picks which arrays to read, so skipping is exercised too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint_file.h"
#include "tests/fuzz/memfd_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mask = data[0];
  tessera::fuzz::MemFile file(data + 1, size - 1);

  auto all = tessera::ReadCheckpointFile(file.path());
  auto verified = tessera::VerifyCheckpointFile(file.path());
  if (all.ok() != verified.ok()) std::abort();
  if (all.ok() && static_cast<int64_t>(all->size()) != verified->num_entries) {
    std::abort();
  }

  auto reader = tessera::CheckpointReader::Open(file.path());
  if (!reader.ok()) return 0;
  int entry = 0;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next();
    if (!more.ok() || !*more) break;
    const tessera::CheckpointEntryInfo& info = (*reader)->entry();
    // Every length was checked against the file: nothing may claim more.
    if (info.data_bytes() > (*reader)->file_size()) std::abort();
    for (size_t i = 0; i < info.arrays.size(); ++i) {
      if (((mask >> ((entry + i) % 8)) & 1) == 0) continue;
      std::string bytes(static_cast<size_t>(info.arrays[i].byte_size()), '\0');
      if (!(*reader)
               ->ReadArray(static_cast<int>(i),
                           absl::Span<char>(bytes.data(), bytes.size()))
               .ok()) {
        break;
      }
    }
    ++entry;
  }
  return 0;
}
