#include "data/stream/stream_reader.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/counter_rng.h"
#include "common/data_format.h"
#include "data/records/csv_parser.h"
#include "data/records/example_parser.h"
#include "data/records/record_reader.h"
#include "data/stream/example_layout.h"
#include "data/stream/file_assignment.h"

namespace tessera {
namespace {

constexpr int64_t kDefaultShuffleBuffer = 10000;
constexpr int64_t kDefaultReadAhead = 4096;
// Caps that keep a typo in a job file from allocating the machine away.
constexpr int64_t kMaxShuffleBuffer = int64_t{1} << 24;
constexpr int64_t kMaxReadAhead = int64_t{1} << 20;

uint64_t PassSeed(const StreamOptions& options) {
  return DeriveSeed(options.seed, static_cast<uint64_t>(options.pass));
}

int64_t BufferSize(const StreamOptions& options) {
  return options.shuffle ? std::max<int64_t>(options.shuffle_buffer, 1) : 1;
}

// The slot the example at `position` leaves from, among `live` slots.
int64_t Pick(uint64_t seed, int64_t position, int64_t live) {
  return static_cast<int64_t>(
      CounterHash(seed, static_cast<uint64_t>(position)) %
      static_cast<uint64_t>(live));
}

// The buffer's records after `position` positions of a pass over `size`
// records, and the record that enters next; the stream's whole order is
// this simulation, which reads nothing.
struct BufferState {
  std::vector<int64_t> records;
  int64_t next = 0;
};

template <typename OnOutput>
BufferState Simulate(int64_t size, int64_t capacity, uint64_t seed,
                     int64_t positions, OnOutput on_output) {
  BufferState state;
  const int64_t fill = std::min(capacity, size);
  state.records.resize(fill);
  std::iota(state.records.begin(), state.records.end(), int64_t{0});
  state.next = fill;
  int64_t live = fill;
  for (int64_t t = 0; t < positions && live > 0; ++t) {
    const int64_t j = Pick(seed, t, live);
    on_output(state.records[j]);
    if (state.next < size) {
      state.records[j] = state.next++;
    } else {
      state.records[j] = state.records[live - 1];
      --live;
    }
  }
  state.records.resize(live);
  return state;
}

}  // namespace

struct StreamReader::Delivery {
  int64_t index = 0;
  bool bad = false;
  std::string why_bad;  // when bad: the error, naming file and record
  ParsedExample example;
};

absl::StatusOr<StreamOptions> StreamOptionsOf(const DataConfig& data,
                                              uint64_t seed, int64_t pass) {
  StreamOptions options;
  options.format = data.format();
  absl::StatusOr<CsvOptions> csv = CsvOptionsOf(data.csv());
  if (!csv.ok()) return csv.status();
  options.csv = *std::move(csv);
  options.seed = seed;
  options.pass = pass;
  options.shuffle_buffer =
      data.shuffle_buffer() > 0 ? data.shuffle_buffer() : kDefaultShuffleBuffer;
  options.read_ahead =
      data.read_ahead() > 0 ? data.read_ahead() : kDefaultReadAhead;
  options.skip_bad_records = data.skip_bad_records();
  return options;
}

uint64_t StreamSeed(uint64_t job_seed, int shard) {
  return DeriveSeed(job_seed ^ 0x73747265616d0000ull,  // "stream"
                    static_cast<uint64_t>(shard));
}

std::vector<int> SliceOrder(int num_slices, const StreamOptions& options) {
  std::vector<int> order(num_slices);
  std::iota(order.begin(), order.end(), 0);
  if (!options.shuffle) return order;
  const uint64_t seed = DeriveSeed(PassSeed(options), 2);
  for (int i = num_slices - 1; i > 0; --i) {
    const int j =
        static_cast<int>(CounterHash(seed, i) % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<int64_t> StreamOrder(int64_t num_records,
                                 const StreamOptions& options) {
  std::vector<int64_t> order;
  order.reserve(num_records);
  Simulate(num_records, BufferSize(options), DeriveSeed(PassSeed(options), 1),
           num_records, [&](int64_t r) { order.push_back(r); });
  return order;
}

absl::StatusOr<std::unique_ptr<StreamReader>> StreamReader::Open(
    const ExampleSchema& schema, const StreamShard& shard,
    const StreamOptions& options, int64_t position) {
  if (!IsStreamedFormat(options.format)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "format \"", options.format, "\" is not streamed (tfrecord, csv)"));
  }
  if (options.shuffle_buffer < 1 ||
      options.shuffle_buffer > kMaxShuffleBuffer || options.read_ahead < 1 ||
      options.read_ahead > kMaxReadAhead) {
    return absl::InvalidArgumentError(
        absl::StrCat("shuffle_buffer must be in [1, ", kMaxShuffleBuffer,
                     "] and read_ahead in [1, ", kMaxReadAhead, "]; got ",
                     options.shuffle_buffer, " and ", options.read_ahead));
  }
  for (const FileSlice& s : shard.slices()) {
    if (s.begin() < 0 || s.end() < s.begin()) {
      return absl::InvalidArgumentError(absl::StrCat(
          s.path(), ": bad record range [", s.begin(), ", ", s.end(), ")"));
    }
  }
  const int64_t size = ShardSize(shard);
  if (position < 0 || position > size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "position ", position, " is outside the pass's ", size, " records"));
  }
  std::unique_ptr<StreamReader> reader(
      new StreamReader(schema, shard, options, size));
  if (absl::Status s = reader->Start(position); !s.ok()) return s;
  return reader;
}

StreamReader::StreamReader(const ExampleSchema& schema, StreamShard shard,
                           StreamOptions options, int64_t size)
    : schema_(schema),
      shard_(std::move(shard)),
      options_(std::move(options)),
      size_(size),
      pick_seed_(DeriveSeed(PassSeed(options_), 1)) {}

StreamReader::~StreamReader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status StreamReader::Start(int64_t position) {
  slice_order_ = SliceOrder(shard_.slices_size(), options_);
  const int64_t capacity = BufferSize(options_);
  BufferState state =
      Simulate(size_, capacity, pick_seed_, position, [](int64_t) {});
  buffer_ = std::move(state.records);
  live_ = static_cast<int64_t>(buffer_.size());
  next_record_ = state.next;
  position_ = position;
  first_fresh_ = next_record_;
  needed_ = buffer_;
  std::sort(needed_.begin(), needed_.end());
  examples_.resize(std::min(capacity, std::max<int64_t>(size_, 1)));
  bad_.assign(examples_.size(), 0);
  why_bad_.assign(examples_.size(), std::string());
  ring_.resize(options_.read_ahead);
  thread_ = std::thread(&StreamReader::Produce, this);
  // The buffer's records arrive in record order; put each in its slot.
  std::vector<std::pair<int64_t, int64_t>> slots(live_);
  for (int64_t j = 0; j < live_; ++j) slots[j] = {buffer_[j], j};
  std::sort(slots.begin(), slots.end());
  for (const auto& [record, slot] : slots) {
    if (absl::Status s = Take(record, slot); !s.ok()) {
      // Reported by Next, as a read error at any later record would be.
      error_ = s;
      break;
    }
  }
  return absl::OkStatus();
}

// The ring is handed over in runs: each side works on its snapshot of the
// other's counter and takes the lock only every kHandover deliveries or
// when its snapshot runs out, so a record costs no lock of its own.
constexpr int64_t kHandover = 32;

StreamReader::Delivery* StreamReader::Acquire() {
  const int64_t capacity = static_cast<int64_t>(ring_.size());
  if (produced_ - published_ >= kHandover) Publish();
  if (produced_ >= free_until_) {
    std::unique_lock<std::mutex> lock(mu_);
    tail_ = published_ = produced_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return stop_ || produced_ - head_ < capacity; });
    if (stop_) return nullptr;
    free_until_ = head_ + capacity;
  }
  return &ring_[produced_ % capacity];
}

void StreamReader::Publish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tail_ = published_ = produced_;
    if (stop_) free_until_ = produced_;  // the next Acquire sees stop_
  }
  changed_.notify_all();
}

void StreamReader::Finish(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tail_ = published_ = produced_;
    finished_ = true;
    thread_error_ = std::move(status);
  }
  changed_.notify_all();
}

absl::Status StreamReader::Take(int64_t index, int64_t slot) {
  if (taken_ >= visible_until_ || taken_ - released_ >= kHandover) {
    std::unique_lock<std::mutex> lock(mu_);
    head_ = released_ = taken_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return taken_ < tail_ || finished_; });
    visible_until_ = tail_;
    if (taken_ >= visible_until_) {
      if (!thread_error_.ok()) return thread_error_;
      return absl::InternalError(
          absl::StrCat("stream ended before record ", index, " of ", size_));
    }
  }
  // The thread writes no delivery in [head_, tail_).
  Delivery& d = ring_[taken_ % static_cast<int64_t>(ring_.size())];
  if (d.index != index) {
    return absl::InternalError(
        absl::StrCat("stream delivered record ", d.index, " for ", index));
  }
  std::swap(examples_[slot], d.example);
  bad_[slot] = d.bad ? 1 : 0;
  if (d.bad) why_bad_[slot] = std::move(d.why_bad);
  ++taken_;
  return absl::OkStatus();
}

void StreamReader::Produce() {
  size_t need = 0;
  int64_t base = 0;
  for (int k : slice_order_) {
    const FileSlice& slice = shard_.slices(k);
    const int64_t n = slice.end() - slice.begin();
    const bool wanted = base + n > first_fresh_ ||
                        (need < needed_.size() && needed_[need] < base + n);
    if (wanted) {
      if (absl::Status s = ProduceSlice(slice, base, &need); !s.ok()) {
        Finish(std::move(s));
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    base += n;
  }
  Finish(absl::OkStatus());
}

absl::Status StreamReader::ProduceSlice(const FileSlice& slice, int64_t base,
                                        size_t* need) {
  absl::StatusOr<std::unique_ptr<RecordReader>> opened =
      OpenRecordReader(options_.format, slice.path(), options_.csv);
  if (!opened.ok()) return opened.status();
  RecordReader& reader = **opened;
  std::unique_ptr<CsvParser> csv;
  std::unique_ptr<ExampleParser> example;
  if (DataFormatNamed(options_.format) == DataFormat::kCsv) {
    absl::StatusOr<std::unique_ptr<CsvParser>> created = CsvParser::Create(
        schema_, options_.csv,
        options_.csv.header ? reader.header() : options_.csv.columns);
    if (!created.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(slice.path(), ": ", created.status().message()));
    }
    csv = *std::move(created);
  } else {
    example = std::make_unique<ExampleParser>(schema_);
  }
  auto short_file = [&] {
    return absl::DataLossError(absl::StrCat(
        slice.path(), " holds ", reader.index(), " records, but records [",
        slice.begin(), ", ", slice.end(),
        ") were planned (was it changed after it was counted?)"));
  };
  int64_t pending = slice.begin();  // records to pass over before the next
  const int64_t n = slice.end() - slice.begin();
  for (int64_t g = base; g < base + n; ++g) {
    const bool fresh = g >= first_fresh_;
    if (!fresh && !(*need < needed_.size() && needed_[*need] == g)) {
      ++pending;
      continue;
    }
    if (!fresh) ++*need;
    if (pending > 0) {
      absl::StatusOr<int64_t> skipped = reader.Skip(pending);
      if (!skipped.ok()) return skipped.status();
      if (*skipped != pending) return short_file();
      pending = 0;
    }
    Delivery* d = Acquire();
    if (d == nullptr) return absl::OkStatus();  // stopping
    d->index = g;
    d->bad = false;
    absl::string_view record;
    const int64_t before = reader.index();
    absl::StatusOr<bool> more = reader.Next(&record);
    absl::Status bad;
    if (!more.ok()) {
      // Only a record the reader got past can be skipped.
      if (!options_.skip_bad_records || reader.index() == before) {
        return more.status();
      }
      bad = more.status();
    } else if (!*more) {
      return short_file();
    } else {
      absl::Status parsed = csv != nullptr
                                ? csv->Parse(record, &d->example)
                                : example->Parse(record, &d->example);
      if (!parsed.ok()) {
        bad = absl::Status(parsed.code(), absl::StrCat(reader.Where(), ": ",
                                                       parsed.message()));
      }
    }
    if (!bad.ok()) {
      if (!options_.skip_bad_records) return bad;
      d->bad = true;
      d->why_bad = std::string(bad.message());
    }
    ++produced_;
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> StreamReader::Next(int64_t count, HostBatch* batch) {
  StartBatch(schema_, batch);
  if (!error_.ok()) return error_;
  int64_t taken = 0;
  while (taken < count && position_ < size_) {
    const int64_t j = Pick(pick_seed_, position_, live_);
    // The slots the next positions leave from are known now (while the
    // fill stays): fetch their examples ahead, as a shuffle buffer larger
    // than the cache would otherwise miss on every one.
    if (position_ + 2 < size_) {
      __builtin_prefetch(&examples_[Pick(pick_seed_, position_ + 2, live_)]);
      const ParsedExample& soon =
          examples_[Pick(pick_seed_, position_ + 1, live_)];
      // Addresses as integers: a prefetch past a short vector's end is
      // harmless, pointer arithmetic there would not be.
      const uintptr_t ids = reinterpret_cast<uintptr_t>(soon.ids.data());
      __builtin_prefetch(soon.dense.data());
      for (int line = 0; line < 4; ++line) {
        __builtin_prefetch(reinterpret_cast<const void*>(ids + 64 * line));
      }
      __builtin_prefetch(soon.id_ends.data());
    }
    if (bad_[j]) {
      ++bad_records_;
      last_bad_record_ = why_bad_[j];
    } else {
      AppendToBatch(schema_, examples_[j], batch);
    }
    if (next_record_ < size_) {
      if (absl::Status s = Take(next_record_, j); !s.ok()) {
        error_ = s;
        return s;
      }
      buffer_[j] = next_record_++;
    } else {
      std::swap(examples_[j], examples_[live_ - 1]);
      std::swap(why_bad_[j], why_bad_[live_ - 1]);
      bad_[j] = bad_[live_ - 1];
      buffer_[j] = buffer_[live_ - 1];
      --live_;
    }
    ++position_;
    ++taken;
  }
  return taken;
}

}  // namespace tessera
