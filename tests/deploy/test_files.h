#ifndef TESSERA_TESTS_DEPLOY_TEST_FILES_H_
#define TESSERA_TESTS_DEPLOY_TEST_FILES_H_

#include <stdlib.h>
#include <sys/types.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "deploy/local/process_group.h"

namespace tessera {
namespace deploy_testing {

// A fresh folder under /tmp, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/tessera_deploy_test.XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { system(absl::StrCat("rm -rf '", path_, "'").c_str()); }
  std::string File(absl::string_view name) const {
    return absl::StrCat(path_, "/", name);
  }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// Signals and exits are seen asynchronously: polls `predicate` for up to
// 5 s.
template <typename Predicate>
bool Eventually(Predicate predicate) {
  for (int i = 0; i < 500; ++i) {
    if (predicate()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return predicate();
}

// True once `pid` has exited (a zombie counts) or no longer exists.
inline bool IsGone(pid_t pid) {
  const std::string stat_text = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat_text.rfind(')');
  if (paren == std::string::npos) return true;
  const char state = stat_text[paren + 2];
  return state == 'Z' || state == 'X';
}

// A child that runs `script` with /bin/sh, logging to `log_path`.
inline ChildSpec Shell(const std::string& name, const std::string& script,
                       const std::string& log_path) {
  ChildSpec spec;
  spec.name = name;
  spec.binary = "/bin/sh";
  spec.args = {"-c", script};
  spec.log_path = log_path;
  return spec;
}

}  // namespace deploy_testing
}  // namespace tessera

#endif  // TESSERA_TESTS_DEPLOY_TEST_FILES_H_
