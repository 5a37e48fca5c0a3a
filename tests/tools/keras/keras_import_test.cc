#include "tools/keras/keras_import.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/keras/keras_graph.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

json Dense(const std::string& name, int units, const std::string& activation,
           const std::string& input) {
  return {{"class_name", "Dense"},
          {"name", name},
          {"config",
           {{"name", name}, {"units", units}, {"activation", activation}}},
          {"inbound_nodes", json::array({json::array({{input, 0, 0, {}}})})}};
}

json Input(const std::string& name, json batch_shape,
           const std::string& dtype = "float32") {
  return {
      {"class_name", "InputLayer"},
      {"name", name},
      {"config",
       {{"name", name}, {"batch_input_shape", batch_shape}, {"dtype", dtype}}},
      {"inbound_nodes", json::array()}};
}

// A Keras-2 style Functional model of `layers`.
KerasModelFile Functional(json layers, json inputs, json outputs,
                          json compile = nullptr) {
  KerasModelFile file;
  file.config = {{"class_name", "Functional"},
                 {"keras_version", "2.15.0"},
                 {"config",
                  {{"name", "model"},
                   {"layers", std::move(layers)},
                   {"input_layers", std::move(inputs)},
                   {"output_layers", std::move(outputs)}}}};
  if (!compile.is_null()) file.config["compile_config"] = compile;
  return file;
}

TEST(KerasSnakeCaseTest, NamesWeightGroupsAsKeras) {
  EXPECT_EQ(KerasSnakeCase("BatchNormalization"), "batch_normalization");
  EXPECT_EQ(KerasSnakeCase("ReLU"), "re_lu");
  EXPECT_EQ(KerasSnakeCase("Conv2D"), "conv2d");
  EXPECT_EQ(KerasSnakeCase("MaxPooling2D"), "max_pooling2d");
  EXPECT_EQ(KerasSnakeCase("GlobalAveragePooling1D"),
            "global_average_pooling1d");
  EXPECT_EQ(KerasSnakeCase("InputLayer"), "input_layer");
}

TEST(KerasGraphTest, OrdersFunctionalLayersAsKerasMapGraph) {
  // out = Add(Dense b(Dense a(x)), Dense c(x)): Keras 3 lists x, a, then
  // b and c (same depth, first visited first), then the Add.
  json add = {{"class_name", "Add"},
              {"name", "sum"},
              {"config", {{"name", "sum"}}},
              {"inbound_nodes",
               json::array({json::array({{"b", 0, 0, {}}, {"c", 0, 0, {}}})})}};
  KerasModelFile file = Functional(
      {Input("x", {nullptr, 4}), Dense("a", 4, "relu", "x"),
       Dense("c", 4, "linear", "x"), Dense("b", 4, "linear", "a"), add},
      {{"x", 0, 0}}, {{"sum", 0, 0}});
  absl::StatusOr<KerasGraph> g = ParseKerasGraph(file.config);
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<std::string> order = KerasLayerOrder(*g);
  EXPECT_THAT(order, ElementsAre("x", "a", "b", "c", "sum"));
  EXPECT_THAT(KerasWeightGroups(*g, order),
              ElementsAre("layers/input_layer", "layers/dense",
                          "layers/dense_1", "layers/dense_2", "layers/add"));
}

TEST(KerasImportTest, SoftmaxBeforeLossBecomesLogitsAndFusedLoss) {
  json compile = {
      {"optimizer",
       {{"class_name", "SGD"},
        {"config",
         {{"learning_rate", 0.1}, {"momentum", 0.9}, {"nesterov", true}}}}},
      {"loss", "sparse_categorical_crossentropy"},
      {"metrics", {"accuracy"}}};
  KerasModelFile file = Functional(
      {Input("image", {nullptr, 784}), Dense("hidden", 32, "relu", "image"),
       Dense("probs", 10, "softmax", "hidden")},
      {{"image", 0, 0}}, {{"probs", 0, 0}}, compile);
  absl::StatusOr<KerasImport> imported = ImportKerasModel(file, {});
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ModelDef& m = imported->job.model_def();
  ASSERT_EQ(m.layers_size(), 2);
  EXPECT_EQ(m.layers(0).dense().activation(), RELU);
  EXPECT_EQ(m.layers(1).dense().activation(), LINEAR);
  EXPECT_EQ(m.loss().kind(), LossDef::SOFTMAX_CROSS_ENTROPY);
  EXPECT_EQ(m.loss().input(), "probs");
  EXPECT_EQ(m.label().num_classes(), 10);
  EXPECT_EQ(m.inputs(0).dense().shape(0), 784);
  EXPECT_TRUE(imported->job.optimizer().momentum().nesterov());
  EXPECT_FLOAT_EQ(imported->job.optimizer().momentum().momentum(), 0.9f);
  // Keras' SGD moves every row of an Embedding (issue #42, defect 2).
  EXPECT_EQ(imported->job.optimizer().table_updates(), TABLE_UPDATES_DENSE);
}

TEST(KerasImportTest, RefusesARecurrentLayerByNameAndClass) {
  json lstm = {
      {"class_name", "LSTM"},
      {"name", "rnn"},
      {"config", {{"name", "rnn"}, {"units", 3}}},
      {"inbound_nodes", json::array({json::array({{"x", 0, 0, {}}})})}};
  KerasModelFile file = Functional({Input("x", {nullptr, 5, 4}), lstm},
                                   {{"x", 0, 0}}, {{"rnn", 0, 0}});
  absl::StatusOr<KerasImport> imported = ImportKerasModel(file, {});
  ASSERT_FALSE(imported.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(imported.status()));
  EXPECT_THAT(imported.status().message(),
              HasSubstr("layer \"rnn\" (LSTM): Tessera has no recurrent"));
}

TEST(KerasImportTest, RefusesAnOptimizerTesseraLacks) {
  json compile = {{"optimizer", {{"class_name", "RMSprop"}, {"config", {}}}},
                  {"loss", "mse"}};
  KerasModelFile file =
      Functional({Input("x", {nullptr, 3}), Dense("y", 1, "linear", "x")},
                 {{"x", 0, 0}}, {{"y", 0, 0}}, compile);
  absl::StatusOr<KerasImport> imported = ImportKerasModel(file, {});
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(imported.status().message(),
              HasSubstr("optimizer RMSprop: Tessera has no RMSprop"));
}

TEST(KerasImportTest, EmbeddingWithMeanPoolingIsAMeanBag) {
  json emb = {
      {"class_name", "Embedding"},
      {"name", "emb"},
      {"config", {{"name", "emb"}, {"input_dim", 50}, {"output_dim", 8}}},
      {"inbound_nodes", json::array({json::array({{"ids", 0, 0, {}}})})}};
  json pool = {
      {"class_name", "GlobalAveragePooling1D"},
      {"name", "pooled"},
      {"config", {{"name", "pooled"}}},
      {"inbound_nodes", json::array({json::array({{"emb", 0, 0, {}}})})}};
  KerasModelFile file =
      Functional({Input("ids", {nullptr, 4}, "int32"), emb, pool,
                  Dense("click", 1, "sigmoid", "pooled")},
                 {{"ids", 0, 0}}, {{"click", 0, 0}},
                 {{"loss", "binary_crossentropy"}, {"optimizer", nullptr}});
  absl::StatusOr<KerasImport> imported = ImportKerasModel(file, {});
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ModelDef& m = imported->job.model_def();
  EXPECT_EQ(m.inputs(0).sparse().max_hotness(), 4);
  EXPECT_EQ(m.inputs(0).sparse().vocab_size(), 50);
  // Keras' Embedding has no row for an id >= input_dim: not wrapped.
  EXPECT_TRUE(m.inputs(0).sparse().ids_in_vocab());
  ASSERT_EQ(m.layers_size(), 2);
  EXPECT_EQ(m.layers(0).name(), "emb");
  EXPECT_EQ(m.layers(0).output(), "pooled");
  EXPECT_EQ(m.layers(0).embedding_bag().combiner(), MEAN);
  EXPECT_EQ(m.loss().kind(), LossDef::SIGMOID_CROSS_ENTROPY);
  EXPECT_EQ(m.layers(1).dense().activation(), LINEAR);
}

TEST(KerasImportTest, FromLogitsIsKeptForTheExport) {
  json compile = {{"optimizer", nullptr},
                  {"loss",
                   {{"class_name", "SparseCategoricalCrossentropy"},
                    {"config", {{"from_logits", true}}}}}};
  KerasModelFile file = Functional(
      {Input("image", {nullptr, 784}), Dense("hidden", 32, "relu", "image"),
       Dense("logits", 10, "linear", "hidden")},
      {{"image", 0, 0}}, {{"logits", 0, 0}}, compile);
  absl::StatusOr<KerasImport> imported = ImportKerasModel(file, {});
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ModelDef& m = imported->job.model_def();
  EXPECT_EQ(m.layers(1).dense().activation(), LINEAR);
  EXPECT_EQ(m.loss().kind(), LossDef::SOFTMAX_CROSS_ENTROPY);
  EXPECT_TRUE(m.loss().from_logits());
}

// A one-Dense regression model whose compile config holds `compile`.
KerasModelFile Regression(json compile, json dense_config = json::object()) {
  json dense = Dense("y", 1, "linear", "x");
  for (const auto& [k, v] : dense_config.items()) dense["config"][k] = v;
  return Functional({Input("x", {nullptr, 3}), dense}, {{"x", 0, 0}},
                    {{"y", 0, 0}}, compile);
}

TEST(KerasImportTest, RefusesLossWeightsOtherThanOne) {
  for (json weights : {json(0.5), json({2.0}), json({{"y", 3.0}})}) {
    absl::StatusOr<KerasImport> imported = ImportKerasModel(
        Regression({{"loss", "mse"}, {"loss_weights", weights}}), {});
    ASSERT_FALSE(imported.ok()) << weights.dump();
    EXPECT_TRUE(absl::IsInvalidArgument(imported.status()));
    EXPECT_THAT(imported.status().message(),
                HasSubstr("loss_weights " + weights.dump()));
  }
  for (json weights : {json(nullptr), json({1.0}), json({{"y", 1}})}) {
    absl::StatusOr<KerasImport> imported = ImportKerasModel(
        Regression({{"loss", "mse"}, {"loss_weights", weights}}), {});
    EXPECT_TRUE(imported.ok()) << weights.dump() << ": " << imported.status();
  }
}

TEST(KerasImportTest, RefusesALayerOfAnotherDtypeThanFloat32) {
  json policy = {{"module", "keras"},
                 {"class_name", "DTypePolicy"},
                 {"config", {{"name", "float16"}}}};
  for (json dtype : {json("float16"), policy}) {
    absl::StatusOr<KerasImport> imported =
        ImportKerasModel(Regression({{"loss", "mse"}}, {{"dtype", dtype}}), {});
    ASSERT_FALSE(imported.ok()) << dtype.dump();
    EXPECT_TRUE(absl::IsInvalidArgument(imported.status()));
    EXPECT_THAT(imported.status().message(),
                HasSubstr("layer \"y\" (Dense): dtype float16"));
  }
  absl::StatusOr<KerasImport> imported = ImportKerasModel(
      Regression({{"loss", "mse"}}, {{"dtype", "float32"}}), {});
  EXPECT_TRUE(imported.ok()) << imported.status();
}

}  // namespace
}  // namespace tessera
