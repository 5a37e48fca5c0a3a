#include "data/stream/stream_reader.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/records/record_reader.h"
#include "data/stream/file_assignment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/stream/stream_test_files.h"

namespace tessera {
namespace {

using stream_test::StreamFileTest;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// The test examples' id is x's first value.
std::vector<int64_t> Ids(const HostBatch& batch) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < batch.size; ++i) {
    ids.push_back(static_cast<int64_t>(batch.dense[0][3 * i]));
  }
  return ids;
}

class StreamReaderTest : public StreamFileTest {
 protected:
  // Four files of 10, 0, 25 and 7 examples (ids 0..41), one of them gzip.
  void SetUp() override {
    StreamFileTest::SetUp();
    files_ = {WriteExamples("part-0", 0, 10), WriteExamples("part-1", 10, 0),
              WriteExamples("part-2", 10, 25, /*gzip=*/true),
              WriteExamples("part-3", 35, 7)};
    counts_ = {10, 0, 25, 7};
  }

  StreamOptions Options(int64_t buffer, int64_t pass = 0) {
    StreamOptions options;
    options.format = "tfrecord";
    options.seed = 99;
    options.pass = pass;
    options.shuffle_buffer = buffer;
    options.read_ahead = 5;
    return options;
  }

  StreamShard All() { return *RecordRange(files_, counts_, 0, 42); }

  // Everything from `position` on, `batch` positions at a time.
  std::vector<int64_t> ReadFrom(const StreamShard& shard,
                                const StreamOptions& options, int64_t position,
                                int64_t batch = 4) {
    auto reader = StreamReader::Open(schema_, shard, options, position);
    EXPECT_TRUE(reader.ok()) << reader.status();
    std::vector<int64_t> ids;
    HostBatch b;
    while (true) {
      absl::StatusOr<int64_t> n = (*reader)->Next(batch, &b);
      EXPECT_TRUE(n.ok()) << n.status();
      if (!n.ok() || *n == 0) break;
      for (int64_t id : Ids(b)) ids.push_back(id);
      EXPECT_EQ(b.offsets[0].size(), static_cast<size_t>(b.size + 1));
      EXPECT_EQ(b.labels.size(), static_cast<size_t>(b.size));
    }
    EXPECT_EQ((*reader)->position(), (*reader)->size());
    return ids;
  }

  const ExampleSchema schema_ = stream_test::TestSchema();
  std::vector<std::string> files_;
  std::vector<int64_t> counts_;
};

TEST_F(StreamReaderTest, APassYieldsEveryExampleOnce) {
  for (int64_t buffer : {1, 3, 16, 1000}) {
    std::vector<int64_t> ids = ReadFrom(All(), Options(buffer), 0);
    std::vector<int64_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> want(42);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(sorted, want) << "buffer " << buffer;
    if (buffer > 1) EXPECT_NE(ids, want);
  }
}

// The core of exactly-once: a reader opened at any position yields what an
// uninterrupted one yields from there, whatever the batch sizes.
TEST_F(StreamReaderTest, OpeningAtAPositionContinuesTheSameStream) {
  for (int64_t buffer : {1, 5, 64}) {
    const std::vector<int64_t> whole = ReadFrom(All(), Options(buffer), 0, 7);
    for (int64_t p : {0, 1, 4, 9, 10, 23, 37, 41, 42}) {
      const std::vector<int64_t> rest = ReadFrom(All(), Options(buffer), p, 3);
      EXPECT_THAT(rest, ElementsAreArray(whole.begin() + p, whole.end()))
          << "buffer " << buffer << " position " << p;
    }
  }
}

TEST_F(StreamReaderTest, OrderIsThePlannedPermutation) {
  // Which record sits at which position is known without reading.
  const StreamOptions options = Options(8, 3);
  const std::vector<int64_t> order = StreamOrder(42, options);
  const std::vector<int> slices = SliceOrder(All().slices_size(), options);
  // Record r of the pass: the slices concatenated in `slices` order.
  std::vector<int64_t> ids_by_record;
  const StreamShard shard = All();
  for (int k : slices) {
    const FileSlice& s = shard.slices(k);
    int64_t first_id = 0;
    for (size_t f = 0; f < files_.size(); ++f) {
      if (files_[f] == s.path()) break;
      first_id += counts_[f];
    }
    for (int64_t r = s.begin(); r < s.end(); ++r) {
      ids_by_record.push_back(first_id + r);
    }
  }
  std::vector<int64_t> want;
  for (int64_t r : order) want.push_back(ids_by_record[r]);
  EXPECT_EQ(ReadFrom(shard, options, 0), want);
}

TEST_F(StreamReaderTest, PassesDiffer) {
  EXPECT_NE(ReadFrom(All(), Options(8, 0), 0),
            ReadFrom(All(), Options(8, 1), 0));
  EXPECT_EQ(ReadFrom(All(), Options(8, 1), 0),
            ReadFrom(All(), Options(8, 1), 0));
}

TEST_F(StreamReaderTest, UnshuffledReadsInFileOrder) {
  StreamOptions options = Options(100);
  options.shuffle = false;
  std::vector<int64_t> want(42);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(ReadFrom(All(), options, 0), want);
  const StreamShard middle = *RecordRange(files_, counts_, 8, 38);
  std::vector<int64_t> part(want.begin() + 8, want.begin() + 38);
  EXPECT_EQ(ReadFrom(middle, options, 0), part);
}

TEST_F(StreamReaderTest, ShardsOfAnAssignmentCoverTheDataOnce) {
  for (int shards : {1, 2, 3, 4, 6, 50}) {
    auto assigned = AssignFiles(files_, counts_, shards);
    ASSERT_TRUE(assigned.ok());
    ASSERT_EQ(assigned->size(), static_cast<size_t>(shards));
    std::multiset<int64_t> seen;
    for (int k = 0; k < shards; ++k) {
      for (int64_t id : ReadFrom((*assigned)[k], Options(4), 0)) {
        seen.insert(id);
      }
    }
    EXPECT_EQ(seen.size(), 42u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 42u);
  }
  // Round robin when there are enough files: shard 1 of 2 gets files 1, 3.
  auto two = AssignFiles(files_, counts_, 2);
  EXPECT_EQ((*two)[1].slices(1).path(), files_[3]);
  // Ranges when files are fewer than shards: sizes differ by at most one.
  auto five = AssignFiles(files_, counts_, 5);
  for (const StreamShard& s : *five) {
    EXPECT_GE(ShardSize(s), 8);
    EXPECT_LE(ShardSize(s), 9);
  }
}

TEST_F(StreamReaderTest, GlobsAndCounts) {
  auto files = ExpandFileGlobs({Path("part-*"), Path("part-0")});
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(*files, files_);
  for (size_t i = 0; i < files_.size(); ++i) {
    EXPECT_EQ(*CountRecords("tfrecord", files_[i], CsvOptions()), counts_[i]);
  }
  absl::StatusOr<std::vector<std::string>> none =
      ExpandFileGlobs({Path("nothing-*.tfrecord")});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("no file matches"));
  EXPECT_THAT(none.status().message(), HasSubstr("nothing-*.tfrecord"));
}

TEST_F(StreamReaderTest, AGlobInAMissingFolderNamesTheFolder) {
  absl::StatusOr<std::vector<std::string>> missing =
      ExpandFileGlobs({Path("no-such-folder/part-*")});
  // The user's mistake (exit 2), not a failure worth a retry.
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound)
      << missing.status();
  EXPECT_THAT(missing.status().message(),
              HasSubstr(absl::StrCat("folder ", Path("no-such-folder"),
                                     " does not exist")));
}

TEST_F(StreamReaderTest, AssignStreamedDataGlobsCountsAndAssigns) {
  DataConfig data;
  data.set_format("tfrecord");
  data.add_train_files(Path("part-*"));
  data.add_test_files(Path("part-3"));
  absl::StatusOr<StreamedDataSet> set = AssignStreamedData(data, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->train_records, 42);
  EXPECT_EQ(set->test_records, 7);
  ASSERT_EQ(set->train_shards.size(), 2u);
  EXPECT_EQ(ShardSize(set->train_shards[0]), 35);  // files 0 and 2
  ASSERT_EQ(set->test_files.size(), 1u);
  EXPECT_EQ(set->test_files[0].end(), 7);
  // part-1 is empty: as the only file of worker 1 of 4 it leaves it none.
  absl::StatusOr<StreamedDataSet> idle = AssignStreamedData(data, 4);
  EXPECT_THAT(idle.status().message(), HasSubstr("worker 1 of 4"));
  data.add_test_files(Path("missing-*"));
  EXPECT_THAT(AssignStreamedData(data, 2).status().message(),
              HasSubstr("test_files: no file matches"));
}

TEST_F(StreamReaderTest, BadRecordFailsNamingFileAndRecord) {
  std::vector<std::string> records;
  for (int i = 0; i < 6; ++i) records.push_back(stream_test::TestRecord(i));
  records[4] = "not an example";
  const std::string bad = WriteRecords("bad", records);
  StreamShard shard;
  FileSlice* s = shard.add_slices();
  s->set_path(bad);
  s->set_end(6);
  StreamOptions options = Options(1);
  auto reader = StreamReader::Open(schema_, shard, options, 0);
  HostBatch batch;
  EXPECT_EQ(*(*reader)->Next(3, &batch), 3);
  absl::StatusOr<int64_t> n = (*reader)->Next(3, &batch);
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.status().message(),
              HasSubstr(bad + ": record 4: not a tf.train.Example"));
  // The failure sticks.
  EXPECT_FALSE((*reader)->Next(3, &batch).ok());

  // Skipping: the position is taken, the example is not.
  options.skip_bad_records = true;
  auto skipping = StreamReader::Open(schema_, shard, options, 0);
  EXPECT_EQ(*(*skipping)->Next(10, &batch), 6);
  EXPECT_EQ(batch.size, 5);
  EXPECT_EQ((*skipping)->bad_records(), 1);
  EXPECT_THAT((*skipping)->last_bad_record(),
              HasSubstr(bad + ": record 4: not a tf.train.Example"));
  EXPECT_THAT(Ids(batch), ElementsAreArray({0, 1, 2, 3, 5}));
}

TEST_F(StreamReaderTest, FileShorterThanPlannedIsDataLoss) {
  StreamShard shard;
  FileSlice* s = shard.add_slices();
  s->set_path(files_[0]);
  s->set_end(12);
  auto reader = StreamReader::Open(schema_, shard, Options(1), 0);
  HostBatch batch;
  absl::StatusOr<int64_t> n = (*reader)->Next(20, &batch);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(n.status().message(), HasSubstr("holds 10 records"));
}

TEST_F(StreamReaderTest, MissingFileAndBadPosition) {
  StreamShard shard;
  FileSlice* s = shard.add_slices();
  s->set_path(Path("gone"));
  s->set_end(3);
  auto reader = StreamReader::Open(schema_, shard, Options(2), 0);
  HostBatch batch;
  EXPECT_EQ((*reader)->Next(1, &batch).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(StreamReader::Open(schema_, shard, Options(2), 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StreamReaderTest, CsvFilesStreamLikeTfRecord) {
  ExampleSchema schema = stream_test::TestSchema();
  schema.dense[0].features = {"a", "b", "c"};
  std::string text = "a,b,c,cat,y\n";
  for (int i = 0; i < 30; ++i) {
    text += absl::StrCat(i, ",", i + 0.5, ",", -i, ",", i, "|7,", i % 2, "\n");
  }
  StreamShard shard;
  FileSlice* s = shard.add_slices();
  s->set_path(WriteText("data.csv", text));
  s->set_begin(5);
  s->set_end(30);
  StreamOptions options = Options(6);
  options.format = "csv";
  options.csv.types["cat"] = "int";
  EXPECT_EQ(*CountRecords("csv", s->path(), options.csv), 30);
  auto whole = StreamReader::Open(schema, shard, options, 0);
  auto later = StreamReader::Open(schema, shard, options, 11);
  HostBatch a, b;
  ASSERT_EQ(*(*whole)->Next(25, &a), 25);
  ASSERT_EQ(*(*later)->Next(25, &b), 14);
  std::vector<int64_t> ids = Ids(a);
  EXPECT_THAT(Ids(b), ElementsAreArray(ids.begin() + 11, ids.end()));
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids.front(), 5);
  EXPECT_EQ(ids.back(), 29);
  EXPECT_EQ(a.ids[0][0], ids.empty() ? 0 : a.dense[0][0]);

  // A bad row names the file and the line.
  WriteText("data.csv", "a,b,c,cat,y\n1,2,3,4,1\n1,2,x,4,0\n");
  s->set_begin(0);
  s->set_end(2);
  auto bad = StreamReader::Open(schema, shard, options, 0);
  absl::StatusOr<int64_t> n = (*bad)->Next(2, &a);
  EXPECT_THAT(n.status().message(), HasSubstr("data.csv:3: column 3 (\"c\")"));
}

}  // namespace
}  // namespace tessera
