// Model descriptions that exercise every layer of the library, shared by
// the finite-difference checks (graph_test.cc) and the CPU-versus-CUDA
// comparison (graph_devices_test.cc).

#ifndef TESSERA_TESTS_WORKER_NN_LAYER_TEST_MODELS_H_
#define TESSERA_TESTS_WORKER_NN_LAYER_TEST_MODELS_H_

namespace tessera {

// Each activation, two inputs of one Dense, and a tensor read three times
// (its gradient summed over its readers).
inline constexpr char kDenseStackModel[] = R"pb(
  inputs {
    name: "x"
    dense { shape: [ 2, 3 ] }
  }
  label { kind: CLASS_INDEX num_classes: 3 }
  layers {
    name: "flat"
    inputs: "x"
    flatten {}
  }
  layers {
    name: "a"
    inputs: "flat"
    dense { units: 5 activation: TANH }
  }
  layers {
    name: "b"
    inputs: "a"
    dense { units: 4 activation: SIGMOID }
  }
  layers {
    name: "c"
    inputs: "a"
    dense { units: 4 activation: RELU }
  }
  layers {
    name: "s"
    inputs: "c"
    activation { activation: SOFTMAX }
  }
  layers {
    name: "r"
    inputs: "s"
    reshape { shape: [ 2, -1 ] }
  }
  layers {
    name: "rf"
    inputs: "r"
    flatten {}
  }
  layers {
    name: "out"
    inputs: [ "b", "rf", "a" ]
    dense { units: 3 }
  }
  loss { kind: SOFTMAX_CROSS_ENTROPY input: "out" }
)pb";

inline constexpr char kConvolutionModel[] = R"pb(
  inputs {
    name: "img"
    dense { shape: [ 7, 6, 2 ] }
  }
  label { kind: CLASS_INDEX num_classes: 3 }
  layers {
    name: "c1"
    inputs: "img"
    conv2d {
      filters: 3
      kernel_size: 3
      padding: SAME
      strides: 2
      activation: TANH
    }
  }
  layers {
    name: "c2"
    inputs: "img"
    conv2d {
      filters: 2
      kernel_size: [ 2, 3 ]
    }
  }
  layers {
    name: "p"
    inputs: "c2"
    max_pool2d { pool_size: 2 padding: SAME }
  }
  layers {
    name: "f1"
    inputs: "c1"
    flatten {}
  }
  layers {
    name: "c3"
    inputs: "p"
    conv2d { filters: 2 kernel_size: 2 padding: SAME activation: RELU }
  }
  layers {
    name: "f2"
    inputs: "c3"
    flatten {}
  }
  layers {
    name: "out"
    inputs: [ "f1", "f2" ]
    dense { units: 3 }
  }
  loss { kind: SOFTMAX_CROSS_ENTROPY input: "out" }
)pb";

inline constexpr char kMergeAndLayerNormModel[] = R"pb(
  inputs {
    name: "x"
    dense { shape: [ 2, 3 ] }
  }
  inputs {
    name: "y"
    dense { shape: [ 2, 2 ] }
  }
  label { kind: BINARY }
  layers {
    name: "cat"
    inputs: [ "x", "y" ]
    concat {}
  }
  layers {
    name: "n"
    inputs: "cat"
    layer_norm {}
  }
  layers {
    name: "flat"
    inputs: "n"
    flatten {}
  }
  layers {
    name: "a"
    inputs: "flat"
    dense { units: 4 activation: SIGMOID }
  }
  layers {
    name: "b"
    inputs: "flat"
    dense { units: 4 }
  }
  layers {
    name: "sum"
    inputs: [ "a", "b", "a" ]
    add {}
  }
  layers {
    name: "prod"
    inputs: [ "sum", "b" ]
    multiply {}
  }
  layers {
    name: "rows"
    inputs: [ "x", "x" ]
    concat { axis: 0 }
  }
  layers {
    name: "rf"
    inputs: "rows"
    flatten {}
  }
  layers {
    name: "out"
    inputs: [ "prod", "rf" ]
    dense { units: 1 }
  }
  loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
)pb";

inline constexpr char kRegressionModel[] = R"pb(
  inputs {
    name: "x"
    dense { shape: [ 5 ] }
  }
  label { kind: REAL }
  layers {
    name: "h"
    inputs: "x"
    dense { units: 4 activation: TANH }
  }
  layers {
    name: "out"
    inputs: "h"
    dense { units: 1 }
  }
  loss { kind: MEAN_SQUARED_ERROR input: "out" }
)pb";

inline constexpr char kInteractionModel[] = R"pb(
  inputs {
    name: "x"
    dense { shape: [ 6 ] }
  }
  inputs {
    name: "v"
    dense { shape: [ 3, 4 ] }
  }
  label { kind: BINARY }
  layers {
    name: "bottom"
    inputs: "x"
    dense { units: 4 activation: TANH }
  }
  layers {
    name: "dots"
    inputs: [ "bottom", "v" ]
    dot_interaction { concat_first_input: true }
  }
  layers {
    name: "selfdots"
    inputs: [ "v", "bottom" ]
    dot_interaction { self_interaction: true }
  }
  layers {
    name: "fm"
    inputs: [ "v", "bottom" ]
    fm_order2 {}
  }
  layers {
    name: "out"
    inputs: [ "dots", "selfdots", "fm" ]
    dense { units: 1 }
  }
  loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
)pb";

inline constexpr char kCrossModel[] = R"pb(
  inputs {
    name: "x"
    dense { shape: [ 5 ] }
  }
  label { kind: BINARY }
  layers {
    name: "h"
    inputs: "x"
    dense { units: 4 activation: TANH }
  }
  layers {
    name: "full"
    inputs: "h"
    cross { num_layers: 2 }
  }
  layers {
    name: "low"
    inputs: "h"
    cross { num_layers: 2 projection_dim: 2 }
  }
  layers {
    name: "v1"
    inputs: "h"
    cross { num_layers: 3 version: V1 }
  }
  layers {
    name: "out"
    inputs: [ "full", "low", "v1" ]
    dense { units: 1 }
  }
  loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
)pb";

// Sum and mean bags, one table read by two fields, and one field read by
// two tables (DeepFM's linear and factor terms), into Dense and FmOrder2.
inline constexpr char kEmbeddingModel[] = R"pb(
  inputs {
    name: "a"
    sparse { max_hotness: 3 vocab_size: 10 }
  }
  inputs {
    name: "b"
    sparse { max_hotness: 3 vocab_size: 10 }
  }
  inputs {
    name: "x"
    dense { shape: [ 2 ] }
  }
  label { kind: BINARY }
  layers {
    name: "ea"
    inputs: "a"
    embedding_bag { table: "shared" dim: 3 }
  }
  layers {
    name: "eb"
    inputs: "b"
    embedding_bag { table: "shared" dim: 3 combiner: MEAN }
  }
  layers {
    name: "wb"
    inputs: "b"
    embedding_bag { table: "linear" dim: 1 }
  }
  layers {
    name: "fm"
    inputs: [ "ea", "eb" ]
    fm_order2 {}
  }
  layers {
    name: "out"
    inputs: [ "ea", "eb", "wb", "fm", "x" ]
    dense { units: 1 }
  }
  loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
)pb";

// DeepFM's layout: one layer reads three fields (one of them also read
// alone) from one table into [3, dim] for the factorization machine and,
// flattened, a Dense; a second multi-field layer of dim 1 is the linear
// term.
inline constexpr char kMultiFieldEmbeddingModel[] = R"pb(
  inputs {
    name: "a"
    sparse { max_hotness: 3 vocab_size: 10 }
  }
  inputs {
    name: "b"
    sparse { max_hotness: 3 vocab_size: 10 }
  }
  inputs {
    name: "c"
    sparse { max_hotness: 3 vocab_size: 10 }
  }
  label { kind: BINARY }
  layers {
    name: "factors"
    inputs: [ "a", "b", "c" ]
    embedding_bag { table: "factors" dim: 2 combiner: MEAN }
  }
  layers {
    name: "linear"
    inputs: [ "c", "a" ]
    embedding_bag { table: "linear" dim: 1 }
  }
  layers {
    name: "alone"
    inputs: "b"
    embedding_bag { table: "factors" dim: 2 }
  }
  layers {
    name: "fm"
    inputs: "factors"
    fm_order2 {}
  }
  layers {
    name: "flat"
    inputs: "factors"
    flatten {}
  }
  layers {
    name: "linear_flat"
    inputs: "linear"
    flatten {}
  }
  layers {
    name: "out"
    inputs: [ "fm", "flat", "linear_flat", "alone" ]
    dense { units: 1 }
  }
  loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
)pb";

inline constexpr char kBatchNormModel[] = R"pb(
  inputs {
    name: "x"
    dense { shape: [ 6 ] }
  }
  label { kind: REAL }
  layers {
    name: "h"
    inputs: "x"
    dense { units: 8 activation: TANH }
  }
  layers {
    name: "r"
    inputs: "h"
    reshape { shape: [ 2, 4 ] }
  }
  layers {
    name: "n"
    inputs: "r"
    batch_norm {}
  }
  layers {
    name: "f"
    inputs: "n"
    flatten {}
  }
  layers {
    name: "out"
    inputs: "f"
    dense { units: 1 }
  }
  loss { kind: MEAN_SQUARED_ERROR input: "out" }
)pb";

// The preset MLP's shape, with dropout.
inline constexpr char kMlp[] = R"pb(
  inputs {
    name: "image"
    dense { shape: [ 20 ] }
  }
  label { kind: CLASS_INDEX num_classes: 5 }
  layers {
    name: "dense_0"
    inputs: "image"
    dense { units: 16 activation: RELU }
  }
  layers {
    name: "dropout_0"
    inputs: "dense_0"
    dropout { rate: 0.3 }
  }
  layers {
    name: "dense_1"
    inputs: "dropout_0"
    dense { units: 8 activation: RELU }
  }
  layers {
    name: "dropout_1"
    inputs: "dense_1"
    dropout { rate: 0.3 }
  }
  layers {
    name: "dense_2"
    inputs: "dropout_1"
    dense { units: 5 }
  }
  loss { kind: SOFTMAX_CROSS_ENTROPY input: "dense_2" }
)pb";

struct LayerTestModel {
  const char* name;
  const char* text;
};

inline constexpr LayerTestModel kLayerTestModels[] = {
    {"MlpWithDropout", kMlp},
    {"DenseStack", kDenseStackModel},
    {"ConvolutionAndPooling", kConvolutionModel},
    {"ConcatAddMultiplyAndLayerNorm", kMergeAndLayerNormModel},
    {"MeanSquaredError", kRegressionModel},
    {"DotInteractionAndFmOrder2", kInteractionModel},
    {"CrossNetwork", kCrossModel},
    {"EmbeddingBag", kEmbeddingModel},
    {"BatchNorm", kBatchNormModel},
};

}  // namespace tessera

#endif  // TESSERA_TESTS_WORKER_NN_LAYER_TEST_MODELS_H_
