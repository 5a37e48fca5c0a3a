// A machine's inflated copies of gzip data files, shared by the workers on
// it. A gzip stream cannot be entered in the middle, so a worker that
// loads its shard [b, e) of a gzipped IDX or Criteo file inflates the
// file from its start to e: W workers on one machine inflate about
// (W + 1) / 2 files' worth between them, which is what made start-up grow
// with the workers (bench/results/startup_overhead.md). With this cache
// the first worker to ask inflates the file once into a plain file beside
// the others' (under a lock, so the rest wait for it rather than inflate
// too), and every worker reads its slice of that.
//
// Contract:
//  - An entry is keyed by the file's absolute path, size and modification
//    time: a changed file gets a new entry, never a stale one.
//  - An entry appears only complete (written under a temporary name, then
//    renamed); a process killed while inflating leaves no entry.
//  - PathFor never fails: a file that is not gzip, an unreadable or
//    corrupt one, or a cache folder that cannot be written gives back the
//    original path (with a warning for the last two), so the reader then
//    reports the file's own error, naming it.
//
// Thread safety: PathFor may be called concurrently, from any number of
// processes (flock on a lock file beside each entry).
#ifndef TESSERA_DATA_INFLATE_CACHE_INFLATED_FILES_H_
#define TESSERA_DATA_INFLATE_CACHE_INFLATED_FILES_H_

#include <string>

#include "proto/job.pb.h"

namespace tessera {

class InflatedFiles {
 public:
  // Entries live under `dir` (made, mode 0700, when needed); an empty
  // `dir` turns the cache off.
  explicit InflatedFiles(std::string dir) : dir_(std::move(dir)) {}

  // The file to read `path` through: its inflated copy when `path` is a
  // gzip file, else `path`.
  std::string PathFor(const std::string& path) const;

  // `data` with each gzipped file of an in-memory format (IDX, Criteo)
  // replaced by PathFor; streamed formats read their own files.
  DataConfig Rewrite(const DataConfig& data) const;

  // The default folder: $TMPDIR (or /tmp) / tessera-inflated-<uid>.
  static std::string DefaultDir();

 private:
  const std::string dir_;
};

}  // namespace tessera

#endif  // TESSERA_DATA_INFLATE_CACHE_INFLATED_FILES_H_
