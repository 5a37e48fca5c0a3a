#include "tools/predict/prediction_lines.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(PredictionLinesTest, JsonLinesAndCsvWithTheClass) {
  PredictionLayout layout;
  layout.width = 3;
  const std::vector<float> y = {0.25f, 0.5f, 0.25f};
  std::string line;
  AppendPrediction(layout, 7, y, &line);
  EXPECT_EQ(line,
            "{\"index\":7,\"probabilities\":[0.25,0.5,0.25],\"class\":1}\n");
  layout.format = PredictionFormat::kCsv;
  EXPECT_EQ(PredictionHeader(layout), "index,p0,p1,p2,class");
  line.clear();
  AppendPrediction(layout, 7, y, &line);
  EXPECT_EQ(line, "7,0.25,0.5,0.25,1\n");
}

TEST(PredictionLinesTest, SigmoidClassAndRegression) {
  PredictionLayout layout;
  std::string line;
  const float p = 0.5f;
  AppendPrediction(layout, 0, absl::MakeConstSpan(&p, 1), &line);
  EXPECT_EQ(line, "{\"index\":0,\"probabilities\":[0.5],\"class\":1}\n");
  layout.classes = false;
  line.clear();
  const float v = 0.1f;  // 9 digits: reads back as the same float
  AppendPrediction(layout, 1, absl::MakeConstSpan(&v, 1), &line);
  EXPECT_EQ(line, "{\"index\":1,\"predictions\":[0.100000001]}\n");
  EXPECT_EQ(PredictionHeader(layout), "");
}

// Issue #42: a regression printed "accuracy 0.0000"; its figure is the
// loss, the mean squared error.
TEST(PredictionLinesTest, ARegressionHasItsMseAndNoAccuracy) {
  PredictionLayout layout;
  EXPECT_EQ(LabeledMetrics(layout, 0.25, 0.5),
            "  loss 0.2500  accuracy 0.5000");
  layout.classes = false;
  EXPECT_EQ(LabeledMetrics(layout, 0.25, 0), "  loss (MSE) 0.2500");
}

}  // namespace
}  // namespace tessera
