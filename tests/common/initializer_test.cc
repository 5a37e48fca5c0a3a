#include "common/initializer.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

Initializer Glorot(int64_t fan_in, int64_t fan_out, uint64_t seed) {
  Initializer init;
  init.set_kind(Initializer::GLOROT_UNIFORM);
  init.set_fan_in(fan_in);
  init.set_fan_out(fan_out);
  init.set_seed(seed);
  return init;
}

TEST(InitializerTest, ValuesDoNotDependOnHowTheVariableIsSplit) {
  const Initializer init = Glorot(30, 20, 7);
  std::vector<float> whole(600);
  FillInitialValues(init, 0, absl::MakeSpan(whole));
  std::vector<float> a(250), b(350);
  FillInitialValues(init, 0, absl::MakeSpan(a));
  FillInitialValues(init, 250, absl::MakeSpan(b));
  for (int i = 0; i < 250; ++i) EXPECT_EQ(a[i], whole[i]);
  for (int i = 0; i < 350; ++i) EXPECT_EQ(b[i], whole[250 + i]);
}

TEST(InitializerTest, GlorotStaysWithinItsLimitAndSeedsDiffer) {
  std::vector<float> x(10000), y(10000);
  FillInitialValues(Glorot(784, 128, 1), 0, absl::MakeSpan(x));
  FillInitialValues(Glorot(784, 128, 2), 0, absl::MakeSpan(y));
  const float limit = std::sqrt(6.0f / (784 + 128));
  double sum = 0;
  int same = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::abs(x[i]), limit);
    sum += x[i];
    same += x[i] == y[i];
  }
  EXPECT_NEAR(sum / x.size(), 0.0, limit * 0.05);
  EXPECT_LT(same, 10);
}

TEST(InitializerTest, NormalHasItsStandardDeviation) {
  Initializer init;
  init.set_kind(Initializer::NORMAL);
  init.set_stddev(0.5f);
  init.set_seed(3);
  std::vector<float> x(100000);
  FillInitialValues(init, 0, absl::MakeSpan(x));
  double sum = 0, sq = 0;
  for (float v : x) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += v * v;
  }
  const double mean = sum / x.size();
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / x.size() - mean * mean), 0.5, 0.01);
}

TEST(InitializerTest, ZerosAndConstant) {
  Initializer init;
  std::vector<float> x(5, 9.0f);
  FillInitialValues(init, 0, absl::MakeSpan(x));
  EXPECT_THAT(x, ::testing::Each(0.0f));
  init.set_kind(Initializer::CONSTANT);
  init.set_value(1.5f);
  FillInitialValues(init, 3, absl::MakeSpan(x));
  EXPECT_THAT(x, ::testing::Each(1.5f));
}

TEST(InitializerTest, InvalidInitializersNameTheProblem) {
  EXPECT_THAT(ValidateInitializer(Glorot(0, 3, 1)).message(),
              HasSubstr("fan_in"));
  Initializer uniform;
  uniform.set_kind(Initializer::UNIFORM);
  uniform.set_minval(1);
  uniform.set_maxval(1);
  EXPECT_THAT(ValidateInitializer(uniform).message(), HasSubstr("minval"));
  Initializer normal;
  normal.set_kind(Initializer::NORMAL);
  EXPECT_THAT(ValidateInitializer(normal).message(), HasSubstr("stddev"));
  // Values that would start a variable at NaN or infinity.
  normal.set_stddev(INFINITY);
  EXPECT_THAT(ValidateInitializer(normal).message(), HasSubstr("finite"));
  Initializer constant;
  constant.set_kind(Initializer::CONSTANT);
  constant.set_value(NAN);
  EXPECT_THAT(ValidateInitializer(constant).message(), HasSubstr("finite"));
  uniform.set_minval(-INFINITY);
  EXPECT_THAT(ValidateInitializer(uniform).message(), HasSubstr("finite"));
  constant.set_value(2.5f);
  EXPECT_TRUE(ValidateInitializer(constant).ok());
}

}  // namespace
}  // namespace tessera
