#include "data/stream/stream_examples.h"

#include <algorithm>
#include <string>
#include <vector>

#include "data/stream/file_assignment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/stream/stream_test_files.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<int64_t> Ids(const HostBatch& batch) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < batch.size; ++i) {
    ids.push_back(static_cast<int64_t>(batch.dense[0][3 * i]));
  }
  return ids;
}

class StreamExamplesTest : public stream_test::StreamFileTest {
 protected:
  void SetUp() override {
    StreamFileTest::SetUp();
    model_ = stream_test::TestModel();
    data_ = stream_test::TestData();
    data_.set_shuffle_buffer(4);
    files_ = {WriteExamples("a", 0, 6), WriteExamples("b", 6, 5, true)};
  }

  std::unique_ptr<StreamExamples> Make() {
    std::vector<StreamShard> shards = *AssignFiles(files_, {6, 5}, 2);
    std::vector<FileSlice> test;
    for (int i = 0; i < 2; ++i) {
      FileSlice f;
      f.set_path(files_[i]);
      f.set_end(i == 0 ? 6 : 5);
      test.push_back(f);
    }
    auto made = StreamExamples::Create(data_, model_, 3, shards, test);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *std::move(made) : nullptr;
  }

  std::vector<int64_t> Take(StreamExamples* s, int shard, int64_t pass,
                            int64_t first, int64_t count) {
    HostBatch batch;
    int64_t bad = 0;
    std::string why;
    absl::Status status =
        s->Take(shard, pass, first, count, &batch, &bad, &why);
    EXPECT_TRUE(status.ok()) << status;
    return Ids(batch);
  }

  ModelDef model_;
  DataConfig data_;
  std::vector<std::string> files_;
};

// Steps in order, out of order, re-run, and on a fresh worker all name the
// same examples.
TEST_F(StreamExamplesTest, AStepNamesTheSameExamplesWhoeverRunsIt) {
  std::unique_ptr<StreamExamples> a = Make();
  EXPECT_EQ(a->train_size(), 11);
  EXPECT_EQ(a->shard_size(0), 6);
  std::vector<int64_t> pass;
  for (int64_t first = 0; first < 6; first += 2) {
    for (int64_t id : Take(a.get(), 0, 1, first, 2)) pass.push_back(id);
  }
  std::vector<int64_t> sorted = pass;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_THAT(sorted, ElementsAre(0, 1, 2, 3, 4, 5));
  // A re-run of the middle step, and the same on a fresh worker.
  EXPECT_THAT(Take(a.get(), 0, 1, 2, 2),
              ElementsAreArray(pass.begin() + 2, pass.begin() + 4));
  std::unique_ptr<StreamExamples> b = Make();
  EXPECT_THAT(Take(b.get(), 0, 1, 4, 2),
              ElementsAreArray(pass.begin() + 4, pass.end()));
  // Another pass is another order of the same examples.
  std::vector<int64_t> other = Take(b.get(), 0, 2, 0, 6);
  EXPECT_NE(other, pass);
  std::sort(other.begin(), other.end());
  EXPECT_EQ(other, sorted);
  // Shard 1 holds the gzip file.
  std::vector<int64_t> second = Take(b.get(), 1, 0, 0, 5);
  std::sort(second.begin(), second.end());
  EXPECT_THAT(second, ElementsAre(6, 7, 8, 9, 10));

  HostBatch batch;
  int64_t bad;
  std::string why;
  EXPECT_THAT(a->Take(0, 0, 5, 2, &batch, &bad, &why).message(),
              HasSubstr("outside shard 0's 6 records"));
}

TEST_F(StreamExamplesTest, TestRangesInFileOrder) {
  std::unique_ptr<StreamExamples> s = Make();
  EXPECT_EQ(s->test_size(), 11);
  HostBatch batch;
  ASSERT_TRUE(s->TakeTest(0, 4, &batch).ok());
  EXPECT_THAT(Ids(batch), ElementsAre(0, 1, 2, 3));
  ASSERT_TRUE(s->TakeTest(4, 9, &batch).ok());
  EXPECT_THAT(Ids(batch), ElementsAre(4, 5, 6, 7, 8));
  ASSERT_TRUE(s->TakeTest(2, 4, &batch).ok());
  EXPECT_THAT(Ids(batch), ElementsAre(2, 3));
  ASSERT_TRUE(s->TakeTest(9, 11, &batch).ok());
  EXPECT_THAT(Ids(batch), ElementsAre(9, 10));
  EXPECT_EQ(s->TakeTest(10, 12, &batch).code(), absl::StatusCode::kOutOfRange);
}

// A Keras Embedding's ids (ids_in_vocab) are not wrapped: example 8's id 8
// of a vocabulary of 8 is an error naming the file, record and input, in
// training's steps as in the test (and tessera_predict's) ranges.
TEST_F(StreamExamplesTest, IdsOutsideABoundedVocabularyAreErrors) {
  model_.mutable_inputs(1)->mutable_sparse()->set_vocab_size(8);
  model_.mutable_inputs(1)->mutable_sparse()->set_ids_in_vocab(true);
  std::unique_ptr<StreamExamples> s = Make();
  HostBatch batch;
  absl::Status status = s->TakeTest(0, 6, &batch);  // file a: ids 0 to 7
  ASSERT_TRUE(status.ok()) << status;
  status = s->TakeTest(6, 9, &batch);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("id 8 of sparse input \"cat\" is outside [0, 8)"));
  int64_t bad = 0;
  std::string why;
  status = s->Take(1, 0, 0, 5, &batch, &bad, &why);
  EXPECT_FALSE(status.ok() && bad == 0) << "ids 8 to 10 were taken";
  EXPECT_THAT(std::string(status.message()) + why,
              HasSubstr("is outside [0, 8)"));
}

TEST_F(StreamExamplesTest, NoShardsIsAClearError) {
  auto made = StreamExamples::Create(data_, model_, 3, {}, {});
  EXPECT_EQ(made.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(made.status().message(), HasSubstr("WorkerConfig.train_shards"));
}

}  // namespace
}  // namespace tessera
