#include "common/model/layer_kinds.h"

#include <set>
#include <string>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/model.pb.h"

namespace tessera {
namespace {

// Every kind a description can set, made through the proto's reflection,
// so a kind added to LayerDef's oneof without a descriptor in the table of
// layer_kinds.cc fails here.
std::vector<LayerDef> OneLayerOfEachKind() {
  std::vector<LayerDef> layers;
  const google::protobuf::OneofDescriptor* kind =
      LayerDef::descriptor()->FindOneofByName("kind");
  for (int i = 0; i < kind->field_count(); ++i) {
    LayerDef layer;
    layer.set_name("l");
    layer.GetReflection()->MutableMessage(&layer, kind->field(i));
    layers.push_back(layer);
  }
  return layers;
}

TEST(LayerKindsTest, EveryKindOfTheProtoHasOneNameOfItsOwn) {
  std::set<std::string> names;
  const std::vector<LayerDef> layers = OneLayerOfEachKind();
  ASSERT_GE(layers.size(), 16u);
  for (const LayerDef& layer : layers) {
    const std::string name = LayerKindName(layer);
    EXPECT_NE(name, "no kind") << layer.ShortDebugString();
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
  }
}

TEST(LayerKindsTest, EveryKindInfersAShapeOrSaysWhatIsWrong) {
  for (LayerDef layer : OneLayerOfEachKind()) {
    layer.add_inputs("x");
    ResolveLayerDefaults(&layer);
    TensorFacts vector;
    vector.shape = {4};
    absl::StatusOr<Shape> shape = InferLayerShape(layer, {vector});
    // No kind may fall through without a shape or an error naming it.
    if (shape.ok()) {
      EXPECT_FALSE(shape->empty()) << LayerKindName(layer);
    } else {
      EXPECT_NE(shape.status().message().find(LayerKindName(layer)),
                std::string::npos)
          << shape.status();
    }
  }
}

TEST(LayerKindsTest, AnUnsetKindIsRefused) {
  LayerDef layer;
  layer.set_name("l");
  EXPECT_EQ(LayerKindName(layer), "no kind");
  absl::StatusOr<Shape> shape = InferLayerShape(layer, {});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("sets no kind"), std::string::npos);
  EXPECT_TRUE(LayerVariables(layer, {}).empty());
}

TEST(LayerKindsTest, DefaultsAndVariablesComeFromTheKindsDescriptor) {
  LayerDef layer;
  layer.set_name("bn");
  layer.add_inputs("x");
  layer.mutable_batch_norm();
  ResolveLayerDefaults(&layer);
  EXPECT_EQ(layer.output(), "bn");
  EXPECT_FLOAT_EQ(layer.batch_norm().momentum(), 0.99f);
  TensorFacts in;
  in.shape = {3, 5};
  ASSERT_TRUE(InferLayerShape(layer, {in}).ok());
  const std::vector<LayerVariable> vars = LayerVariables(layer, {in});
  ASSERT_EQ(vars.size(), 4u);
  EXPECT_EQ(vars[0].name, "bn/gamma");
  EXPECT_EQ(vars[3].name, "bn/moving_variance");
  EXPECT_EQ(vars[3].shape, Shape({5}));
  EXPECT_TRUE(vars[3].update_rule.has_value());
}

}  // namespace
}  // namespace tessera
