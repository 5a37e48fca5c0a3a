#include "data/count_cache/verified_count_cache.h"

#include <sys/stat.h>

namespace tessera {

bool VerifiedCountCache::VersionOf(const std::string& path, Version* version) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  version->size = static_cast<int64_t>(st.st_size);
  version->mtime_ns =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  version->device = static_cast<uint64_t>(st.st_dev);
  version->inode = static_cast<uint64_t>(st.st_ino);
  return true;
}

absl::StatusOr<int64_t> VerifiedCountCache::Count(
    const std::string& path,
    const std::function<absl::StatusOr<int64_t>()>& count) {
  Version before;
  const bool known = VersionOf(path, &before);
  if (known) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(path);
    if (it != entries_.end() && it->second.version == before) {
      ++hits_;
      return it->second.count;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    ++misses_;
  }
  absl::StatusOr<int64_t> counted = count();
  if (!counted.ok() || !known) return counted;
  // A file rewritten while it was read may have been counted half old,
  // half new: such a count is returned but not kept.
  Version after;
  if (!VersionOf(path, &after) || !(after == before)) return counted;
  absl::MutexLock lock(&mu_);
  entries_[path] = Entry{before, *counted};
  return counted;
}

int64_t VerifiedCountCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

int64_t VerifiedCountCache::misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}

}  // namespace tessera
