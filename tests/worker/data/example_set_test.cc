#include "worker/data/example_set.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

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

// An empty test set would report accuracy 0.0000 as if it were a result.
TEST_F(CountExamplesTest, EmptySetIsAnError) {
  absl::StatusOr<int64_t> n = CountExamples(data_, false);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(n.status().message(), HasSubstr("the test set is empty"));
}

}  // namespace
}  // namespace tessera
