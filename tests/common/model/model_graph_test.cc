#include "common/model/model_graph.h"

#include <string>

#include "common/model_spec.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ModelDef Parse(const std::string& text) {
  ModelDef model;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &model))
      << text;
  return model;
}

constexpr char kMlp[] = R"pb(
  inputs {
    name: "image"
    dense { shape: [ 784 ] }
  }
  label { kind: CLASS_INDEX num_classes: 10 }
  layers {
    name: "dense_0"
    inputs: "image"
    dense { units: 128 activation: RELU }
  }
  layers {
    name: "drop"
    inputs: "dense_0"
    dropout { rate: 0.2 }
  }
  layers {
    name: "dense_1"
    inputs: "drop"
    dense { units: 10 }
  }
  loss { kind: SOFTMAX_CROSS_ENTROPY input: "dense_1" }
)pb";

constexpr char kCnn[] = R"pb(
  inputs {
    name: "image"
    dense { shape: [ 28, 28, 1 ] }
  }
  label { kind: CLASS_INDEX num_classes: 10 }
  layers {
    name: "conv1"
    inputs: "image"
    conv2d { filters: 32 kernel_size: 3 activation: RELU }
  }
  layers {
    name: "pool1"
    inputs: "conv1"
    max_pool2d {}
  }
  layers {
    name: "conv2"
    inputs: "pool1"
    conv2d {
      filters: 64
      kernel_size: [ 3, 3 ]
      activation: RELU
    }
  }
  layers {
    name: "pool2"
    inputs: "conv2"
    max_pool2d {}
  }
  layers {
    name: "flat"
    inputs: "pool2"
    flatten {}
  }
  layers {
    name: "bn"
    inputs: "flat"
    batch_norm {}
  }
  layers {
    name: "logits"
    inputs: "bn"
    dense { units: 10 }
  }
  loss { kind: SOFTMAX_CROSS_ENTROPY input: "logits" }
)pb";

TEST(ModelGraphTest, MlpDescriptionHasThePresetsVariables) {
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(Parse(kMlp), 42);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ModelConfig preset;
  preset.set_kind("mlp");
  preset.set_input_dim(784);
  preset.add_hidden_units(128);
  preset.set_num_classes(10);
  absl::StatusOr<std::vector<VariableDef>> expected =
      ModelVariables(preset, 42);
  ASSERT_TRUE(expected.ok());
  ASSERT_EQ(graph->variables.size(), expected->size());
  for (size_t i = 0; i < expected->size(); ++i) {
    const VariableDef& got = graph->variables[i];
    const VariableDef& want = (*expected)[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.shape, want.shape);
    EXPECT_EQ(got.initializer.SerializeAsString(),
              want.initializer.SerializeAsString())
        << got.name << ": " << got.initializer.ShortDebugString() << " vs "
        << want.initializer.ShortDebugString();
  }
}

TEST(ModelGraphTest, CnnShapesAndKerasFans) {
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(Parse(kCnn), 1);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->tensors.at("conv1").shape, (Shape{26, 26, 32}));
  EXPECT_EQ(graph->tensors.at("pool1").shape, (Shape{13, 13, 32}));
  EXPECT_EQ(graph->tensors.at("conv2").shape, (Shape{11, 11, 64}));
  EXPECT_EQ(graph->tensors.at("pool2").shape, (Shape{5, 5, 64}));
  EXPECT_EQ(graph->tensors.at("flat").shape, (Shape{1600}));
  const VariableDef& k2 = graph->variables[2];
  ASSERT_EQ(k2.name, "conv2/kernel");
  EXPECT_EQ(k2.shape, (Shape{3, 3, 32, 64}));
  EXPECT_EQ(k2.initializer.fan_in(), 3 * 3 * 32);
  EXPECT_EQ(k2.initializer.fan_out(), 3 * 3 * 64);
}

TEST(ModelGraphTest, DefaultsAreKerasAndWrittenOut) {
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(Parse(kCnn), 1);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const ModelDef& m = graph->resolved;
  EXPECT_EQ(m.layers(0).output(), "conv1");
  EXPECT_EQ(m.layers(0).conv2d().kernel_size_size(), 2);
  EXPECT_EQ(m.layers(0).conv2d().strides(1), 1);
  EXPECT_TRUE(m.layers(0).conv2d().use_bias());
  EXPECT_EQ(m.layers(1).max_pool2d().pool_size(0), 2);
  EXPECT_EQ(m.layers(1).max_pool2d().strides(0), 2);
  EXPECT_FLOAT_EQ(m.layers(5).batch_norm().momentum(), 0.99f);
  EXPECT_FLOAT_EQ(m.layers(5).batch_norm().epsilon(), 1e-3f);
  EXPECT_EQ(m.layers(6).dense().kernel_initializer().kind(),
            Initializer::GLOROT_UNIFORM);
}

TEST(ModelGraphTest, BatchNormStatisticsAreMovingAverages) {
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(Parse(kCnn), 1);
  ASSERT_TRUE(graph.ok()) << graph.status();
  int statistics = 0;
  for (const VariableDef& v : graph->variables) {
    if (v.name == "bn/moving_mean" || v.name == "bn/moving_variance") {
      ASSERT_TRUE(v.update_rule.has_value()) << v.name;
      EXPECT_FLOAT_EQ(v.update_rule->moving_average().momentum(), 0.99f);
      EXPECT_EQ(v.initializer.kind(), v.name == "bn/moving_mean"
                                          ? Initializer::ZEROS
                                          : Initializer::ONES);
      ++statistics;
    } else {
      EXPECT_FALSE(v.update_rule.has_value()) << v.name;
    }
  }
  EXPECT_EQ(statistics, 2);
}

TEST(ModelGraphTest, SamePaddingFollowsTf) {
  ModelDef m = Parse(kCnn);
  m.mutable_layers(0)->mutable_conv2d()->set_padding(SAME);
  m.mutable_layers(0)->mutable_conv2d()->add_strides(2);
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m, 1);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->tensors.at("conv1").shape, (Shape{14, 14, 32}));
  absl::StatusOr<WindowAxis> axis = WindowAlong(28, 3, 2, SAME);
  ASSERT_TRUE(axis.ok());
  EXPECT_EQ(axis->pad_before, 0);  // total 1: the odd pixel goes after
  EXPECT_EQ(WindowAlong(5, 3, 1, SAME)->pad_before, 1);
}

constexpr char kDlrm[] = R"pb(
  inputs {
    name: "dense"
    dense { shape: [ 13 ] }
  }
  inputs {
    name: "c0"
    sparse { vocab_size: 100 }
  }
  inputs {
    name: "c1"
    sparse { vocab_size: 100 max_hotness: 3 }
  }
  inputs {
    name: "c2"
    sparse {}
  }
  label { kind: BINARY }
  layers {
    name: "bottom"
    inputs: "dense"
    dense { units: 4 activation: RELU }
  }
  layers {
    name: "emb01"
    inputs: [ "c0", "c1" ]
    embedding_bag { table: "t" dim: 4 }
  }
  layers {
    name: "emb2"
    inputs: "c2"
    embedding_bag { dim: 4 combiner: MEAN }
  }
  layers {
    name: "interact"
    inputs: [ "bottom", "emb01", "emb2" ]
    dot_interaction { concat_first_input: true }
  }
  layers {
    name: "top"
    inputs: "interact"
    dense { units: 1 }
  }
  loss { kind: SIGMOID_CROSS_ENTROPY input: "top" }
)pb";

TEST(ModelGraphTest, EmbeddingBagsAndDotInteraction) {
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(Parse(kDlrm), 7);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->tensors.at("emb01").shape, (Shape{2, 4}));
  EXPECT_EQ(graph->tensors.at("emb2").shape, (Shape{4}));
  // 4 vectors: 6 pairs, after the 4 values of the first input.
  EXPECT_EQ(graph->tensors.at("interact").shape, (Shape{10}));
  std::vector<std::string> names;
  for (const VariableDef& v : graph->variables) names.push_back(v.name);
  EXPECT_THAT(names, ::testing::ElementsAre("bottom/kernel", "bottom/bias", "t",
                                            "emb2", "top/kernel", "top/bias"));
  EXPECT_TRUE(graph->variables[2].sparse);
  EXPECT_EQ(graph->variables[2].shape, (Shape{100, 4}));
  EXPECT_EQ(graph->variables[3].shape, (Shape{0, 4}));  // hashed: grows
}

TEST(ModelGraphTest, TableSharedWithAnotherShapeIsRefused) {
  ModelDef m = Parse(kDlrm);
  m.mutable_layers(2)->mutable_embedding_bag()->set_table("t");
  m.mutable_layers(2)->mutable_embedding_bag()->set_dim(8);
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m, 7);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("\"t\""));
}

TEST(ModelGraphTest, UnknownTensorNamesTheLayer) {
  ModelDef m = Parse(kMlp);
  m.mutable_layers(1)->set_inputs(0, "dense_O");
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m, 1);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message(),
            "model: layer \"drop\" reads tensor \"dense_O\", which no input or "
            "layer writes");
}

TEST(ModelGraphTest, TwoLayersOfOneNameAreCalledThat) {
  ModelDef m = Parse(kMlp);
  m.mutable_layers(1)->set_name("dense_0");  // also writes "dense_0"
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m, 1);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(),
              HasSubstr("two layers are named \"dense_0\""));
  EXPECT_THAT(graph.status().message(),
              Not(HasSubstr("written by layer \"dense_0\" and by layer")));
}

TEST(ModelGraphTest, AModelWithoutALossIsToldToAddOne) {
  ModelDef m = Parse(kMlp);
  m.clear_loss();
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m, 1);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("the model has no loss"));
  EXPECT_THAT(graph.status().message(), HasSubstr("add loss {"));
  EXPECT_THAT(graph.status().message(), Not(HasSubstr("tensor \"\"")));

  m = Parse(kMlp);
  m.mutable_loss()->clear_input();
  graph = BuildModelGraph(m, 1);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(),
              HasSubstr("the loss names no input tensor"));
}

TEST(ModelGraphTest, CycleIsNamed) {
  ModelDef m = Parse(kMlp);
  m.mutable_layers(0)->set_inputs(0, "dense_1");
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m, 1);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(),
              HasSubstr("layers form a cycle: \"dense_0\" -> \"drop\" -> "
                        "\"dense_1\" -> \"dense_0\""));
}

TEST(ModelGraphTest, ShapeMismatchNamesLayerAndShapes) {
  ModelDef m = Parse(kCnn);
  m.mutable_layers()->DeleteSubrange(4, 1);  // no flatten before batch_norm
  m.mutable_layers(4)->set_inputs(0, "pool2");
  m.mutable_layers(5)->set_inputs(0, "bn");
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m, 1);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message(),
            "layer \"logits\" (dense): input \"bn\" has shape [5, 5, 64], "
            "needs a vector [d] (add a flatten layer)");
}

TEST(ModelGraphTest, LossThatDoesNotFitTheLabel) {
  ModelDef m = Parse(kMlp);
  m.mutable_loss()->set_kind(LossDef::SIGMOID_CROSS_ENTROPY);
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m, 1);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("needs a binary label"));

  m = Parse(kMlp);
  m.mutable_label()->set_num_classes(5);
  graph = BuildModelGraph(m, 1);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(),
              HasSubstr("of shape [10] but the label has 5 classes"));
}

TEST(ModelGraphTest, SparseFieldIntoDenseLayerIsRefused) {
  ModelDef m = Parse(kDlrm);
  m.mutable_layers(0)->set_inputs(0, "c0");
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m, 1);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(),
              HasSubstr("only embedding_bag layers read sparse fields"));
}

TEST(ModelGraphTest, BadParametersAreRefused) {
  ModelDef m = Parse(kMlp);
  m.mutable_layers(1)->mutable_dropout()->set_rate(1.0f);
  EXPECT_FALSE(BuildModelGraph(m, 1).ok());
  m = Parse(kCnn);
  m.mutable_layers(0)->mutable_conv2d()->clear_kernel_size();
  m.mutable_layers(0)->mutable_conv2d()->add_kernel_size(40);
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m, 1);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("does not fit input"));
  m = Parse(kMlp);
  m.mutable_layers(2)->set_name("dense_0");
  EXPECT_FALSE(BuildModelGraph(m, 1).ok());
}

TEST(ModelGraphTest, MisspeltParameterIsAParseError) {
  ModelDef m;
  EXPECT_FALSE(
      google::protobuf::TextFormat::ParseFromString(R"pb(layers {
                                                           name: "a"
                                                           dense { unit: 3 }
                                                         })pb",
                                                    &m));
}

}  // namespace
}  // namespace tessera
