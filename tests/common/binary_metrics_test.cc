#include "common/binary_metrics.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

double Auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  absl::StatusOr<double> auc = RocAuc(scores, labels);
  EXPECT_TRUE(auc.ok()) << auc.status();
  return auc.ok() ? *auc : -1;
}

TEST(RocAucTest, PerfectReversedAndAllTied) {
  // scikit-learn's roc_auc_score example.
  EXPECT_DOUBLE_EQ(Auc({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(Auc({0.1f, 0.2f, 0.7f, 0.9f}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(Auc({0.9f, 0.7f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
  EXPECT_DOUBLE_EQ(Auc({0.5f, 0.5f, 0.5f, 0.5f, 0.5f}, {0, 1, 1, 0, 1}), 0.5);
}

TEST(RocAucTest, TiesCountOneHalf) {
  // Positives score 0.5 and 0.9; negatives 0.5 and 0.1. Pairs (pos, neg):
  // (0.5, 0.5) tie = 1/2, (0.5, 0.1) = 1, (0.9, 0.5) = 1, (0.9, 0.1) = 1:
  // 3.5 of 4.
  EXPECT_DOUBLE_EQ(Auc({0.5f, 0.1f, 0.9f, 0.5f}, {1, 0, 1, 0}), 3.5 / 4);
  // Three positives, two negatives; scores 1 1 2 2 3 with labels
  // 0 1 1 0 1. Pairs: pos(1): vs neg 1 tie 0.5, vs neg 2 0 -> 0.5;
  // pos(2): vs 1 -> 1, vs 2 tie 0.5 -> 1.5; pos(3): 2. Total 4 of 6.
  EXPECT_DOUBLE_EQ(Auc({1, 1, 2, 2, 3}, {0, 1, 1, 0, 1}), 4.0 / 6);
  // The order of the input does not matter.
  EXPECT_DOUBLE_EQ(Auc({3, 2, 1, 2, 1}, {1, 0, 1, 1, 0}), 4.0 / 6);
}

TEST(RocAucTest, RejectsOneClassBadLabelsNaNAndSizeMismatch) {
  EXPECT_EQ(RocAuc(std::vector<float>{0.1f, 0.2f}, std::vector<float>{1, 1})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RocAuc({}, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::Status s =
      RocAuc(std::vector<float>{0.1f, 0.2f}, std::vector<float>{1, 0.5f})
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("label 1 is 0.5"));
  s = RocAuc(std::vector<float>{0.1f, NAN}, std::vector<float>{1, 0}).status();
  EXPECT_THAT(s.message(), HasSubstr("score 1 is NaN"));
  s = RocAuc(std::vector<float>{0.1f}, std::vector<float>{1, 0}).status();
  EXPECT_THAT(s.message(), HasSubstr("1 predictions but 2 labels"));
}

TEST(LogLossTest, MatchesHandComputedValues) {
  absl::StatusOr<double> loss =
      LogLoss(std::vector<float>{0.8f, 0.25f}, std::vector<float>{1, 0});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, -(std::log(0.8) + std::log(0.75)) / 2, 1e-7);
  loss = LogLoss(std::vector<float>{0.5f}, std::vector<float>{1});
  EXPECT_NEAR(*loss, std::log(2.0), 1e-7);
  // A certain, wrong prediction is clipped, not infinite.
  loss = LogLoss(std::vector<float>{0.0f, 1.0f}, std::vector<float>{1, 1});
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, -std::log(1e-15) / 2, 1e-6);
}

TEST(LogLossTest, RejectsBadProbabilitiesAndEmptyInput) {
  EXPECT_THAT(LogLoss(std::vector<float>{1.5f}, std::vector<float>{1})
                  .status()
                  .message(),
              HasSubstr("probability 0 is 1.5"));
  EXPECT_EQ(LogLoss({}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      LogLoss(std::vector<float>{0.5f}, std::vector<float>{2}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
