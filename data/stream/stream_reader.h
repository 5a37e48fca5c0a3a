// Streams one pass over a shard of a TFRecord or CSV data set: files read
// in turn by a read-ahead thread that parses up to `read_ahead` examples
// ahead, through a shuffle buffer of `shuffle_buffer` examples, as
// tf.data's interleave-free
//   Dataset.from_tensor_slices(files).shuffle(len(files))
//     .flat_map(TFRecordDataset).shuffle(buffer_size)
// would; memory is bounded by the two sizes, not by the data.
//
// Determinism (what exactly-once rests on): the records of a pass, in the
// order the stream yields them, are a permutation fixed by (shard, seed,
// pass, shuffle_buffer):
//  - the shard's slices are put in an order drawn from (seed, pass), and
//    their records concatenated: record r of that sequence;
//  - the buffer is filled with the first shuffle_buffer records; the
//    example at position t is the buffer's slot CounterHash(seed', t) mod
//    its fill, which the next record replaces (at the end, the last slot
//    moves there).
// Which record lands at which position depends on no file content, so a
// stream opened at position p computes the buffer it would hold there
// without reading, reads only the records still in it (skipping the
// others without parsing them; a plain TFRecord file seeks) and then
// yields exactly what an uninterrupted stream yields from p on.
//
// Contract:
//  - Errors name the file and record (or line): the record readers'
//    (record_reader.h) and the parsers' (example_parser.h, csv_parser.h).
//    Next returns the first error the stream meets; a stream that failed
//    stays failed. A file with fewer records than its slice names is
//    DataLoss (the data changed since it was counted).
//  - skip_bad_records: a record that fails to parse, or whose data CRC does
//    not match, still takes its position but yields no example; Next's
//    batch is then smaller than the positions it took, and
//    bad_records() counts them. Errors that end a file's framing (a
//    truncated record, a bad length CRC, a corrupt gzip stream) still
//    fail the stream.
//  - Thread safety: one thread at a time; the reader owns one helper
//    thread, stopped by the destructor.

#ifndef TESSERA_DATA_STREAM_STREAM_READER_H_
#define TESSERA_DATA_STREAM_STREAM_READER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/example_set.h"
#include "data/records/csv_parser.h"
#include "data/records/example_schema.h"
#include "proto/job.pb.h"

namespace tessera {

struct StreamOptions {
  std::string format;  // "tfrecord" or "csv"
  CsvOptions csv;
  uint64_t seed = 0;
  int64_t pass = 0;
  int64_t shuffle_buffer = 10000;  // 1: records in (shuffled) file order
  int64_t read_ahead = 4096;
  // false: slices in their given order and no buffer (evaluation).
  bool shuffle = true;
  bool skip_bad_records = false;
};

// The options a job's DataConfig gives (format, csv, buffer sizes, the
// bad-record policy), for pass `pass` of the shard whose seed is
// StreamSeed(job_seed, shard). InvalidArgument for a bad csv delimiter.
absl::StatusOr<StreamOptions> StreamOptionsOf(const DataConfig& data,
                                              uint64_t seed, int64_t pass);

// Each shard shuffles with its own seed.
uint64_t StreamSeed(uint64_t job_seed, int shard);

// The record (index into the pass's concatenated slices, see above) at
// every position of a pass over `num_records` records; O(num_records)
// memory, for tests and tools.
std::vector<int64_t> StreamOrder(int64_t num_records,
                                 const StreamOptions& options);

// The order the pass reads the shard's slices in (indices into
// shard.slices()).
std::vector<int> SliceOrder(int num_slices, const StreamOptions& options);

class StreamReader {
 public:
  // Opens pass options.pass of `shard` at `position` (0: its start).
  // `schema` must outlive the reader. InvalidArgument for a bad format or
  // options or a position outside [0, ShardSize(shard)]; the first reads'
  // errors (a missing file) come from Next.
  static absl::StatusOr<std::unique_ptr<StreamReader>> Open(
      const ExampleSchema& schema, const StreamShard& shard,
      const StreamOptions& options, int64_t position);

  ~StreamReader();
  StreamReader(const StreamReader&) = delete;
  StreamReader& operator=(const StreamReader&) = delete;

  // Takes the next up to `count` positions into *batch (emptied first);
  // returns how many it took: `count` unless the pass ends first (0 at its
  // end). With skip_bad_records, batch->size may be smaller.
  absl::StatusOr<int64_t> Next(int64_t count, HostBatch* batch);

  int64_t position() const { return position_; }
  int64_t size() const { return size_; }  // positions of the pass
  int64_t bad_records() const { return bad_records_; }
  // Why the last skipped record was bad (file, record, reason).
  const std::string& last_bad_record() const { return last_bad_record_; }

 private:
  struct Delivery;
  StreamReader(const ExampleSchema& schema, StreamShard shard,
               StreamOptions options, int64_t size);
  absl::Status Start(int64_t position);
  // The read-ahead thread's body and its parts.
  void Produce();
  absl::Status ProduceSlice(const FileSlice& slice, int64_t base, size_t* need);
  // The next delivery to write (nullptr when stopping); the thread
  // counts it written with ++produced_.
  Delivery* Acquire();
  void Publish();
  void Finish(absl::Status status);
  // Takes the next delivery (record `index`) into slot `slot`.
  absl::Status Take(int64_t index, int64_t slot);

  const ExampleSchema& schema_;
  const StreamShard shard_;
  const StreamOptions options_;
  const int64_t size_;
  const uint64_t pick_seed_;
  std::vector<int> slice_order_;

  // Consumer state: the buffer's records and their examples.
  std::vector<int64_t> buffer_;  // record index per slot, [0, live_)
  std::vector<ParsedExample> examples_;
  std::vector<char> bad_;             // per slot: a skipped bad record
  std::vector<std::string> why_bad_;  // per slot, when bad_
  std::string last_bad_record_;
  int64_t live_ = 0;
  int64_t next_record_ = 0;  // the record that enters the buffer next
  int64_t position_ = 0;
  int64_t bad_records_ = 0;
  absl::Status error_;

  // Records below next_record_ at Start that the buffer holds, sorted:
  // the only ones the thread reads before next_record_.
  std::vector<int64_t> needed_;
  int64_t first_fresh_ = 0;  // next_record_ at Start

  // The ring of parsed examples between the thread and the consumer.
  std::vector<Delivery> ring_;
  // The thread's own counters: deliveries written, published (tail_ as it
  // last set it), and the end of the free slots it last saw.
  int64_t produced_ = 0;
  int64_t published_ = 0;
  int64_t free_until_ = 0;
  // The consumer's own: deliveries taken, released (head_ as it last set
  // it), and the tail_ it last saw.
  int64_t taken_ = 0;
  int64_t released_ = 0;
  int64_t visible_until_ = 0;
  std::mutex mu_;
  std::condition_variable changed_;
  int64_t head_ = 0;  // deliveries the consumer released
  int64_t tail_ = 0;  // deliveries the thread published
  bool stop_ = false;
  bool finished_ = false;  // the thread delivered all it will
  absl::Status thread_error_;
  std::thread thread_;
};

}  // namespace tessera

#endif  // TESSERA_DATA_STREAM_STREAM_READER_H_
