// Fashion-MNIST as TFRecord files, converted once per build for the fault
// and elastic tests (which stream them), and a job file that streams them.
#ifndef TESSERA_TESTS_KEPT_TFRECORDS_H_
#define TESSERA_TESTS_KEPT_TFRECORDS_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/kept_folder.h"
#include "tests/shell_command.h"

namespace tessera {

// Converts with tessera_to_tfrecord's `train_flags` and `test_flags` into
// a kept folder (tests/kept_folder.h; files train-* and test-*), writes
// beside it a job file of `model` (a `model { ... }` text) streaming them,
// and returns the flags that make a job use it (" --job_file=...").
// Beside the kept folder, so that the flags (and the kept undisturbed runs
// they name) are the same in every case process.
inline std::string KeptTfRecordJob(const std::string& train_flags,
                                   const std::string& test_flags,
                                   const std::string& model) {
  namespace fs = std::filesystem;
  const std::string convert = "/worker/tessera_to_tfrecord";
  const fs::path data =
      KeptFolder(train_flags + test_flags, convert, [&](const fs::path& into) {
        ShellResult train =
            Shell(absl::StrCat(BuildDir(), convert, train_flags,
                               " --prefix=", (into / "train").string()));
        ShellResult test =
            Shell(absl::StrCat(BuildDir(), convert, test_flags,
                               " --prefix=", (into / "test").string()));
        EXPECT_EQ(train.exit_code, 0) << train.output;
        EXPECT_EQ(test.exit_code, 0) << test.output;
        return train.exit_code == 0 && test.exit_code == 0;
      });
  const fs::path job = data.string() + ".job.textproto";
  const fs::path part = absl::StrCat(job.string(), ".", getpid());
  std::ofstream(part) << absl::StrCat(
      model, "data { format: \"tfrecord\" train_files: \"",
      (data / "train").string(), "-*\" test_files: \"",
      (data / "test").string(), "-*\" label_feature: \"label\" }\n");
  std::error_code error;
  fs::rename(part, job, error);
  EXPECT_FALSE(error) << error.message();
  return absl::StrCat(" --job_file=", job.string());
}

}  // namespace tessera

#endif  // TESSERA_TESTS_KEPT_TFRECORDS_H_
