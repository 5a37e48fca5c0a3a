// A model's summary as Keras' model.summary() prints it: the description
// with every default written out, then one line per layer (kind, output
// shape per example, parameters) and the totals.

#ifndef TESSERA_COMMON_MODEL_MODEL_SUMMARY_H_
#define TESSERA_COMMON_MODEL_MODEL_SUMMARY_H_

#include <string>

#include "common/model/model_graph.h"

namespace tessera {

std::string FormatModelSummary(const ModelGraph& graph);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_MODEL_SUMMARY_H_
