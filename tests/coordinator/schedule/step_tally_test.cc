#include "coordinator/schedule/step_tally.h"

#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;

TEST(StepTallyTest, CountsStepsDoneAndRunAgain) {
  StepTally tally(2);
  const absl::Time t0 = absl::FromUnixSeconds(100);
  tally.Finished(0, t0);
  tally.Finished(1, t0);
  tally.Finished(1, t0);
  tally.CountRerun(1);
  tally.CountRerun(2);
  EXPECT_EQ(tally.done(), 3);
  EXPECT_EQ(tally.rerun(), 3);
}

// A recent rate, not the average: steps before the window do not count,
// and a worker that finished none in it (one that joined too) shows 0.
TEST(StepTallyTest, RatesCountOnlyTheWindowPerWorker) {
  StepTally tally(2);
  const absl::Time t0 = absl::FromUnixSeconds(100);
  tally.Finished(1, t0);
  for (int i = 0; i < 20; ++i) tally.Finished(0, t0 + absl::Seconds(10 + i));
  tally.AddWorker();
  EXPECT_THAT(tally.per_second(absl::Seconds(10), t0 + absl::Seconds(30)),
              ElementsAre(DoubleEq(1.0), DoubleEq(0.0), DoubleEq(0.0)));
}

// More steps in the window than samples kept: the rate over the samples'
// own span.
TEST(StepTallyTest, ManyStepsInTheWindowUseTheSamplesSpan) {
  StepTally tally(1);
  const absl::Time t0 = absl::FromUnixSeconds(100);
  const int n = 2 * StepTally::kRateSamples;
  for (int i = 0; i < n; ++i) tally.Finished(0, t0 + absl::Milliseconds(i));
  const absl::Time now = t0 + absl::Milliseconds(n);
  const double rate = tally.per_second(absl::Seconds(10), now)[0];
  EXPECT_NEAR(rate, StepTally::kRateSamples / (StepTally::kRateSamples / 1e3),
              1.0);
}

}  // namespace
}  // namespace tessera
