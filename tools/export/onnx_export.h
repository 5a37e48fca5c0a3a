// A trained model as an ONNX model (opset 17, IR version 8, ai.onnx.ml 2 for
// the id maps of hashed tables) that computes what Tessera's evaluation
// computes, written with the onnx library's own protobuf classes.
//
// The ONNX model's interface, per example (the first dimension, "batch",
// is free):
//   inputs   each dense input by its name, float, its shape ([784],
//            [28, 28, 1], [13]);
//            each embedding_bag layer's ids as "<its output>_ids", int64
//            [fields, hotness]: its input fields in order, each bag padded
//            with -1 to the hotness (the fields' largest max_hotness is what
//            a description expects; any width works, as training takes bags
//            of any size). A sparse input that several layers read is in
//            each of their inputs (one input per layer: each maps to its
//            table alone). Padding and ids a table does not hold read a
//            zero row; a mean bag divides by its true count, the ids that
//            are not padding. A fixed-vocabulary table maps an id to id mod
//            vocab_size as training does (the id -1 excepted);
//   outputs  "probabilities": a softmax head's class probabilities [C], a
//            sigmoid head's probability [1]; "predictions" for a
//            regression; "class" (int64): the predicted class (the
//            argmax, or probability >= 0.5); and every tensor the model
//            description lists in `outputs`, by its name, flattened.
// With pooled inputs, each embedding_bag layer's output (flattened,
// [fields * dim]) is an input instead of its sparse inputs, and the tables
// are left out.
#ifndef TESSERA_TOOLS_EXPORT_ONNX_EXPORT_H_
#define TESSERA_TOOLS_EXPORT_ONNX_EXPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "tools/export/trained_model.h"

namespace tessera {

inline constexpr int kOnnxOpset = 17;
inline constexpr int kOnnxMlOpset = 2;
inline constexpr int kOnnxIrVersion = 8;
// The id that pads a bag in the ONNX model's sparse inputs.
inline constexpr int64_t kOnnxPaddingId = -1;

struct OnnxExportOptions {
  // Leave the tables out: the pooled embeddings are the model's inputs.
  bool pooled_inputs = false;
};

// Unimplemented names a layer (its name and kind) with no ONNX form.
absl::StatusOr<onnx::ModelProto> ExportOnnx(const TrainedModel& model,
                                            const OnnxExportOptions& options);

// Writes `model` to `path` (a temporary name, then renamed). With
// `external_data`, or when the model is too large for one protobuf message
// (tables over 2 GB), every initializer of 1 KiB or more moves to
// "<path>.data" beside it (ONNX external data, 4 KiB aligned), which
// *model then refers to. ResourceExhausted when even the rest is over
// protobuf's 2 GB limit.
absl::Status WriteOnnxFile(onnx::ModelProto* model, const std::string& path,
                           bool external_data = false);

}  // namespace tessera

#endif  // TESSERA_TOOLS_EXPORT_ONNX_EXPORT_H_
