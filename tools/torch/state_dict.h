// A model's variables as a PyTorch module's state_dict: the one owner of
// the names and layouts both ways, for tessera_coordinator --init_weights
// (a state_dict in, the variables' first values) and tessera_export
// --format=safetensors (trained variables out, loaded by
// module.load_state_dict).
//
// Names: a layer named as the module that made it ("features.0", which is
// what `tessera_torch import` writes) keeps PyTorch's parameter names:
//   dense, conv2d            <layer>.weight, <layer>.bias
//   batch_norm               <layer>.weight, .bias, .running_mean,
//                            .running_var (and .num_batches_tracked, an
//                            I64 scalar written as 0 and ignored on input)
//   layer_norm               <layer>.weight, <layer>.bias
//   embedding_bag            <table>.weight; a growing table also
//                            <table>.ids (I64, the id of each row held)
//   anything else            the variable's name with '/' as '.'
// Layouts: a dense kernel [in, out] is Linear's weight [out, in]; a conv2d
// kernel [kh, kw, in, out] is Conv2d's [out, in, kh, kw]; and a dense layer
// reading (through activations and dropout) the flatten of an [h, w, c]
// image reads PyTorch's flatten of [c, h, w], so the weight's columns are
// in (c, h, w) order. Everything else is as Tessera holds it.
//
// Thread-safe; no state.
#ifndef TESSERA_TOOLS_TORCH_STATE_DICT_H_
#define TESSERA_TOOLS_TORCH_STATE_DICT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/safetensors.h"
#include "common/model/model_graph.h"
#include "tools/export/trained_model.h"

namespace tessera {

// One variable's state_dict entry.
struct StateDictEntry {
  enum class Layout { kSame, kDenseKernel, kConvKernel };
  std::string variable;            // Tessera's name ("fc1/kernel")
  std::string key;                 // the state_dict's ("fc1.weight")
  std::vector<int64_t> shape;      // Tessera's
  std::vector<int64_t> key_shape;  // PyTorch's
  Layout layout = Layout::kSame;
  // kDenseKernel: per input of the layer, its rows and, for the flatten of
  // an image, the image's [h, w, c] (else empty).
  std::vector<int64_t> input_rows;
  std::vector<std::vector<int64_t>> input_images;
  bool sparse = false;
};

// The entries of every variable of `graph`, in its variable order.
std::vector<StateDictEntry> StateDictLayout(const ModelGraph& graph);

// The keys PyTorch keeps beside the variables that carry nothing Tessera
// trains (BatchNorm's num_batches_tracked), for every batch_norm layer.
std::vector<std::string> StateDictBufferKeys(const ModelGraph& graph);

// `values` (Tessera's layout) in PyTorch's, and back.
std::vector<float> ToStateDictLayout(const StateDictEntry& entry,
                                     const std::vector<float>& values);
std::vector<float> FromStateDictLayout(const StateDictEntry& entry,
                                       const std::vector<float>& values);

// The variables' values (Tessera's names, shapes and layouts, in
// graph.variables order) from `file`, a state_dict: each variable is read
// under its state_dict key or, failing that, under its own name in
// Tessera's layout. InvalidArgument names a variable with no tensor (and
// both names looked for), a tensor of the wrong shape (with both shapes),
// a non-float tensor, a growing table (it has no initial rows) and any
// tensor of the file that nothing reads, as load_state_dict(strict=True)
// does.
struct VariableValues {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};
absl::StatusOr<std::vector<VariableValues>> VariablesFromStateDict(
    const ModelGraph& graph, const Safetensors& file);

// `model`'s trained variables as a state_dict (F32 tensors, plus the
// buffers of StateDictBufferKeys), metadata "format": "pt" as
// safetensors.torch writes.
Safetensors StateDictFromTrainedModel(const TrainedModel& model);

}  // namespace tessera

#endif  // TESSERA_TOOLS_TORCH_STATE_DICT_H_
