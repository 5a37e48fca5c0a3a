// What can be known about a job's data without training: the dry run's and
// the loaders' checks of examples against the model that will read them.

#ifndef TESSERA_DATA_DATA_CHECK_H_
#define TESSERA_DATA_DATA_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "data/example_set.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"

namespace tessera {

// Checks class-index labels against [0, num_classes); the error names
// `source`, the example (`first` + its position) and the model's label.
absl::Status CheckClassLabels(absl::Span<const int32_t> labels, int num_classes,
                              absl::string_view source, int64_t first);

// Checks the labels of `batch` against `label`: a class index inside
// [0, num_classes), a binary label in [0, 1], a real label finite. The
// error names `source` (a file, or "train_files"), the example's index
// (`first` + its row) and the model's label. Unlabeled batches pass.
absl::Status CheckLabels(const HostBatch& batch, const LabelDef& label,
                         absl::string_view source, int64_t first);

// The dry run's check of `data` against `model`: the first example of the
// training and of the test files is read through the workers' own reader
// (a missing file, a wrong shape, a missing feature are found before
// anything starts), and its label is checked; an IDX labels file, one byte
// per label, is checked whole. InvalidArgument or NotFound naming the file.
absl::Status CheckDataAgainstModel(const DataConfig& data,
                                   const ModelDef& model);

}  // namespace tessera

#endif  // TESSERA_DATA_DATA_CHECK_H_
