#include "common/model/model_summary.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model/every_field_text.h"

namespace tessera {

std::string FormatModelSummary(const ModelGraph& graph) {
  const std::string text = EveryFieldText(graph.resolved);
  std::string out =
      absl::StrCat("model, every default written out:\n", text,
                   absl::StrFormat("\n%-20s %-16s %-16s %14s\n", "layer",
                                   "kind", "output shape", "parameters"));
  int64_t dense = 0, table_columns = 0;
  absl::flat_hash_set<std::string> counted;  // a shared table counts once
  for (int i : graph.order) {
    const LayerDef& layer = graph.resolved.layers(i);
    std::vector<TensorFacts> inputs;
    for (const std::string& in : layer.inputs()) {
      inputs.push_back(graph.tensors.at(in));
    }
    // Growing tables have no size to count: their rows arrive with data.
    std::string params;
    int64_t count = 0;
    bool growing = false;
    for (const LayerVariable& v : LayerVariables(layer, inputs)) {
      if (!counted.insert(v.name).second) continue;
      if (v.sparse && v.shape[0] == 0) {
        growing = true;
        table_columns += v.shape[1];
        continue;
      }
      int64_t n = 1;
      for (int64_t d : v.shape) n *= d;
      count += n;
    }
    dense += count;
    params = growing ? absl::StrCat(count, " + rows") : absl::StrCat(count);
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "%-20s %-16s %-16s %14s\n", layer.name(), LayerKindName(layer),
            ShapeString(graph.tensors.at(layer.output()).shape), params));
  }
  absl::StrAppend(&out, "parameters: ", dense);
  if (table_columns > 0) {
    absl::StrAppend(&out, " + ", table_columns,
                    " per id seen (growing tables)");
  }
  absl::StrAppend(&out, "\n");
  return out;
}

}  // namespace tessera
