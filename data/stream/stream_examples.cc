#include "data/stream/stream_examples.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "data/stream/example_layout.h"
#include "data/stream/file_assignment.h"

namespace tessera {
namespace {

// Readers kept open beyond the one just used; each holds a shuffle buffer.
constexpr size_t kMaxOpenShards = 2;

}  // namespace

absl::StatusOr<std::unique_ptr<StreamExamples>> StreamExamples::Create(
    const DataConfig& data, const ModelDef& model, uint64_t seed,
    std::vector<StreamShard> shards, std::vector<FileSlice> test_files) {
  absl::StatusOr<ExampleSchema> schema = ExampleSchemaOf(model, data);
  if (!schema.ok()) return schema.status();
  if (absl::StatusOr<StreamOptions> options = StreamOptionsOf(data, seed, 0);
      !options.ok()) {
    return options.status();
  }
  if (shards.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data format \"", data.format(),
        "\" is streamed, but the job's "
        "configuration names no shards of the training files (a coordinator "
        "must glob, count and assign them: WorkerConfig.train_shards)"));
  }
  std::unique_ptr<StreamExamples> examples(new StreamExamples);
  examples->schema_ = *std::move(schema);
  examples->data_ = data;
  examples->seed_ = seed;
  examples->shards_ = std::move(shards);
  for (const FileSlice& f : test_files) {
    if (f.begin() != 0 || f.end() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "test file ", f.path(), " must be given whole, as [0, count)"));
    }
    examples->test_paths_.push_back(f.path());
    examples->test_counts_.push_back(f.end());
    examples->test_size_ += f.end();
  }
  return examples;
}

int64_t StreamExamples::train_size() const {
  int64_t n = 0;
  for (const StreamShard& s : shards_) n += ShardSize(s);
  return n;
}

int64_t StreamExamples::shard_size(int shard) const {
  return shard >= 0 && shard < static_cast<int>(shards_.size())
             ? ShardSize(shards_[shard])
             : 0;
}

absl::Status StreamExamples::Take(int shard, int64_t pass, int64_t first,
                                  int64_t count, HostBatch* batch, int64_t* bad,
                                  std::string* why_bad) {
  const int64_t size = shard_size(shard);
  if (shard < 0 || shard >= static_cast<int>(shards_.size()) || pass < 0 ||
      first < 0 || count < 1 || first + count > size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stream step (shard ", shard, ", pass ", pass, ", positions [", first,
        ", ", first + count, ")) is outside shard ", shard, "'s ", size,
        " records of ", shards_.size(), " shards"));
  }
  auto it = open_.find(shard);
  if (it == open_.end() || it->second.pass != pass ||
      it->second.reader->position() != first) {
    if (it == open_.end() && open_.size() >= kMaxOpenShards) {
      // The least recently used goes: a worker's own shard is used every
      // step, another's only for the odd re-run.
      auto oldest = open_.begin();
      for (auto o = open_.begin(); o != open_.end(); ++o) {
        if (o->second.last_use < oldest->second.last_use) oldest = o;
      }
      open_.erase(oldest);
    }
    absl::StatusOr<StreamOptions> options =
        StreamOptionsOf(data_, StreamSeed(seed_, shard), pass);
    if (!options.ok()) return options.status();
    Open fresh;
    fresh.pass = pass;
    // Drop the old reader (and its thread) before reading again.
    open_.erase(shard);
    absl::StatusOr<std::unique_ptr<StreamReader>> reader =
        StreamReader::Open(schema_, shards_[shard], *options, first);
    if (!reader.ok()) return reader.status();
    fresh.reader = *std::move(reader);
    it = open_.emplace(shard, std::move(fresh)).first;
  }
  it->second.last_use = ++uses_;
  StreamReader& reader = *it->second.reader;
  const int64_t bad_before = reader.bad_records();
  absl::StatusOr<int64_t> taken = reader.Next(count, batch);
  if (!taken.ok()) {
    open_.erase(it);
    return taken.status();
  }
  if (*taken != count) {
    return absl::InternalError(absl::StrCat("stream of shard ", shard,
                                            " ended after ", *taken, " of ",
                                            count, " positions"));
  }
  *bad = reader.bad_records() - bad_before;
  if (*bad > 0) *why_bad = reader.last_bad_record();
  return absl::OkStatus();
}

absl::Status StreamExamples::TakeTest(int64_t begin, int64_t end,
                                      HostBatch* batch) {
  if (begin < 0 || begin > end || end > test_size_) {
    return absl::OutOfRangeError(absl::StrCat("test records [", begin, ", ",
                                              end, ") are not inside the ",
                                              test_size_, " test records"));
  }
  // Evaluation asks for consecutive slices: keep one unshuffled reader from
  // the first one to the end of the test files, so a gzip file is not
  // decompressed again from its start for every slice.
  if (test_ == nullptr || test_base_ + test_->position() != begin) {
    test_.reset();
    absl::StatusOr<StreamShard> range =
        RecordRange(test_paths_, test_counts_, begin, test_size_);
    if (!range.ok()) return range.status();
    absl::StatusOr<StreamOptions> options = StreamOptionsOf(data_, seed_, 0);
    if (!options.ok()) return options.status();
    options->shuffle = false;
    options->skip_bad_records = false;
    absl::StatusOr<std::unique_ptr<StreamReader>> reader =
        StreamReader::Open(schema_, *range, *options, 0);
    if (!reader.ok()) return reader.status();
    test_ = *std::move(reader);
    test_base_ = begin;
  }
  absl::StatusOr<int64_t> taken = test_->Next(end - begin, batch);
  if (!taken.ok()) {
    test_.reset();
    return taken.status();
  }
  return absl::OkStatus();
}

}  // namespace tessera
