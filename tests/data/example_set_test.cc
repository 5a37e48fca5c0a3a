#include "data/example_set.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/data/idx/idx_test_files.h"
#include "tests/data/stream/stream_test_files.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CountExamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        absl::StrCat(::testing::TempDir(), "/count_examples_test_", getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/train.tsv") << "1\t3\ta1\n0\t\tb2\n1\t7\t\n";
    std::ofstream(dir_ + "/test.tsv");  // empty
    data_.set_format("criteo");
    data_.set_train_path(dir_ + "/train.tsv");
    data_.set_test_path(dir_ + "/test.tsv");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  DataConfig data_;
};

TEST_F(CountExamplesTest, CapsAtMostTheFile) {
  EXPECT_EQ(*CountExamples(data_, true), 3);
  data_.set_train_examples(2);
  EXPECT_EQ(*CountExamples(data_, true), 2);
  data_.set_train_examples(3);
  EXPECT_EQ(*CountExamples(data_, true), 3);
}

// Asking for more than the file holds was quietly capped; now it is an
// error naming both counts.
TEST_F(CountExamplesTest, MoreThanTheFileHoldsIsAnError) {
  data_.set_train_examples(5);
  absl::StatusOr<int64_t> n = CountExamples(data_, true);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(n.status().message(),
              HasSubstr("train_examples is 5 but " + dir_ +
                        "/train.tsv holds only 3 examples"));
  data_.set_train_examples(-1);
  EXPECT_THAT(CountExamples(data_, true).status().message(),
              HasSubstr("must be >= 0"));
}

// Issue #35: a verified count is kept per file version and not read
// again; a declared count takes an IDX header at its word (whoever loads
// the examples verifies them), and the job's cap applies to both.
TEST_F(CountExamplesTest, IdxCountsAreKeptAndHeadersTakenAtTheirWord) {
  auto write = [&](const std::string& name, const idx_test::Bytes& bytes) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path;
  };
  DataConfig idx;
  idx.set_format("idx");
  // Declares 3 items of 2 bytes, holds 2.
  idx.set_train_images(
      write("lying", idx_test::Ubyte({3, 1, 2}, {1, 2, 3, 4})));
  VerifiedCountCache cache;
  EXPECT_EQ(CountExamples(idx, true, &cache).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(*DeclaredExamples(idx, true, &cache), 3);
  idx.set_train_examples(2);
  EXPECT_EQ(*DeclaredExamples(idx, true, &cache), 2);
  EXPECT_EQ(cache.misses(), 1);  // headers are not counts to keep

  idx.set_train_examples(0);
  idx.set_train_images(write("good", idx_test::Ubyte({2, 1, 2}, {1, 2, 3, 4})));
  EXPECT_EQ(*CountExamples(idx, true, &cache), 2);
  EXPECT_EQ(*CountExamples(idx, true, &cache), 2);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 2);
}

// An empty test set would report accuracy 0.0000 as if it were a result.
TEST_F(CountExamplesTest, EmptySetIsAnError) {
  absl::StatusOr<int64_t> n = CountExamples(data_, false);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(n.status().message(), HasSubstr("the test set is empty"));
}

// Prediction reads new examples, which may have no labels; training and
// evaluation still need them.
TEST_F(CountExamplesTest, CriteoWithoutLabelsLoadsOnlyWhenLabelsAreOptional) {
  ModelDef model;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        inputs {
          name: "C1"
          sparse {}
        }
        inputs {
          name: "dense"
          dense { shape: [ 1 ] }
        }
        label { kind: BINARY }
        layers {
          name: "e"
          inputs: "C1"
          embedding_bag { dim: 2 }
        }
        layers {
          name: "logit"
          inputs: [ "e", "dense" ]
          dense { units: 1 }
        }
        loss { kind: SIGMOID_CROSS_ENTROPY input: "logit" }
      )pb",
      &model));
  std::ofstream(dir_ + "/new.tsv") << "3\ta1\n\tb2\n";
  data_.set_test_path(dir_ + "/new.tsv");
  absl::StatusOr<std::unique_ptr<ExampleSet>> set =
      LoadExamples(data_, model, false, 0, 2);
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr("new.tsv:1: expected 3"));
  set = LoadExamples(data_, model, false, 0, 2, LabelUse::kOptional);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_FALSE((*set)->has_labels());
  HostBatch batch;
  const std::vector<int64_t> indices = {1, 0};
  ASSERT_TRUE((*set)->Gather(indices, &batch).ok());
  EXPECT_FALSE(batch.labeled);
  EXPECT_THAT(batch.labels, ElementsAre(0.0f, 0.0f));
  EXPECT_THAT(batch.ids[0], ElementsAre(0xb2, 0xa1));
  // A labeled file still loads labeled.
  set = LoadExamples(data_, model, true, 0, 3, LabelUse::kOptional);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE((*set)->has_labels());
  ASSERT_TRUE((*set)->Gather(indices, &batch).ok());
  EXPECT_TRUE(batch.labeled);
  EXPECT_THAT(batch.labels, ElementsAre(0.0f, 1.0f));
}

TEST_F(CountExamplesTest, ImagesWithoutALabelsFileNeedOptionalLabels) {
  ModelDef model;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        inputs {
          name: "x"
          dense { shape: [ 2 ] }
        }
        label { kind: CLASS_INDEX num_classes: 10 }
        layers {
          name: "logits"
          inputs: "x"
          dense { units: 10 }
        }
        loss { kind: SOFTMAX_CROSS_ENTROPY input: "logits" }
      )pb",
      &model));
  // An IDX ubyte file: 3 images of 1 x 2 pixels.
  const std::string images = dir_ + "/img";
  std::ofstream(images, std::ios::binary)
      << std::string("\0\0\x08\x03\0\0\0\x03\0\0\0\x01\0\0\0\x02", 16)
      << std::string("\x01\x02\x03\x04\x05\x06", 6);
  DataConfig data;
  data.set_format("idx");
  data.set_test_images(images);
  absl::StatusOr<std::unique_ptr<ExampleSet>> set =
      LoadExamples(data, model, false, 0, 3);
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(),
              HasSubstr("no labels file (test_labels)"));
  set = LoadExamples(data, model, false, 0, 3, LabelUse::kOptional);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_FALSE((*set)->has_labels());
  HostBatch batch;
  const std::vector<int64_t> indices = {2};
  ASSERT_TRUE((*set)->Gather(indices, &batch).ok());
  EXPECT_FALSE(batch.labeled);
  EXPECT_THAT(batch.class_labels, ElementsAre(0));
  EXPECT_FLOAT_EQ(batch.dense[0][1], 6 / 255.0f);
}

// The tools that hold a set in memory (prediction, the evaluator, the
// one-process trainer) read a streamed job's own files, in file order,
// through the workers' reader; they used to read the IDX defaults.
class StreamedExampleSetTest : public stream_test::StreamFileTest {
 protected:
  void SetUp() override {
    StreamFileTest::SetUp();
    model_ = stream_test::TestModel();
    data_ = stream_test::TestData();
    // Names sort b-before-c: the set is read in sorted file order.
    WriteExamples("train-b", 0, 4);
    WriteExamples("train-c", 4, 3, /*gzip=*/true);
    WriteExamples("test-a", 100, 5);
    data_.add_train_files(Path("train-*"));
    data_.add_test_files(Path("test-*"));
  }

  ModelDef model_;
  DataConfig data_;
};

TEST_F(StreamedExampleSetTest, CountsAndLoadsTheJobsOwnRecords) {
  EXPECT_EQ(*CountExamples(data_, /*train=*/true), 7);
  EXPECT_EQ(*CountExamples(data_, /*train=*/false), 5);
  data_.set_test_examples(3);
  EXPECT_EQ(*CountExamples(data_, /*train=*/false), 3);

  absl::StatusOr<std::unique_ptr<ExampleSet>> test =
      LoadExamples(data_, model_, /*train=*/false, 1, 3);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ((*test)->size(), 3);
  EXPECT_TRUE((*test)->has_labels());
  HostBatch batch;
  const std::vector<int64_t> indices = {2, 0, 2};
  ASSERT_TRUE((*test)->Gather(indices, &batch).ok());
  ASSERT_EQ(batch.size, 3);
  // Records 101..103 of the test file: x = (id, id + .5, -id), cat =
  // {id, 7}, y = id % 2.
  EXPECT_THAT(batch.dense[0], ElementsAre(103, 103.5, -103, 101, 101.5, -101,
                                          103, 103.5, -103));
  EXPECT_THAT(batch.ids[0], ElementsAre(103, 7, 101, 7, 103, 7));
  EXPECT_THAT(batch.offsets[0], ElementsAre(0, 2, 4, 6));
  EXPECT_THAT(batch.labels, ElementsAre(1, 1, 1));

  absl::StatusOr<std::unique_ptr<ExampleSet>> train =
      LoadExamples(data_, model_, /*train=*/true, 0, 7);
  ASSERT_TRUE(train.ok()) << train.status();
  const std::vector<int64_t> all = {0, 3, 4, 6};
  ASSERT_TRUE((*train)->Gather(all, &batch).ok());
  EXPECT_THAT(batch.labels, ElementsAre(0, 1, 0, 0));
  EXPECT_EQ(batch.dense[0][3 * 3], 6);
  EXPECT_EQ((*train)->Gather(std::vector<int64_t>{7}, &batch).code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(StreamedExampleSetTest, ErrorsNameTheFiles) {
  EXPECT_EQ(LoadExamples(data_, model_, false, 3, 5).status().code(),
            absl::StatusCode::kOutOfRange);
  data_.clear_test_files();
  data_.add_test_files(Path("missing-*"));
  absl::Status s = CountExamples(data_, false).status();
  EXPECT_THAT(s.message(), HasSubstr("test_files"));
  EXPECT_THAT(s.message(), HasSubstr("missing-*"));
}

}  // namespace
}  // namespace tessera
