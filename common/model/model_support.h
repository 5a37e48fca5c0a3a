// What a model description asks of the job around it: a training mode
// that can update its variables and a data format that provides its
// inputs. The coordinator checks both before any process starts training
// and the worker checks them again when configured; each refusal is
// written here once.

#ifndef TESSERA_COMMON_MODEL_MODEL_SUPPORT_H_
#define TESSERA_COMMON_MODEL_MODEL_SUPPORT_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "common/model_spec.h"
#include "common/training_mode.h"
#include "proto/model.pb.h"

namespace tessera {

// Unimplemented, naming the table, when `mode` is mirrored and a table of
// `variables` is not in `replicated` (the tables the workers keep whole,
// common/model/table_placement.h): mirrored jobs have no parameter
// servers to hold it.
absl::Status CheckModeFits(const std::vector<VariableDef>& variables,
                           const TrainingMode& mode,
                           const absl::flat_hash_set<std::string>& replicated);

// The columns of a Criteo-format file a model reads.
struct CriteoColumns {
  int num_dense = 0;   // integer columns I1.. (the dense input's size)
  int num_fields = 0;  // categorical columns C1.. (the sparse inputs)
};

// InvalidArgument naming the input or label that data format `format`
// ("idx" or "criteo") cannot provide:
//  idx:    exactly one dense input (an image's pixels, any shape of that
//          many elements) and a CLASS_INDEX label;
//  criteo: sparse inputs (C1.. in order) and at most one dense input of
//          shape [d] (I1..Id), and a BINARY label.
absl::Status CheckDataFits(const ModelDef& model, const std::string& format);

// The columns `model` reads of a Criteo-format file.
// REQUIRES: CheckDataFits(model, "criteo") is OK.
CriteoColumns CriteoColumnsOf(const ModelDef& model);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_MODEL_SUPPORT_H_
