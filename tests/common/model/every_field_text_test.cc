#include "common/model/every_field_text.h"

#include <string>

#include "common/model/model_graph.h"
#include "common/model/model_summary.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/model.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(EveryFieldTextTest, ZeroValuesAreWrittenOut) {
  Initializer zeros;
  zeros.set_kind(Initializer::ZEROS);
  EXPECT_EQ(EveryFieldText(zeros),
            "kind: ZEROS\nvalue: 0\nminval: 0\nmaxval: 0\nstddev: 0\n"
            "seed: 0\nfan_in: 0\nfan_out: 0\n");
}

TEST(EveryFieldTextTest, ParsesBackToTheSameMessage) {
  ModelDef model;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        inputs {
          name: "x"
          dense { shape: [ 4, 2 ] }
        }
        label { kind: CLASS_INDEX num_classes: 3 }
        layers {
          name: "logits"
          inputs: "x"
          dense {
            units: 3
            bias_initializer { kind: ZEROS }
          }
        }
        loss { kind: SOFTMAX_CROSS_ENTROPY input: "logits" }
      )pb",
      &model));
  const std::string text = EveryFieldText(model);
  ModelDef back;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &back))
      << text;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(model, back))
      << text;
  // Repeated fields one value a line, as TextFormat writes them.
  EXPECT_THAT(text, HasSubstr("shape: 4\n    shape: 2\n"));
}

// The dry run's "every default written out": a bias that starts at zero
// says so instead of printing an empty bias_initializer.
TEST(EveryFieldTextTest, ModelSummaryWritesZeroDefaults) {
  ModelDef model;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        inputs {
          name: "x"
          dense { shape: [ 4 ] }
        }
        label { kind: CLASS_INDEX num_classes: 3 }
        layers {
          name: "logits"
          inputs: "x"
          dense { units: 3 }
        }
        loss { kind: SOFTMAX_CROSS_ENTROPY input: "logits" }
      )pb",
      &model));
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(model, 1);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::string summary = FormatModelSummary(*graph);
  EXPECT_THAT(summary, HasSubstr("bias_initializer {\n      kind: ZEROS\n"));
  EXPECT_THAT(summary, HasSubstr("kind: GLOROT_UNIFORM"));
}

}  // namespace
}  // namespace tessera
