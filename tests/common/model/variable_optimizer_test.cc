#include "common/model/variable_optimizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

JobConfig ParseJob(const std::string& text) {
  JobConfig job;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &job))
      << text;
  return job;
}

VariableDef Table(const std::string& name) {
  VariableDef v;
  v.name = name;
  v.shape = {0, 8};
  v.sparse = true;
  return v;
}

VariableDef Dense(const std::string& name) {
  VariableDef v;
  v.name = name;
  v.shape = {8, 1};
  return v;
}

TEST(VariableOptimizerTest, TableEntryThenEmbeddingOptimizerThenOptimizer) {
  const JobConfig job = ParseJob(R"pb(
    optimizer {
      learning_rate: 0.001
      adam {}
    }
    embedding_optimizer {
      learning_rate: 0.05
      adagrad {}
    }
    table_optimizers {
      key: "wide"
      value {
        learning_rate: 0.5
        sgd {}
      }
    }
  )pb");
  EXPECT_TRUE(VariableOptimizer(job, Table("wide")).has_sgd());
  EXPECT_FLOAT_EQ(VariableOptimizer(job, Table("wide")).learning_rate(), 0.5f);
  EXPECT_TRUE(VariableOptimizer(job, Table("deep")).has_adagrad());
  EXPECT_TRUE(VariableOptimizer(job, Dense("wide")).has_adam())
      << "a dense variable of a table's name is still dense";
  VariableDef moving = Dense("bn/moving_mean");
  moving.update_rule.emplace();
  moving.update_rule->mutable_moving_average()->set_momentum(0.9f);
  EXPECT_TRUE(VariableOptimizer(job, moving).has_moving_average());

  const JobConfig plain = ParseJob("optimizer { adam {} }");
  EXPECT_TRUE(VariableOptimizer(plain, Table("deep")).has_adam())
      << "without embedding_optimizer tables train with optimizer";
}

TEST(VariableOptimizerTest, UnknownTableIsRefusedNamingTheTables) {
  const JobConfig job = ParseJob(R"pb(
    table_optimizers {
      key: "wdie"
      value { sgd {} }
    }
  )pb");
  const absl::Status s =
      CheckTableOptimizers(job, {Table("wide"), Table("deep"), Dense("out")});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("\"wdie\" is not a table"));
  EXPECT_THAT(s.message(), HasSubstr("tables: wide, deep"));
  EXPECT_THAT(CheckTableOptimizers(job, {Dense("wdie")}).message(),
              HasSubstr("it has none"));
}

TEST(VariableOptimizerTest, MovingAverageIsNotAnOptimizer) {
  const JobConfig job = ParseJob(R"pb(
    table_optimizers {
      key: "wide"
      value { moving_average { momentum: 0.9 } }
    }
  )pb");
  EXPECT_THAT(CheckTableOptimizers(job, {Table("wide")}).message(),
              HasSubstr("moving_average is not an optimizer"));
  EXPECT_TRUE(CheckTableOptimizers(ParseJob(""), {Table("wide")}).ok());
}

}  // namespace
}  // namespace tessera
