#include "tools/export/onnx_export.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tools/export/trained_model.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kModel[] = R"pb(
  inputs {
    name: "ids"
    sparse { max_hotness: 3 }
  }
  inputs {
    name: "x"
    dense { shape: [ 4 ] }
  }
  label { kind: CLASS_INDEX num_classes: 3 }
  layers {
    name: "bag"
    inputs: "ids"
    embedding_bag { table: "t" dim: 2 combiner: MEAN }
  }
  layers {
    name: "bn"
    inputs: "x"
    batch_norm { epsilon: 0.25 }
  }
  layers {
    name: "logits"
    inputs: [ "bag", "bn" ]
    dense { units: 3 }
  }
  loss { kind: SOFTMAX_CROSS_ENTROPY input: "logits" }
)pb";

// The model with every variable filled: a growing table holding ids 8
// and -3.
TrainedModel Trained() {
  TrainedModel m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kModel, &m.model));
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(m.model, 1);
  EXPECT_TRUE(graph.ok()) << graph.status();
  m.graph = *std::move(graph);
  for (const VariableDef& v : m.graph.variables) {
    TrainedVariable t;
    t.name = v.name;
    t.shape = v.shape;
    t.table = v.sparse;
    if (v.sparse) {
      t.ids = {-3, 8};
      t.shape = {2, v.shape[1]};
    }
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.values.assign(n, 0.5f);
    m.index[v.name] = static_cast<int>(m.variables.size());
    m.variables.push_back(t);
  }
  return m;
}

const onnx::NodeProto* FindNode(const onnx::ModelProto& m,
                                const std::string& op) {
  for (const onnx::NodeProto& n : m.graph().node()) {
    if (n.op_type() == op) return &n;
  }
  return nullptr;
}

TEST(OnnxExportTest, WritesOpset17WithTablesAsLabelEncoderAndGather) {
  absl::StatusOr<onnx::ModelProto> m = ExportOnnx(Trained(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->ir_version(), 8);
  bool ml = false, core = false;
  for (const onnx::OperatorSetIdProto& o : m->opset_import()) {
    if (o.domain().empty()) core = o.version() == 17;
    if (o.domain() == "ai.onnx.ml") ml = true;
  }
  EXPECT_TRUE(core);
  EXPECT_TRUE(ml);
  const onnx::NodeProto* encoder = FindNode(*m, "LabelEncoder");
  ASSERT_NE(encoder, nullptr);
  EXPECT_EQ(encoder->domain(), "ai.onnx.ml");
  for (const onnx::AttributeProto& a : encoder->attribute()) {
    if (a.name() == "keys_int64s") {
      EXPECT_THAT(a.ints(), ::testing::ElementsAre(-3, 8));
    }
    if (a.name() == "default_int64") EXPECT_EQ(a.i(), 2);  // the zero row
  }
  const onnx::NodeProto* bn = FindNode(*m, "BatchNormalization");
  ASSERT_NE(bn, nullptr);
  ASSERT_EQ(bn->attribute_size(), 1);
  EXPECT_EQ(bn->attribute(0).name(), "epsilon");
  EXPECT_FLOAT_EQ(bn->attribute(0).f(), 0.25f);
  EXPECT_EQ(FindNode(*m, "Dropout"), nullptr);
  ASSERT_EQ(m->graph().output_size(), 2);
  EXPECT_EQ(m->graph().output(0).name(), "probabilities");
  EXPECT_EQ(m->graph().output(1).name(), "class");
}

// An embedding_bag layer takes its fields' ids as one input [batch, fields,
// hotness], gathered and summed over the hotness axis (axes an input).
TEST(OnnxExportTest, BagIdsAreOneInputPerLayerSummedOverHotness) {
  absl::StatusOr<onnx::ModelProto> m = ExportOnnx(Trained(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->graph().input_size(), 2);
  EXPECT_EQ(m->graph().input(0).name(), "x");
  const onnx::ValueInfoProto& ids = m->graph().input(1);
  EXPECT_EQ(ids.name(), "bag_ids");
  const onnx::TypeProto::Tensor& t = ids.type().tensor_type();
  EXPECT_EQ(t.elem_type(), onnx::TensorProto::INT64);
  ASSERT_EQ(t.shape().dim_size(), 3);
  EXPECT_EQ(t.shape().dim(0).dim_param(), "batch");
  EXPECT_EQ(t.shape().dim(1).dim_value(), 1);  // one field
  EXPECT_EQ(t.shape().dim(2).dim_param(), "bag_ids_hotness");
  EXPECT_THAT(ids.doc_string(), HasSubstr("ids of ids in that order"));
  EXPECT_THAT(ids.doc_string(), HasSubstr("to 3 (their max_hotness)"));
  const onnx::NodeProto* sum = FindNode(*m, "ReduceSum");
  ASSERT_NE(sum, nullptr);
  ASSERT_EQ(sum->input_size(), 2);          // the data and the axes
  EXPECT_NE(FindNode(*m, "Div"), nullptr);  // a mean bag
}

TEST(OnnxExportTest, PooledInputsLeaveTheTablesOut) {
  absl::StatusOr<onnx::ModelProto> m =
      ExportOnnx(Trained(), OnnxExportOptions{/*pooled_inputs=*/true});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(FindNode(*m, "LabelEncoder"), nullptr);
  std::vector<std::string> inputs;
  for (const onnx::ValueInfoProto& in : m->graph().input()) {
    inputs.push_back(in.name());
  }
  EXPECT_THAT(inputs, ::testing::ElementsAre("x", "bag"));
}

// An ONNX file where a checkpoint goes (tessera_predict --checkpoint=
// model.onnx) is named as what it is, not as a damaged checkpoint.
TEST(OnnxExportTest, AnOnnxFileGivenAsACheckpointIsCalledOne) {
  absl::StatusOr<onnx::ModelProto> m = ExportOnnx(Trained(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string onnx_path =
      absl::StrCat(::testing::TempDir(), "/as_checkpoint_", getpid(), ".onnx");
  ASSERT_TRUE(WriteOnnxFile(&*m, onnx_path).ok());
  absl::StatusOr<TrainedModel> loaded = LoadTrainedModel(onnx_path);
  EXPECT_TRUE(absl::IsInvalidArgument(loaded.status())) << loaded.status();
  const std::string message(loaded.status().message());
  EXPECT_THAT(message, HasSubstr(onnx_path));
  EXPECT_THAT(message, HasSubstr("is not a Tessera checkpoint"));
  EXPECT_THAT(message, HasSubstr("looks like an ONNX model"));
  EXPECT_THAT(message, Not(HasSubstr("bad magic")));

  // Another file is not taken for one.
  const std::string text_path =
      absl::StrCat(::testing::TempDir(), "/as_checkpoint_", getpid(), ".txt");
  std::ofstream(text_path) << "predictions, not a model\n";
  loaded = LoadTrainedModel(text_path);
  EXPECT_TRUE(absl::IsInvalidArgument(loaded.status())) << loaded.status();
  EXPECT_THAT(loaded.status().message(), HasSubstr("is not a Tessera"));
  EXPECT_THAT(loaded.status().message(), Not(HasSubstr("ONNX")));
  std::remove(onnx_path.c_str());
  std::remove(text_path.c_str());
}

TEST(OnnxExportTest, ErrorNamesTheLayer) {
  TrainedModel m = Trained();
  m.index.erase("logits/kernel");
  absl::StatusOr<onnx::ModelProto> onnx = ExportOnnx(m, {});
  EXPECT_FALSE(onnx.ok());
  EXPECT_THAT(onnx.status().message(), HasSubstr("layer 'logits' (dense)"));
  EXPECT_THAT(onnx.status().message(), HasSubstr("logits/kernel"));
}

}  // namespace
}  // namespace tessera
