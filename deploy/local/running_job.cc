#include "deploy/local/running_job.h"

#include <errno.h>
#include <signal.h>
#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace tessera {
namespace {

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Canonical(const std::string& path) {
  std::error_code error;
  std::filesystem::path canonical =
      std::filesystem::weakly_canonical(path, error);
  return error ? path : canonical.string();
}

// Whether `pid` runs (and is no zombie: a coordinator that has exited but
// whose launcher has not reaped it yet ended the job just the same).
bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  const std::string stat = ReadWhole(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return true;
  const char state = stat[paren + 2];
  return state != 'Z' && state != 'X';
}

// False when `pid`'s command line is readable and names another run folder
// than `run_dir` in --run_dir (or none): the pid was given to another
// process since.
bool RunsIn(pid_t pid, const std::string& run_dir) {
  const std::string cmdline =
      ReadWhole(absl::StrCat("/proc/", pid, "/cmdline"));
  if (cmdline.empty()) return true;  // Not ours to read: cannot tell.
  const std::string wanted = Canonical(run_dir);
  for (absl::string_view arg : absl::StrSplit(cmdline, '\0')) {
    if (absl::ConsumePrefix(&arg, "--run_dir=") &&
        Canonical(std::string(arg)) == wanted) {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::Status CheckJobRunning(const std::string& run_dir) {
  const std::string pid_file = run_dir + "/pids/chief-0";
  const std::string text = ReadWhole(pid_file);
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) || pid <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--join: ", pid_file, " holds no coordinator's pid: the job of ",
        run_dir,
        " has not started its coordinator, or it is no tessera_local run "
        "folder; nothing was started"));
  }
  if (!Alive(pid) || !RunsIn(pid, run_dir)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--join: the job of ", run_dir,
        " is not running (its coordinator, pid ", pid,
        ", has exited): the job ended, so there is nothing to join; "
        "nothing was started"));
  }
  return absl::OkStatus();
}

}  // namespace tessera
