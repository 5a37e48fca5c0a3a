// Folders for a test's files (logs, checkpoints, generated data) that go
// away when the test passes. The integration cases write tens of megabytes
// each; kept after every run, a CI run left gigabytes in /tmp and a later
// one failed on a full disk.
#ifndef TESSERA_TESTS_SCRATCH_DIR_H_
#define TESSERA_TESTS_SCRATCH_DIR_H_

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace scratch_internal {

// Removes the folders of each case when it ends, and those of the program
// when it ends; a failure keeps them, and says where, for their logs.
class ScratchDirs : public ::testing::EmptyTestEventListener {
 public:
  // The one listener of this process, appended on first use (gtest owns it
  // from then on).
  static ScratchDirs& Get() {
    static ScratchDirs* const dirs = [] {
      auto* created = new ScratchDirs;
      ::testing::UnitTest::GetInstance()->listeners().Append(created);
      return created;
    }();
    return *dirs;
  }

  void AddCase(const std::filesystem::path& dir) { case_dirs_.push_back(dir); }
  void AddProgram(const std::filesystem::path& dir) {
    program_dirs_.push_back(dir);
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    Finish(&case_dirs_, !info.result()->Failed());
  }
  void OnTestProgramEnd(const ::testing::UnitTest& test) override {
    Finish(&program_dirs_, test.Passed());
  }

 private:
  static void Finish(std::vector<std::filesystem::path>* dirs, bool passed) {
    for (const std::filesystem::path& dir : *dirs) {
      if (!passed) {
        std::fprintf(stderr, "[scratch] kept %s for the failure\n",
                     dir.c_str());
        continue;
      }
      std::error_code error;
      std::filesystem::remove_all(dir, error);
    }
    dirs->clear();
  }

  std::vector<std::filesystem::path> case_dirs_;
  std::vector<std::filesystem::path> program_dirs_;
};

inline std::filesystem::path MakeEmpty(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / name;
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace scratch_internal

// An empty folder `name` under ::testing::TempDir() for the running case
// (name it uniquely, with the process id). It is removed when the case ends
// unless the case failed. Outside a case (a suite's set-up), it lives as
// ProgramScratchDir's does.
inline std::filesystem::path ScratchDir(const std::string& name) {
  const std::filesystem::path dir = scratch_internal::MakeEmpty(name);
  auto& dirs = scratch_internal::ScratchDirs::Get();
  if (::testing::UnitTest::GetInstance()->current_test_info() != nullptr) {
    dirs.AddCase(dir);
  } else {
    dirs.AddProgram(dir);
  }
  return dir;
}

// An empty folder `name` under ::testing::TempDir() that the cases of this
// process share (data made once and kept in a static): removed when the
// test program ends unless a case failed.
inline std::filesystem::path ProgramScratchDir(const std::string& name) {
  const std::filesystem::path dir = scratch_internal::MakeEmpty(name);
  scratch_internal::ScratchDirs::Get().AddProgram(dir);
  return dir;
}

}  // namespace tessera

#endif  // TESSERA_TESTS_SCRATCH_DIR_H_
