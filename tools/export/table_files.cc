#include "tools/export/table_files.h"

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/io/atomic_file.h"

namespace tessera {
namespace {

// The table as text, then written as one file that a crash leaves whole
// (old or new), with common/io/atomic_file's errors.
absl::Status WriteTable(const TrainedVariable& v, const std::string& path) {
  const int64_t dim = v.shape[1];
  const int64_t rows = static_cast<int64_t>(v.values.size()) / dim;
  std::string text;
  char buf[32];
  for (int64_t r = 0; r < rows; ++r) {
    absl::StrAppend(&text, v.vocab_size > 0 ? r : v.ids[r], "\t");
    for (int64_t d = 0; d < dim; ++d) {
      std::snprintf(buf, sizeof(buf), d == 0 ? "%.9g" : " %.9g",
                    v.values[r * dim + d]);
      text += buf;
    }
    text += '\n';
  }
  return WriteFileAtomically(path, text);
}

}  // namespace

absl::Status WriteTableFiles(const TrainedModel& model,
                             const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", dir, ": ", error.message()));
  }
  for (const TrainedVariable& v : model.variables) {
    if (!v.table) continue;
    // A table name is a variable name, which may hold '/'.
    const std::string name = absl::StrReplaceAll(v.name, {{"/", "_"}});
    if (absl::Status s = WriteTable(v, absl::StrCat(dir, "/", name, ".tsv"));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
