#include "common/model_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ModelConfig Mlp() {
  ModelConfig m;
  m.set_kind("mlp");
  m.set_input_dim(784);
  m.add_hidden_units(128);
  m.set_num_classes(10);
  m.set_dropout(0.2f);
  return m;
}

TEST(ModelSpecTest, MlpHasKernelAndBiasPerLayerInOrder) {
  absl::StatusOr<std::vector<VariableDef>> vars = ModelVariables(Mlp(), 42);
  ASSERT_TRUE(vars.ok()) << vars.status();
  ASSERT_EQ(vars->size(), 4u);
  EXPECT_EQ((*vars)[0].name, "dense_0/kernel");
  EXPECT_THAT((*vars)[0].shape, ElementsAre(784, 128));
  EXPECT_EQ((*vars)[0].initializer.kind(), Initializer::GLOROT_UNIFORM);
  EXPECT_EQ((*vars)[1].name, "dense_0/bias");
  EXPECT_THAT((*vars)[1].shape, ElementsAre(128));
  EXPECT_EQ((*vars)[1].initializer.kind(), Initializer::ZEROS);
  EXPECT_EQ((*vars)[2].name, "dense_1/kernel");
  EXPECT_THAT((*vars)[2].shape, ElementsAre(128, 10));
  EXPECT_EQ((*vars)[3].name, "dense_1/bias");
  // Layers draw from different streams.
  EXPECT_NE((*vars)[0].initializer.seed(), (*vars)[2].initializer.seed());
}

TEST(ModelSpecTest, BadConfigsNameTheField) {
  ModelConfig m = Mlp();
  m.set_kind("cnn");
  EXPECT_THAT(ValidateModelConfig(m).message(), HasSubstr("model.kind"));
  m = Mlp();
  m.set_hidden_units(0, 0);
  EXPECT_THAT(ValidateModelConfig(m).message(),
              HasSubstr("model.hidden_units[0]"));
  m = Mlp();
  m.set_dropout(1.0f);
  EXPECT_THAT(ValidateModelConfig(m).message(), HasSubstr("model.dropout"));
  m = Mlp();
  m.set_num_classes(1);
  EXPECT_THAT(ModelVariables(m, 1).status().message(),
              HasSubstr("model.num_classes"));
}

ModelConfig Ctr() {
  ModelConfig m;
  m.set_kind("ctr");
  m.set_embedding_dim(8);
  m.set_num_fields(3);
  m.set_num_dense(13);
  m.set_vocab_size(1000);
  m.add_hidden_units(16);
  return m;
}

TEST(ModelSpecTest, CtrHasOneSparseTablePerFieldThenTheDenseLayers) {
  absl::StatusOr<std::vector<VariableDef>> vars = ModelVariables(Ctr(), 42);
  ASSERT_TRUE(vars.ok()) << vars.status();
  ASSERT_EQ(vars->size(), 7u);
  for (int f = 0; f < 3; ++f) {
    const VariableDef& table = (*vars)[f];
    EXPECT_EQ(table.name, "embedding_" + std::to_string(f));
    EXPECT_THAT(table.shape, ElementsAre(1000, 8));
    EXPECT_TRUE(table.sparse);
    EXPECT_EQ(table.initializer.kind(), Initializer::UNIFORM);
    EXPECT_FLOAT_EQ(table.initializer.minval(), -0.05f);
    EXPECT_FLOAT_EQ(table.initializer.maxval(), 0.05f);
  }
  EXPECT_NE((*vars)[0].initializer.seed(), (*vars)[1].initializer.seed());
  // 3 fields * 8 + 13 dense features -> 16 -> 1 logit.
  EXPECT_EQ((*vars)[3].name, "dense_0/kernel");
  EXPECT_THAT((*vars)[3].shape, ElementsAre(37, 16));
  EXPECT_FALSE((*vars)[3].sparse);
  EXPECT_EQ((*vars)[4].name, "dense_0/bias");
  EXPECT_EQ((*vars)[5].name, "dense_1/kernel");
  EXPECT_THAT((*vars)[5].shape, ElementsAre(16, 1));
  EXPECT_THAT((*vars)[6].shape, ElementsAre(1));
  for (int v = 0; v < 3; ++v) {
    EXPECT_NE((*vars)[v].initializer.seed(), (*vars)[3].initializer.seed());
    EXPECT_NE((*vars)[v].initializer.seed(), (*vars)[5].initializer.seed());
  }
}

TEST(ModelSpecTest, CtrGrowingTablesHaveNoRowsAndDenseOnlyIsAllowed) {
  ModelConfig m = Ctr();
  m.set_vocab_size(0);
  m.set_num_dense(0);
  m.clear_hidden_units();
  m.set_combiner("mean");
  absl::StatusOr<std::vector<VariableDef>> vars = ModelVariables(m, 1);
  ASSERT_TRUE(vars.ok()) << vars.status();
  ASSERT_EQ(vars->size(), 5u);
  EXPECT_THAT((*vars)[0].shape, ElementsAre(0, 8));
  EXPECT_THAT((*vars)[3].shape, ElementsAre(24, 1));
}

TEST(ModelSpecTest, BadCtrConfigsNameTheField) {
  ModelConfig m = Ctr();
  m.set_embedding_dim(0);
  EXPECT_THAT(ValidateModelConfig(m).message(),
              HasSubstr("model.embedding_dim"));
  m = Ctr();
  m.set_num_fields(0);
  EXPECT_THAT(ValidateModelConfig(m).message(), HasSubstr("model.num_fields"));
  m = Ctr();
  m.set_num_dense(-1);
  EXPECT_THAT(ValidateModelConfig(m).message(), HasSubstr("model.num_dense"));
  m = Ctr();
  m.set_vocab_size(-5);
  EXPECT_THAT(ValidateModelConfig(m).message(), HasSubstr("model.vocab_size"));
  m = Ctr();
  m.set_combiner("max");
  EXPECT_THAT(ValidateModelConfig(m).message(),
              AllOf(HasSubstr("model.combiner"), HasSubstr("max")));
  m = Ctr();
  m.add_hidden_units(-3);
  EXPECT_THAT(ModelVariables(m, 1).status().message(),
              HasSubstr("model.hidden_units[1]"));
  m = Ctr();
  m.set_dropout(-0.1f);
  EXPECT_THAT(ValidateModelConfig(m).message(), HasSubstr("model.dropout"));
  EXPECT_TRUE(ValidateModelConfig(Ctr()).ok());
}

}  // namespace
}  // namespace tessera
