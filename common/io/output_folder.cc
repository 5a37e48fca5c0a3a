#include "common/io/output_folder.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace tessera {

absl::Status CreateOutputFolder(const std::string& folder) {
  if (folder.empty()) {
    return absl::InvalidArgumentError("no folder given (an empty path)");
  }
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    return absl::ErrnoToStatus(error.value(),
                               absl::StrCat("cannot create folder ", folder));
  }
  return absl::OkStatus();
}

absl::Status CreateParentFolder(const std::string& prefix) {
  const std::filesystem::path parent =
      std::filesystem::path(prefix).parent_path();
  if (parent.empty()) return absl::OkStatus();
  return CreateOutputFolder(parent.string());
}

}  // namespace tessera
