#include "data/inflate_cache/inflated_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/io/crc32c.h"
#include "data/io/gz_file.h"
#include "glog/logging.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// zlib's gzip magic: the first two bytes of every gzip member.
bool IsGzip(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f);
  std::fclose(f);
  return got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// Holds an exclusive flock on a file for its lifetime.
class FileLock {
 public:
  explicit FileLock(const std::string& path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  bool held() const { return fd_ >= 0; }

 private:
  int fd_;
};

// Inflates `from` into `to` (a new file). Errors name `from`.
absl::Status Inflate(const std::string& from, const std::string& to) {
  absl::StatusOr<gzFile> in = OpenGzFile(from, "rb");
  if (!in.ok()) return in.status();
  std::FILE* out = std::fopen(to.c_str(), "wb");
  if (out == nullptr) {
    gzclose(*in);
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", to));
  }
  std::vector<char> buffer(1 << 20);
  absl::Status status;
  while (true) {
    const int n = gzread(*in, buffer.data(), buffer.size());
    if (n < 0) {
      int errnum = 0;
      status =
          absl::DataLossError(absl::StrCat(from, ": ", gzerror(*in, &errnum)));
      break;
    }
    if (n == 0) {
      // A stream cut short ends like a whole one, with Z_BUF_ERROR set.
      int errnum = Z_OK;
      const char* why = gzerror(*in, &errnum);
      if (errnum != Z_OK) {
        status = absl::DataLossError(absl::StrCat(from, ": ", why));
      }
      break;
    }
    if (std::fwrite(buffer.data(), 1, n, out) != static_cast<size_t>(n)) {
      status = absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", to));
      break;
    }
  }
  gzclose(*in);
  if (std::fclose(out) != 0 && status.ok()) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", to));
  }
  return status;
}

}  // namespace

std::string InflatedFiles::DefaultDir() {
  const char* tmp = std::getenv("TMPDIR");
  return absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                      "/tessera-inflated-", ::getuid());
}

std::string InflatedFiles::PathFor(const std::string& path) const {
  if (dir_.empty() || path.empty()) return path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return path;
  if (!IsGzip(path)) return path;
  std::error_code ec;
  const std::string absolute = fs::absolute(path, ec).lexically_normal();
  const std::string key =
      absl::StrCat(absolute, "\n", st.st_size, "\n", st.st_mtim.tv_sec, ".",
                   st.st_mtim.tv_nsec);
  std::string name = fs::path(path).filename().string();
  if (absl::EndsWith(name, ".gz")) name.resize(name.size() - 3);
  const std::string entry_dir =
      absl::StrFormat("%s/%08x-%d", dir_, crc32c::Value(key.data(), key.size()),
                      static_cast<long long>(st.st_size));
  const std::string entry = absl::StrCat(entry_dir, "/", name);
  if (fs::is_regular_file(entry, ec)) return entry;

  fs::create_directories(entry_dir, ec);
  if (ec) {
    LOG(WARNING) << "cannot make the inflated data folder " << entry_dir << " ("
                 << ec.message() << "); reading " << path << " as it is";
    return path;
  }
  fs::permissions(dir_, fs::perms::owner_all, ec);
  FileLock lock(absl::StrCat(entry, ".lock"));
  if (!lock.held()) {
    LOG(WARNING) << "cannot lock " << entry << ".lock; reading " << path
                 << " as it is";
    return path;
  }
  // Another worker may have inflated it while this one waited.
  if (fs::is_regular_file(entry, ec)) return entry;
  const std::string part = absl::StrCat(entry, ".part.", ::getpid());
  absl::Status s = Inflate(path, part);
  if (s.ok() && ::rename(part.c_str(), entry.c_str()) != 0) {
    s = absl::ErrnoToStatus(errno, absl::StrCat("cannot rename ", part));
  }
  if (!s.ok()) {
    fs::remove(part, ec);
    LOG(WARNING) << "could not inflate " << path << " into " << entry << " ("
                 << s.message() << "); reading it as it is";
    return path;
  }
  LOG(INFO) << "inflated " << path << " into " << entry
            << " for the workers of this machine";
  return entry;
}

DataConfig InflatedFiles::Rewrite(const DataConfig& data) const {
  DataConfig out = data;
  if (dir_.empty() || data.train_files_size() > 0 ||
      data.test_files_size() > 0) {
    return out;
  }
  out.set_train_images(PathFor(data.train_images()));
  out.set_train_labels(PathFor(data.train_labels()));
  out.set_test_images(PathFor(data.test_images()));
  out.set_test_labels(PathFor(data.test_labels()));
  out.set_train_path(PathFor(data.train_path()));
  out.set_test_path(PathFor(data.test_path()));
  return out;
}

}  // namespace tessera
