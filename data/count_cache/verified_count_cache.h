// The examples counted in data files, kept per file version for the life
// of the process that counted them. Verifying a count reads the whole file
// (CountIdxItems checks that every item its header declares is there; a
// Criteo count reads every line): a worker configured again (the chief
// restarted, or probed the data before configuring it), or evaluating
// after every epoch, finds the count here instead of reading the file
// again.
//
// Contract:
//  - An entry belongs to a path and the file's version when it was
//    counted: its size, modification time, device and inode. A file
//    changed or replaced since is counted again.
//  - Only successful counts are kept; a failure is returned as the count
//    function gave it and the next call counts again. So is a count of a
//    file that changed while it was being counted, or of a path that
//    cannot be examined (the count function then reports why).
//  - One count function per path: the cache does not tell counts of the
//    same file by different readers apart.
//
// Thread safety: all methods may be called concurrently; the count
// function runs without the cache's lock held.

#ifndef TESSERA_DATA_COUNT_CACHE_VERIFIED_COUNT_CACHE_H_
#define TESSERA_DATA_COUNT_CACHE_VERIFIED_COUNT_CACHE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tessera {

class VerifiedCountCache {
 public:
  // The count of `path`: the one kept for the file as it is now, else
  // what count() returns (kept when OK).
  absl::StatusOr<int64_t> Count(
      const std::string& path,
      const std::function<absl::StatusOr<int64_t>()>& count);

  // Calls answered from the cache, and calls that counted.
  int64_t hits() const;
  int64_t misses() const;

 private:
  // What identifies a version of a file.
  struct Version {
    int64_t size = 0;
    int64_t mtime_ns = 0;
    uint64_t device = 0;
    uint64_t inode = 0;
    bool operator==(const Version& o) const {
      return size == o.size && mtime_ns == o.mtime_ns && device == o.device &&
             inode == o.inode;
    }
  };
  struct Entry {
    Version version;
    int64_t count = 0;
  };
  // False when `path` cannot be examined.
  static bool VersionOf(const std::string& path, Version* version);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera

#endif  // TESSERA_DATA_COUNT_CACHE_VERIFIED_COUNT_CACHE_H_
