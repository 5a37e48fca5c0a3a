#include "tools/keras/keras_export.h"

#include <string>

#include "common/model/model_graph.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/keras/keras_compile.h"

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

// Issue #44 item 4: a schedule, weight decay (Adam's as AdamW) and
// clipping go back into the compile config as Keras writes them, and come
// back through the importer to the same optimizer.
TEST(KerasExportTest, ScheduleWeightDecayAndClippingRoundTrip) {
  TrainedModel m =
      Mlp(R"pb(loss { kind: SOFTMAX_CROSS_ENTROPY input: "logits" })pb");
  OptimizerConfig* opt = m.job.mutable_optimizer();
  opt->set_learning_rate(0.01f);
  opt->set_weight_decay(0.004f);
  opt->mutable_clipping()->set_global_norm(1.0f);
  opt->mutable_schedule()->set_decay(LearningRateSchedule::DECAY_COSINE);
  opt->mutable_schedule()->set_decay_steps(10);
  opt->mutable_schedule()->set_alpha(0.1f);
  opt->mutable_schedule()->set_warmup_steps(3);
  opt->set_table_updates(TABLE_UPDATES_DENSE);  // what an import sets
  absl::StatusOr<KerasExport> out = ExportKerasModel(m);
  ASSERT_TRUE(out.ok()) << out.status();
  const json& o = out->config["compile_config"]["optimizer"];
  EXPECT_EQ(o["class_name"], "AdamW");
  EXPECT_EQ(o["config"]["weight_decay"].dump(), "0.004");
  EXPECT_EQ(o["config"]["global_clipnorm"].dump(), "1.0");
  EXPECT_TRUE(o["config"]["clipnorm"].is_null());
  const json& lr = o["config"]["learning_rate"];
  EXPECT_EQ(lr["class_name"], "CosineDecay");
  EXPECT_EQ(lr["config"]["warmup_target"].dump(), "0.01");
  EXPECT_EQ(lr["config"]["initial_learning_rate"].dump(), "0.0");
  EXPECT_EQ(lr["config"]["warmup_steps"], 3);
  absl::StatusOr<OptimizerConfig> back = keras::ParseOptimizer(o);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->DebugString(), opt->DebugString());

  // Each other schedule Keras has, and SGD's weight decay.
  for (const char* text : {
           R"pb(learning_rate: 0.1
                sgd {}
                weight_decay: 0.01
                clipping { norm: 0.5 }
                table_updates: TABLE_UPDATES_DENSE
                schedule {
                  decay: DECAY_PIECEWISE
                  boundaries: [ 2, 4 ]
                  values: [ 0.1, 0.05, 0.01 ]
                })pb",
           R"pb(learning_rate: 0.1
                adagrad { initial_accumulator_value: 0.1 epsilon: 1e-7 }
                clipping { value: 0.5 }
                table_updates: TABLE_UPDATES_DENSE
                schedule {
                  decay: DECAY_EXPONENTIAL
                  decay_steps: 5
                  decay_rate: 0.5
                  staircase: true
                })pb",
           R"pb(learning_rate: 0.1
                table_updates: TABLE_UPDATES_DENSE
                ftrl {
                  learning_rate_power: -0.5
                  initial_accumulator_value: 0.1
                }
                schedule {
                  decay: DECAY_POLYNOMIAL
                  decay_steps: 5
                  end_learning_rate: 0.01
                  power: 2
                  cycle: true
                })pb"}) {
    OptimizerConfig want;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &want));
    *m.job.mutable_optimizer() = want;
    out = ExportKerasModel(m);
    ASSERT_TRUE(out.ok()) << out.status();
    back = keras::ParseOptimizer(out->config["compile_config"]["optimizer"]);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->DebugString(), want.DebugString());
  }
}

TEST(KerasExportTest, RefusesAScheduleKerasLacksByName) {
  TrainedModel m =
      Mlp(R"pb(loss { kind: SOFTMAX_CROSS_ENTROPY input: "logits" })pb");
  LearningRateSchedule* s = m.job.mutable_optimizer()->mutable_schedule();
  s->set_decay(LearningRateSchedule::DECAY_POLYNOMIAL);
  s->set_decay_steps(100);
  s->set_hold_steps(10);
  absl::StatusOr<KerasExport> out = ExportKerasModel(m);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(out.status().message()),
              ::testing::HasSubstr("hold_steps > 0"));
  s->set_hold_steps(0);
  s->set_warmup_steps(5);
  out = ExportKerasModel(m);
  EXPECT_THAT(std::string(out.status().message()),
              ::testing::HasSubstr("a warm-up before a decay other than "
                                   "cosine"));
}

}  // namespace
}  // namespace tessera
