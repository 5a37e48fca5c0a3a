#include "worker/export/table_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tessera {
namespace {

absl::Status WriteTable(const TrainedVariable& v, const std::string& path) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  const int64_t dim = v.shape[1];
  const int64_t rows = static_cast<int64_t>(v.values.size()) / dim;
  std::string line;
  char buf[32];
  for (int64_t r = 0; r < rows; ++r) {
    line.clear();
    absl::StrAppend(&line, v.vocab_size > 0 ? r : v.ids[r], "\t");
    for (int64_t d = 0; d < dim; ++d) {
      std::snprintf(buf, sizeof(buf), d == 0 ? "%.9g" : " %.9g",
                    v.values[r * dim + d]);
      line += buf;
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), f);
  }
  const bool ok = !std::ferror(f);
  if (std::fclose(f) != 0 || !ok ||
      std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::DataLossError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
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
