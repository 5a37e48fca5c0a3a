// Fuzzes the Criteo TSV reader (plain and gzip) through a memory file. The
// first input byte picks the format (0..3 dense and 0..3 categorical
// columns, or Criteo's 13 and 26) and a slice; a loaded data set must be
// consistent with what it declares.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "data/criteo/criteo_reader.h"
#include "tests/fuzz/memfd_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t control = data[0];
  tessera::fuzz::MemFile file(data + 1, size - 1);
  tessera::CriteoFormat format;
  if ((control & 0x80) == 0) {
    format.num_dense = control & 0x3;
    format.num_fields = (control >> 2) & 0x3;
  }
  const int64_t first = (control >> 4) & 0x1;
  const int64_t count = (control & 0x40) ? -1 : ((control >> 5) & 0x1) + 1;

  absl::StatusOr<int64_t> lines = tessera::CountCriteoExamples(file.path());
  absl::StatusOr<tessera::CtrDataset> set =
      tessera::LoadCriteo(file.path(), first, count, format);
  if (!set.ok()) return 0;
  if (set->num_dense != format.num_dense ||
      set->num_fields != format.num_fields || set->first != first ||
      (count != -1 && set->size != count) ||
      set->labels.size() != static_cast<size_t>(set->size) ||
      set->dense.size() != static_cast<size_t>(set->size * set->num_dense) ||
      set->fields.size() != static_cast<size_t>(set->num_fields)) {
    std::abort();
  }
  if (lines.ok() && first + set->size > *lines) std::abort();
  for (const tessera::CtrFieldColumn& f : set->fields) {
    if (f.offsets.size() != static_cast<size_t>(set->size) + 1 ||
        f.offsets.back() != f.ids.size()) {
      std::abort();
    }
  }
  for (float label : set->labels) {
    if (label != 0.0f && label != 1.0f) std::abort();
  }
  return 0;
}
