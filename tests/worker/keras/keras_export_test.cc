#include "worker/keras/keras_export.h"

#include <string>

#include "common/model/model_graph.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

using json = nlohmann::json;

// An MLP of 4 features to 3 classes, its loss `loss`, trained by Adam
// with Keras' betas as a user types them; every variable 0.5.
TrainedModel Mlp(const std::string& loss) {
  TrainedModel m;
  const std::string text = R"pb(
    inputs {
      name: "image"
      dense { shape: 4 }
    }
    label { kind: CLASS_INDEX num_classes: 3 }
    layers {
      name: "hidden"
      inputs: "image"
      dense { units: 5 activation: RELU }
    }
    layers {
      name: "drop"
      inputs: "hidden"
      dropout { rate: 0.3 }
    }
    layers {
      name: "logits"
      inputs: "drop"
      dense { units: 3 }
    }
  )pb";
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      text + loss, m.job.mutable_model_def()));
  m.job.mutable_optimizer()->set_learning_rate(0.001f);
  m.job.mutable_optimizer()->mutable_adam()->set_beta1(0.9f);
  m.job.mutable_optimizer()->mutable_adam()->set_beta2(0.999f);
  m.job.mutable_optimizer()->mutable_adam()->set_epsilon(1e-7f);
  m.model = m.job.model_def();
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m.model, 1);
  EXPECT_TRUE(graph.ok()) << graph.status();
  m.graph = *std::move(graph);
  for (const VariableDef& v : m.graph.variables) {
    TrainedVariable t;
    t.name = v.name;
    t.shape = v.shape;
    int64_t n = 1;
    for (int64_t d : v.shape) n *= d;
    t.values.assign(n, 0.5f);
    m.index[v.name] = static_cast<int>(m.variables.size());
    m.variables.push_back(std::move(t));
  }
  return m;
}

// The config of Keras layer `name` in `config`.
json LayerConfig(const json& config, const std::string& name) {
  for (const json& l : config["config"]["layers"]) {
    if (l["name"] == name) return l["config"];
  }
  ADD_FAILURE() << "no layer " << name;
  return json();
}

TEST(KerasExportTest, AModelThatOutputLogitsComesBackWithoutTheSoftmax) {
  absl::StatusOr<KerasExport> out =
      ExportKerasModel(Mlp(R"pb(loss {
                                  kind: SOFTMAX_CROSS_ENTROPY
                                  input: "logits"
                                  from_logits: true
                                })pb"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(LayerConfig(out->config, "logits")["activation"], "linear");
  EXPECT_EQ(out->config["config"]["output_layers"], json({"logits", 0, 0}));
  const json& loss = out->config["compile_config"]["loss"];
  EXPECT_EQ(loss["class_name"], "SparseCategoricalCrossentropy");
  EXPECT_EQ(loss["config"]["from_logits"], true);
}

TEST(KerasExportTest, AFusedSoftmaxGoesBackOnTheOutputLayer) {
  absl::StatusOr<KerasExport> out = ExportKerasModel(
      Mlp(R"pb(loss { kind: SOFTMAX_CROSS_ENTROPY input: "logits" })pb"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(LayerConfig(out->config, "logits")["activation"], "softmax");
  EXPECT_EQ(out->config["compile_config"]["loss"]["config"]["from_logits"],
            false);
}

TEST(KerasExportTest, WritesFloatsAsTheDecimalsTheUserGave) {
  absl::StatusOr<KerasExport> out = ExportKerasModel(
      Mlp(R"pb(loss { kind: SOFTMAX_CROSS_ENTROPY input: "logits" })pb"));
  ASSERT_TRUE(out.ok()) << out.status();
  const json& adam = out->config["compile_config"]["optimizer"]["config"];
  EXPECT_EQ(adam["beta_1"].dump(), "0.9");
  EXPECT_EQ(adam["beta_2"].dump(), "0.999");
  EXPECT_EQ(adam["epsilon"].dump(), "1e-07");
  EXPECT_EQ(adam["learning_rate"].dump(), "0.001");
  EXPECT_EQ(LayerConfig(out->config, "drop")["rate"].dump(), "0.3");
}

}  // namespace
}  // namespace tessera
