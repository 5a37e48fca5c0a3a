#include "tools/torch/state_dict.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An image [2, 2, 3] through a 1x1 conv of 4 filters and a batch norm,
// flattened ([16], PyTorch's order differs: 4 channels of 2x2 pixels) and
// read with a bag's embedding by one dense layer of 3 units.
ModelGraph Graph() {
  ModelDef model;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        inputs {
          name: "img"
          dense { shape: [ 2, 2, 3 ] }
        }
        inputs {
          name: "ids"
          sparse { max_hotness: 2 vocab_size: 5 }
        }
        label { kind: CLASS_INDEX num_classes: 3 }
        layers {
          name: "conv"
          inputs: "img"
          conv2d {
            filters: 4
            kernel_size: [ 1, 1 ]
          }
        }
        layers {
          name: "bn"
          inputs: "conv"
          batch_norm {}
        }
        layers {
          name: "relu"
          inputs: "bn"
          activation { activation: RELU }
        }
        layers {
          name: "flat"
          inputs: "relu"
          flatten {}
        }
        layers {
          name: "emb"
          inputs: "ids"
          embedding_bag { dim: 3 }
        }
        layers {
          name: "fc"
          inputs: [ "flat", "emb" ]
          dense { units: 3 }
        }
        loss { kind: SOFTMAX_CROSS_ENTROPY input: "fc" }
      )pb",
      &model));
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(model, 1);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *graph;
}

const StateDictEntry* Entry(const std::vector<StateDictEntry>& entries,
                            const std::string& variable) {
  for (const StateDictEntry& e : entries) {
    if (e.variable == variable) return &e;
  }
  return nullptr;
}

std::vector<float> Iota(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(StateDictTest, NamesAndShapesAreTheModules) {
  const ModelGraph graph = Graph();
  std::vector<std::string> keys;
  std::vector<std::vector<int64_t>> shapes;
  for (const StateDictEntry& e : StateDictLayout(graph)) {
    keys.push_back(e.key);
    shapes.push_back(e.key_shape);
  }
  EXPECT_THAT(keys, ElementsAre("conv.weight", "conv.bias", "bn.weight",
                                "bn.bias", "bn.running_mean", "bn.running_var",
                                "emb.weight", "fc.weight", "fc.bias"));
  EXPECT_EQ(shapes[0], (std::vector<int64_t>{4, 3, 1, 1}));
  EXPECT_EQ(shapes[6], (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(shapes[7], (std::vector<int64_t>{3, 19}));
  EXPECT_THAT(StateDictBufferKeys(graph),
              ElementsAre("bn.num_batches_tracked"));
}

TEST(StateDictTest, DenseAfterAnImageFlattenTakesPyTorchsColumnOrder) {
  const std::vector<StateDictEntry> entries = StateDictLayout(Graph());
  const StateDictEntry* fc = Entry(entries, "fc/kernel");
  ASSERT_NE(fc, nullptr);
  std::vector<float> kernel(19 * 3);
  for (int r = 0; r < 19; ++r) {
    for (int u = 0; u < 3; ++u) kernel[r * 3 + u] = r * 10 + u;
  }
  const std::vector<float> weight = ToStateDictLayout(*fc, kernel);
  // Tessera's row of pixel (i=1, j=0), channel 2 is (1 * 2 + 0) * 4 + 2 =
  // 10; PyTorch's column is (2 * 2 + 1) * 2 + 0 = 10 as well, so take
  // pixel (0, 1), channel 2: row (0 * 2 + 1) * 4 + 2 = 6, column
  // (2 * 2 + 0) * 2 + 1 = 9.
  EXPECT_EQ(weight[1 * 19 + 9], 61);
  // The embedding's rows follow the image's, in their own order.
  EXPECT_EQ(weight[2 * 19 + 17], 172);
  EXPECT_EQ(FromStateDictLayout(*fc, weight), kernel);
}

TEST(StateDictTest, ConvKernelIsTransposedBothWays) {
  const std::vector<StateDictEntry> entries = StateDictLayout(Graph());
  const StateDictEntry* conv = Entry(entries, "conv/kernel");
  ASSERT_NE(conv, nullptr);
  const std::vector<float> kernel = Iota(12);  // [1, 1, 3, 4]
  const std::vector<float> weight = ToStateDictLayout(*conv, kernel);
  // weight[o][i] = kernel[i][o]: o = 1, i = 2 is kernel element 2 * 4 + 1.
  EXPECT_EQ(weight[1 * 3 + 2], 9);
  EXPECT_EQ(FromStateDictLayout(*conv, weight), kernel);
}

Safetensors FullStateDict(const ModelGraph& graph) {
  Safetensors file;
  for (const StateDictEntry& e : StateDictLayout(graph)) {
    int64_t n = 1;
    for (int64_t d : e.key_shape) n *= d;
    file.tensors.push_back(FloatTensor(e.key, e.key_shape, Iota(n)));
  }
  file.tensors.push_back(Int64Tensor("bn.num_batches_tracked", {}, {12}));
  return file;
}

TEST(StateDictTest, ReadsAStateDictIntoTesserasLayout) {
  const ModelGraph graph = Graph();
  absl::StatusOr<std::vector<VariableValues>> values =
      VariablesFromStateDict(graph, FullStateDict(graph));
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), graph.variables.size());
  EXPECT_EQ((*values)[0].name, "conv/kernel");
  EXPECT_EQ((*values)[0].shape, (std::vector<int64_t>{1, 1, 3, 4}));
  EXPECT_EQ((*values)[0].values[2 * 4 + 1], 1 * 3 + 2);
}

TEST(StateDictTest, TakesTensorsNamedAsTheVariables) {
  const ModelGraph graph = Graph();
  Safetensors file = FullStateDict(graph);
  file.tensors[0] = FloatTensor("conv/kernel", {1, 1, 3, 4}, Iota(12));
  absl::StatusOr<std::vector<VariableValues>> values =
      VariablesFromStateDict(graph, file);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ((*values)[0].values, Iota(12));
}

TEST(StateDictTest, RefusesWhatLoadStateDictWouldRefuse) {
  const ModelGraph graph = Graph();
  Safetensors missing = FullStateDict(graph);
  missing.tensors.erase(missing.tensors.begin() + 7);
  EXPECT_THAT(VariablesFromStateDict(graph, missing).status().message(),
              HasSubstr("no tensor for variable fc/kernel (looked for "
                        "\"fc.weight\" and \"fc/kernel\")"));
  Safetensors shaped = FullStateDict(graph);
  shaped.tensors[7] = FloatTensor("fc.weight", {19, 3}, Iota(57));
  EXPECT_THAT(VariablesFromStateDict(graph, shaped).status().message(),
              HasSubstr("tensor \"fc.weight\" has shape [19, 3]; variable "
                        "fc/kernel needs [3, 19]"));
  Safetensors extra = FullStateDict(graph);
  extra.tensors.push_back(FloatTensor("fc2.weight", {1}, {1}));
  EXPECT_THAT(VariablesFromStateDict(graph, extra).status().message(),
              HasSubstr("1 tensors name no variable of the model: fc2.weight"));
  Safetensors ints = FullStateDict(graph);
  ints.tensors[8] = Int64Tensor("fc.bias", {3}, {1, 2, 3});
  EXPECT_THAT(VariablesFromStateDict(graph, ints).status().message(),
              HasSubstr("\"fc.bias\" is I64"));
}

TEST(StateDictTest, TrainedModelExportsEveryKeyAndTheBuffers) {
  TrainedModel model;
  model.graph = Graph();
  for (const VariableDef& v : model.graph.variables) {
    TrainedVariable t;
    t.name = v.name;
    t.shape = v.shape;
    int64_t n = 1;
    for (int64_t d : v.shape) n *= d;
    t.values = Iota(n);
    model.index[v.name] = model.variables.size();
    model.variables.push_back(t);
  }
  const Safetensors file = StateDictFromTrainedModel(model);
  EXPECT_EQ(file.metadata.at("format"), "pt");
  ASSERT_NE(file.Find("fc.weight"), nullptr);
  EXPECT_EQ(file.Find("fc.weight")->shape, (std::vector<int64_t>{3, 19}));
  ASSERT_NE(file.Find("bn.num_batches_tracked"), nullptr);
  EXPECT_EQ(file.Find("bn.num_batches_tracked")->dtype, "I64");
  // And back: the same values in Tessera's layout.
  absl::StatusOr<std::vector<VariableValues>> back =
      VariablesFromStateDict(model.graph, file);
  ASSERT_TRUE(back.ok()) << back.status();
  for (size_t i = 0; i < back->size(); ++i) {
    EXPECT_EQ((*back)[i].values, model.variables[i].values) << (*back)[i].name;
  }
}

TEST(StateDictTest, GrowingTableExportsItsRowsAndTheirIds) {
  ModelDef def;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        inputs {
          name: "ids"
          sparse { max_hotness: 1 vocab_size: 0 }
        }
        label { kind: BINARY }
        layers {
          name: "emb"
          inputs: "ids"
          embedding_bag { dim: 2 }
        }
        layers {
          name: "fc"
          inputs: "emb"
          dense { units: 1 }
        }
        loss { kind: SIGMOID_CROSS_ENTROPY input: "fc" }
      )pb",
      &def));
  absl::StatusOr<ModelGraph> graph = BuildModelGraph(def, 1);
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainedModel model;
  model.graph = *graph;
  for (const VariableDef& v : model.graph.variables) {
    TrainedVariable t;
    t.name = v.name;
    t.shape = v.shape;
    if (v.sparse) {
      t.table = true;
      t.shape = {3, 2};
      t.ids = {5, 9, 12};
    }
    t.values = Iota(t.shape[0] * (t.shape.size() > 1 ? t.shape[1] : 1));
    model.index[v.name] = model.variables.size();
    model.variables.push_back(t);
  }
  const Safetensors file = StateDictFromTrainedModel(model);
  const SafetensorsTensor* rows = file.Find("emb.weight");
  const SafetensorsTensor* ids = file.Find("emb.ids");
  ASSERT_NE(rows, nullptr);
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(rows->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(ids->dtype, "I64");
  EXPECT_EQ(ids->shape, (std::vector<int64_t>{3}));
  std::vector<int64_t> id_values(3);
  std::memcpy(id_values.data(), ids->data.data(), 24);
  EXPECT_THAT(id_values, ElementsAre(5, 9, 12));
  // A growing table has no initial rows to start a job from.
  Safetensors init;
  init.tensors = {FloatTensor("emb.weight", {0, 2}, {}),
                  FloatTensor("fc.weight", {1, 2}, {1, 2}),
                  FloatTensor("fc.bias", {1}, {0})};
  EXPECT_THAT(VariablesFromStateDict(*graph, init).status().message(),
              HasSubstr("table emb grows with the data"));
}

}  // namespace
}  // namespace tessera
