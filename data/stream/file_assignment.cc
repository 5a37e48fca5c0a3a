#include "data/stream/file_assignment.h"

#include <errno.h>
#include <glob.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "data/records/record_reader.h"
#include "data/stream/example_layout.h"

namespace tessera {

namespace {

// The folder glob(3) could not read, and why: glob's error callback takes
// no context, so it lands here, per thread.
thread_local std::string glob_error_path;
thread_local int glob_error_errno = 0;

int RecordGlobError(const char* path, int error) {
  glob_error_path = path;
  glob_error_errno = error;
  return 1;  // stop: the pattern cannot be expanded as written
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandFileGlobs(
    absl::Span<const std::string> patterns) {
  if (patterns.empty()) {
    return absl::InvalidArgumentError("no data files: the file list is empty");
  }
  std::vector<std::string> files;
  for (const std::string& pattern : patterns) {
    glob_t g = {};
    glob_error_path.clear();
    glob_error_errno = 0;
    const int rc = glob(pattern.c_str(), GLOB_ERR, RecordGlobError, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
      globfree(&g);
      return absl::InvalidArgumentError(
          absl::StrCat("no file matches \"", pattern, "\""));
    }
    if (rc != 0) {
      globfree(&g);
      if (glob_error_errno == ENOENT) {
        return absl::NotFoundError(absl::StrCat("no file matches \"", pattern,
                                                "\": folder ", glob_error_path,
                                                " does not exist"));
      }
      if (glob_error_errno != 0) {
        // A folder the user may not read is theirs to fix (PermissionDenied);
        // an I/O error may pass (Unavailable, from errno's code).
        return absl::ErrnoToStatus(
            glob_error_errno,
            absl::StrCat("cannot expand \"", pattern, "\": cannot read folder ",
                         glob_error_path));
      }
      return absl::UnavailableError(absl::StrCat(
          "cannot expand \"", pattern, "\": glob(3) failed (", rc, ")"));
    }
    for (size_t i = 0; i < g.gl_pathc; ++i) files.push_back(g.gl_pathv[i]);
    globfree(&g);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

int64_t ShardSize(const StreamShard& shard) {
  int64_t n = 0;
  for (const FileSlice& s : shard.slices()) n += s.end() - s.begin();
  return n;
}

absl::StatusOr<StreamShard> RecordRange(absl::Span<const std::string> files,
                                        absl::Span<const int64_t> counts,
                                        int64_t begin, int64_t end) {
  if (files.size() != counts.size()) {
    return absl::InvalidArgumentError("files and counts differ in size");
  }
  const int64_t total =
      std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (begin < 0 || begin > end || end > total) {
    return absl::OutOfRangeError(absl::StrCat("records [", begin, ", ", end,
                                              ") are not inside the ", total,
                                              " records of the files"));
  }
  StreamShard shard;
  int64_t base = 0;
  for (size_t i = 0; i < files.size() && base < end; ++i) {
    const int64_t lo = std::max(begin, base);
    const int64_t hi = std::min(end, base + counts[i]);
    if (lo < hi) {
      FileSlice* s = shard.add_slices();
      s->set_path(files[i]);
      s->set_begin(lo - base);
      s->set_end(hi - base);
    }
    base += counts[i];
  }
  return shard;
}

absl::StatusOr<std::vector<StreamShard>> AssignFiles(
    absl::Span<const std::string> files, absl::Span<const int64_t> counts,
    int num_shards) {
  if (num_shards < 1 || files.size() != counts.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot assign ", files.size(), " files (", counts.size(),
                     " counts) to ", num_shards, " shards"));
  }
  std::vector<StreamShard> shards(num_shards);
  if (static_cast<int64_t>(files.size()) >= num_shards) {
    for (size_t i = 0; i < files.size(); ++i) {
      FileSlice* s = shards[i % num_shards].add_slices();
      s->set_path(files[i]);
      s->set_begin(0);
      s->set_end(counts[i]);
    }
    return shards;
  }
  const int64_t total =
      std::accumulate(counts.begin(), counts.end(), int64_t{0});
  for (int k = 0; k < num_shards; ++k) {
    absl::StatusOr<StreamShard> range = RecordRange(
        files, counts, total * k / num_shards, total * (k + 1) / num_shards);
    if (!range.ok()) return range.status();
    shards[k] = *std::move(range);
  }
  return shards;
}

namespace {

// Counts the files' records on up to one thread per core: a data set of
// hundreds of gzip files must be decompressed once to be planned.
absl::StatusOr<std::vector<int64_t>> CountAll(
    const std::string& format, const std::vector<std::string>& files,
    const CsvOptions& csv) {
  std::vector<absl::StatusOr<int64_t>> counts(files.size(), int64_t{0});
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      counts[i] = CountRecords(format, files[i], csv);
    }
  };
  const size_t threads = std::min<size_t>(
      files.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  std::vector<int64_t> out;
  for (const absl::StatusOr<int64_t>& n : counts) {
    if (!n.ok()) return n.status();  // the first file in order that failed
    out.push_back(*n);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<FileSlice>> CountStreamedFiles(
    const DataConfig& data, bool train) {
  absl::StatusOr<CsvOptions> csv = CsvOptionsOf(data.csv());
  if (!csv.ok()) return csv.status();
  const auto& patterns = train ? data.train_files() : data.test_files();
  absl::StatusOr<std::vector<std::string>> files = ExpandFileGlobs(
      std::vector<std::string>(patterns.begin(), patterns.end()));
  if (!files.ok()) {
    return absl::Status(files.status().code(),
                        absl::StrCat(train ? "train_files" : "test_files", ": ",
                                     files.status().message()));
  }
  absl::StatusOr<std::vector<int64_t>> counts =
      CountAll(data.format(), *files, *csv);
  if (!counts.ok()) return counts.status();
  std::vector<FileSlice> slices(files->size());
  for (size_t i = 0; i < files->size(); ++i) {
    slices[i].set_path((*files)[i]);
    slices[i].set_end((*counts)[i]);
  }
  return slices;
}

absl::StatusOr<StreamedDataSet> AssignStreamedData(const DataConfig& data,
                                                   int num_workers) {
  StreamedDataSet set;
  for (bool train : {true, false}) {
    absl::StatusOr<std::vector<FileSlice>> slices =
        CountStreamedFiles(data, train);
    if (!slices.ok()) return slices.status();
    std::vector<std::string> files;
    std::vector<int64_t> counts;
    int64_t total = 0;
    for (const FileSlice& slice : *slices) {
      files.push_back(slice.path());
      counts.push_back(slice.end());
      total += slice.end();
    }
    if (total == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", train ? "training" : "test", " files (",
                       files.size(), " of them) hold no records"));
    }
    if (train) {
      absl::StatusOr<std::vector<StreamShard>> shards =
          AssignFiles(files, counts, num_workers);
      if (!shards.ok()) return shards.status();
      for (size_t k = 0; k < shards->size(); ++k) {
        if (ShardSize((*shards)[k]) == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "worker ", k, " of ", num_workers,
              " would get no training "
              "records: files dealt round-robin leave it only empty files"));
        }
      }
      set.train_shards = *std::move(shards);
      set.train_records = total;
    } else {
      set.test_files = *std::move(slices);
      set.test_records = total;
    }
  }
  return set;
}

}  // namespace tessera
