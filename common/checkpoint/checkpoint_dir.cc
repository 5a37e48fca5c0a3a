#include "common/checkpoint/checkpoint_dir.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/io/atomic_file.h"
#include "glog/logging.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr absl::string_view kDirPrefix = "ckpt-";
constexpr char kManifestEntry[] = "manifest";
constexpr char kManifestArray[] = "proto";

// ErrnoToStatus appends the errno's text itself ("Not a directory: Not a
// directory" when the message carried it too).
absl::Status FsError(const std::error_code& ec, absl::string_view what) {
  return absl::ErrnoToStatus(ec.value(), what);
}

// Whether the manifest of `dir` is present and verifies (parsing included).
bool IsComplete(const CheckpointRef& ref) {
  return ref.has_manifest &&
         ReadManifestFile(absl::StrCat(ref.path, "/", kCheckpointManifestName))
             .ok();
}

// Who wrote `file`, for errors: "ps 1", or "the workers' replica".
std::string WriterOf(const CheckpointFile& file) {
  return file.ps() == kReplicaCheckpointPs ? "the workers' replica"
                                           : absl::StrCat("ps ", file.ps());
}

}  // namespace

std::string CheckpointDirName(int64_t step) {
  return absl::StrFormat("%s%010d", kDirPrefix, step);
}

bool ParseCheckpointDirName(absl::string_view name, int64_t* step) {
  absl::string_view digits = name;
  if (!absl::ConsumePrefix(&digits, kDirPrefix) || digits.empty() ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return absl::ascii_isdigit(c); })) {
    return false;
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value)) return false;
  // Only the canonical spelling: "ckpt-120" or an extra leading zero would
  // be a second name for the same step.
  if (CheckpointDirName(value) != name) return false;
  *step = value;
  return true;
}

std::string PsCheckpointFileName(int ps_index) {
  return absl::StrCat("ps-", ps_index, ".shards");
}

absl::Status WriteManifestFile(const std::string& path,
                               const CheckpointManifest& manifest) {
  std::string bytes;
  if (!manifest.SerializeToString(&bytes)) {
    return absl::InternalError(
        absl::StrCat("cannot serialize the manifest for ", path));
  }
  absl::StatusOr<std::unique_ptr<CheckpointWriter>> writer =
      CheckpointWriter::Create(path);
  if (!writer.ok()) return writer.status();
  const CheckpointArrayView array = CheckpointArrayView::Of<char>(
      kManifestArray, bytes, {static_cast<int64_t>(bytes.size())});
  if (absl::Status s = (*writer)->WriteEntry(kManifestEntry, {array});
      !s.ok()) {
    return s;
  }
  return (*writer)->Finish().status();
}

absl::StatusOr<CheckpointManifest> ReadManifestFile(const std::string& path) {
  absl::StatusOr<std::vector<CheckpointEntry>> entries =
      ReadCheckpointFile(path);
  if (!entries.ok()) return entries.status();
  if (entries->size() != 1 || entries->front().info.name != kManifestEntry ||
      entries->front().info.arrays.size() != 1 ||
      entries->front().info.arrays[0].key != kManifestArray ||
      entries->front().info.arrays[0].dtype != CheckpointDtype::kUint8) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a manifest: expected one entry '", kManifestEntry,
        "' with one uint8 array '", kManifestArray, "'"));
  }
  CheckpointManifest manifest;
  if (!manifest.ParseFromString(entries->front().data[0])) {
    return absl::DataLossError(
        absl::StrCat(path,
                     ": the manifest does not parse as a "
                     "CheckpointManifest"));
  }
  return manifest;
}

CheckpointDir::CheckpointDir(std::string root) : root_(std::move(root)) {}

std::string CheckpointDir::PathFor(int64_t step) const {
  return absl::StrCat(root_, "/", CheckpointDirName(step));
}

absl::StatusOr<std::string> CheckpointDir::Prepare(int64_t step) const {
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint step ", step, " is negative"));
  }
  const std::string path = PathFor(step);
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return FsError(ec, absl::StrCat("cannot create ", path));
  if (fs::exists(absl::StrCat(path, "/", kCheckpointManifestName), ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat("checkpoint ", CheckpointDirName(step), " under ", root_,
                     " is already complete"));
  }
  return path;
}

absl::StatusOr<std::vector<CheckpointRef>> CheckpointDir::List() const {
  std::vector<CheckpointRef> refs;
  std::error_code ec;
  if (!fs::exists(root_, ec)) return refs;
  fs::directory_iterator it(root_, ec);
  if (ec) return FsError(ec, absl::StrCat("cannot list ", root_));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return FsError(ec, absl::StrCat("cannot list ", root_));
    CheckpointRef ref;
    if (!ParseCheckpointDirName(it->path().filename().string(), &ref.step) ||
        !it->is_directory(ec)) {
      continue;
    }
    ref.path = PathFor(ref.step);
    ref.has_manifest = fs::is_regular_file(
        absl::StrCat(ref.path, "/", kCheckpointManifestName), ec);
    refs.push_back(std::move(ref));
  }
  if (ec) return FsError(ec, absl::StrCat("cannot list ", root_));
  std::sort(refs.begin(), refs.end(),
            [](const CheckpointRef& a, const CheckpointRef& b) {
              return a.step > b.step;
            });
  return refs;
}

absl::Status CheckpointDir::Commit(const CheckpointManifest& manifest) const {
  const std::string path = PathFor(manifest.global_step());
  for (const CheckpointFile& file : manifest.files()) {
    if (file.name().empty() || file.name() == kCheckpointManifestName ||
        absl::StrContains(file.name(), "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", CheckpointDirName(manifest.global_step()),
                       ": bad file name \"", file.name(), "\" in manifest"));
    }
    const std::string file_path = absl::StrCat(path, "/", file.name());
    std::error_code ec;
    const uintmax_t size = fs::file_size(file_path, ec);
    if (ec) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", CheckpointDirName(manifest.global_step()), ": ",
          file.name(), " (", WriterOf(file), ") is not there: ", ec.message()));
    }
    if (size != static_cast<uintmax_t>(file.size_bytes())) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", CheckpointDirName(manifest.global_step()),
                       ": ", file.name(), " has ", size, " bytes; ",
                       WriterOf(file), " reported ", file.size_bytes()));
    }
  }
  if (absl::Status s = WriteManifestFile(
          absl::StrCat(path, "/", kCheckpointManifestName), manifest);
      !s.ok()) {
    return s;
  }
  // The manifest's folder is synced by its writer; the checkpoint's own
  // entry in the root must survive a power cut too, or the committed
  // checkpoint is lost with it.
  return SyncParentFolder(path);
}

absl::StatusOr<CheckpointManifest> CheckpointDir::Validate(
    const CheckpointRef& ref) const {
  const std::string name = CheckpointDirName(ref.step);
  absl::StatusOr<CheckpointManifest> manifest =
      ReadManifestFile(absl::StrCat(ref.path, "/", kCheckpointManifestName));
  if (!manifest.ok()) {
    if (absl::IsNotFound(manifest.status())) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint ", name, " is incomplete: no manifest"));
    }
    return manifest.status();
  }
  if (manifest->global_step() != ref.step) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", name, "/manifest: records global step ",
                     manifest->global_step(), ", not ", ref.step));
  }
  for (const CheckpointFile& file : manifest->files()) {
    const std::string file_path = absl::StrCat(ref.path, "/", file.name());
    absl::StatusOr<CheckpointFileSummary> summary =
        VerifyCheckpointFile(file_path);
    if (!summary.ok()) return summary.status();
    if (summary->size_bytes != file.size_bytes() ||
        summary->crc32c != file.crc32c()) {
      return absl::DataLossError(absl::StrFormat(
          "checkpoint %s/%s: has %d bytes with CRC %08x; the manifest "
          "records %d bytes with CRC %08x (a file from another attempt?)",
          name, file.name(), summary->size_bytes, summary->crc32c,
          file.size_bytes(), file.crc32c()));
    }
  }
  return manifest;
}

absl::StatusOr<ValidCheckpoint> CheckpointDir::LatestValid(
    std::vector<std::string>* rejected) const {
  absl::StatusOr<std::vector<CheckpointRef>> refs = List();
  if (!refs.ok()) return refs.status();
  for (const CheckpointRef& ref : *refs) {
    absl::StatusOr<CheckpointManifest> manifest = Validate(ref);
    if (manifest.ok()) {
      return ValidCheckpoint{ref.step, ref.path, *std::move(manifest)};
    }
    LOG(WARNING) << "Rejecting checkpoint " << ref.path << ": "
                 << manifest.status().message();
    if (rejected != nullptr) {
      rejected->push_back(std::string(manifest.status().message()));
    }
  }
  return absl::NotFoundError(
      absl::StrCat("no valid checkpoint under ", root_, " (", refs->size(),
                   " checkpoint directories, none valid)"));
}

absl::StatusOr<std::string> CheckpointDir::SetAside(
    const CheckpointRef& ref) const {
  std::error_code ec;
  std::string target = absl::StrCat(ref.path, ".rejected");
  for (int n = 2; fs::exists(target, ec); ++n) {
    target = absl::StrCat(ref.path, ".rejected-", n);
  }
  fs::rename(ref.path, target, ec);
  if (ec) {
    return FsError(ec, absl::StrCat("cannot set ", ref.path, " aside"));
  }
  if (absl::Status s = SyncParentFolder(target); !s.ok()) {
    LOG(WARNING) << "setting " << ref.path << " aside may not survive a "
                 << "power cut: " << s;
  }
  LOG(WARNING) << "Set checkpoint " << ref.path << " aside as " << target;
  return target;
}

namespace {

// The name of the first entry of checkpoint folder `path` that no
// checkpoint writes (a manifest, "ps-N.shards", the workers' replica, or
// a temporary file of one), or "" when there is none.
std::string ForeignEntry(const std::string& path) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    const absl::string_view base =
        absl::string_view(name).substr(0, name.find(".tmp-"));
    const bool ours =
        e.is_regular_file(ec) &&
        (base == kCheckpointManifestName ||
         base == kReplicaCheckpointFileName ||
         (absl::StartsWith(base, "ps-") && absl::EndsWith(base, ".shards")));
    if (!ours) return name;
  }
  return ec ? "(unreadable)" : "";
}

}  // namespace

absl::Status CheckpointDir::KeepLast(int keep) const {
  if (keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep ", keep, " checkpoints: must be at least 1"));
  }
  absl::StatusOr<std::vector<CheckpointRef>> refs = List();
  if (!refs.ok()) return refs.status();
  int complete = 0;
  for (const CheckpointRef& ref : *refs) {
    const bool is_complete = IsComplete(ref);
    // Newer than every complete checkpoint: possibly being written.
    if (complete == 0 && !is_complete) continue;
    if (is_complete && complete < keep) {
      ++complete;
      continue;
    }
    // A folder holding anything a checkpoint does not write is the user's
    // (or a mistake's): it is left alone, said once, never deleted.
    if (const std::string foreign = ForeignEntry(ref.path); !foreign.empty()) {
      LOG(WARNING) << "Not deleting " << ref.path << ": it holds \"" << foreign
                   << "\", which no checkpoint writes";
      continue;
    }
    // The manifest goes first, so a deletion cut short leaves an incomplete
    // checkpoint rather than a complete-looking one missing files.
    std::error_code ec;
    fs::remove(absl::StrCat(ref.path, "/", kCheckpointManifestName), ec);
    if (ec) return FsError(ec, absl::StrCat("cannot delete ", ref.path));
    fs::remove_all(ref.path, ec);
    if (ec) return FsError(ec, absl::StrCat("cannot delete ", ref.path));
    LOG(INFO) << "Deleted checkpoint " << ref.path;
  }
  return absl::OkStatus();
}

}  // namespace tessera
