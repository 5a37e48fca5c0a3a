#include "deploy/build_root.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

bool IsFile(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

// The binaries' folders in a build tree (each CMakeLists.txt's).
std::string BuildTreeFolder(const std::string& name) {
  if (name == "tessera_ps") return "ps_server";
  if (name == "tessera_worker") return "worker";
  if (name == "tessera_coordinator") return "coordinator";
  if (name == "tessera_evaluator") return "worker/evaluate";
  return "";
}

}  // namespace

absl::StatusOr<std::string> BuildRootOfThisLauncher() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error) {
    return absl::InternalError(absl::StrCat(
        "cannot read /proc/self/exe: ", error.message(), "; pass --bin_dir"));
  }
  if (IsFile(exe.parent_path() / "tessera_worker")) {
    return exe.parent_path().string();
  }
  return exe.parent_path().parent_path().parent_path().string();
}

std::string BinaryUnder(const std::string& root, const std::string& name) {
  const fs::path flat = fs::path(root) / name;
  const std::string folder = BuildTreeFolder(name);
  if (IsFile(flat) || folder.empty()) return flat.string();
  return (fs::path(root) / folder / name).string();
}

}  // namespace tessera
