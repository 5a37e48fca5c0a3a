// A worker's examples of a streamed data set (DataConfig.train_files), as
// the coordinator's steps name them: positions of a shard's pass
// (proto StreamStep), and test records by index. The ExampleSet
// counterpart for data that is not held in memory.
//
// Contract:
//  - Take fills *batch with exactly the examples of the step's positions
//    (fewer only where skip_bad_records skipped bad ones). It keeps each
//    shard's reader open at the position after the last step, so the
//    steps of a pass in order cost one read of the files; any other
//    position reopens the stream there (stream_reader.h: the same
//    examples, at the cost of reading the files up to it again).
//  - Errors are the stream's (file and record named) or InvalidArgument
//    for a step outside its shard's pass.
//  - Thread safety: one thread at a time.

#ifndef TESSERA_DATA_STREAM_STREAM_EXAMPLES_H_
#define TESSERA_DATA_STREAM_STREAM_EXAMPLES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data_format.h"
#include "data/example_set.h"
#include "data/records/example_schema.h"
#include "data/stream/stream_reader.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"

namespace tessera {

class StreamExamples {
 public:
  // `shards`: every shard of the training set (FailedPrecondition when
  // there are none); `test_files`: the test files in order, each slice
  // [0, its record count).
  static absl::StatusOr<std::unique_ptr<StreamExamples>> Create(
      const DataConfig& data, const ModelDef& model, uint64_t seed,
      std::vector<StreamShard> shards, std::vector<FileSlice> test_files);

  int64_t train_size() const;
  int64_t shard_size(int shard) const;
  int64_t test_size() const { return test_size_; }

  // Positions [first, first + count) of pass `pass` of `shard`. Sets
  // *bad to the positions skipped as bad records and, when there were
  // some, *why_bad to the last one's error.
  absl::Status Take(int shard, int64_t pass, int64_t first, int64_t count,
                    HostBatch* batch, int64_t* bad, std::string* why_bad);

  // Test records [begin, end), in file order; bad records fail it (an
  // evaluation skips none). Consecutive ranges read on from where the last
  // one ended.
  absl::Status TakeTest(int64_t begin, int64_t end, HostBatch* batch);

 private:
  StreamExamples() = default;

  ExampleSchema schema_;
  DataConfig data_;
  uint64_t seed_ = 0;
  std::vector<StreamShard> shards_;
  std::vector<std::string> test_paths_;
  std::vector<int64_t> test_counts_;
  int64_t test_size_ = 0;
  struct Open {
    int64_t pass = 0;
    uint64_t last_use = 0;  // uses_ when it last served a step
    std::unique_ptr<StreamReader> reader;
  };
  // Open readers by shard; a worker serves few shards at once (its own and
  // the odd re-run), so this stays small.
  std::map<int, Open> open_;
  uint64_t uses_ = 0;
  // The test files from record test_base_ on, unshuffled.
  std::unique_ptr<StreamReader> test_;
  int64_t test_base_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_DATA_STREAM_STREAM_EXAMPLES_H_
