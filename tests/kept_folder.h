#ifndef TESSERA_TESTS_KEPT_FOLDER_H_
#define TESSERA_TESTS_KEPT_FOLDER_H_

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/kept_key.h"
#include "tests/shell_command.h"

namespace tessera {

// A folder of input files (converted data) that the cases of a test binary
// share, written once per build of the test executable and of `tool` (a
// path under the build folder) rather than once per case process: CTest
// runs each case in a process of its own and CI repeats the fault label.
// `job` must name everything that decides the files besides those two
// (the tool's flags). `fill` writes them into the folder it is given and
// returns whether it succeeded; only a filled folder is kept, renamed
// whole into place, so a case never reads part of one. A process that
// fills it at the same time as another and renames second removes its own
// copy and uses the first's (the same files). When `fill` fails, its
// partial folder is returned (the case fails on it) and never kept.
inline std::filesystem::path KeptFolder(
    const std::string& job, const std::string& tool,
    const std::function<bool(const std::filesystem::path&)>& fill) {
  namespace fs = std::filesystem;
  const fs::path kept =
      fs::path(::testing::TempDir()) /
      KeptKey("tessera_kept_folder_", job, {fs::path(BuildDir() + tool)});
  if (fs::is_directory(kept)) return kept;
  const fs::path part = absl::StrCat(kept.string(), ".", getpid());
  std::error_code error;
  fs::remove_all(part, error);
  fs::create_directories(part);
  if (!fill(part)) return part;
  fs::rename(part, kept, error);
  if (!error) return kept;
  // Another process renamed its folder into place first.
  if (fs::is_directory(kept)) {
    fs::remove_all(part, error);
    return kept;
  }
  return part;
}

}  // namespace tessera

#endif  // TESSERA_TESTS_KEPT_FOLDER_H_
