#include "common/model/model_support.h"

#include "absl/strings/str_cat.h"

namespace tessera {

absl::Status CheckModeFits(const std::vector<VariableDef>& variables,
                           const TrainingMode& mode,
                           const absl::flat_hash_set<std::string>& replicated) {
  if (mode.uses_parameter_servers()) return absl::OkStatus();
  for (const VariableDef& v : variables) {
    if (!v.sparse || replicated.contains(v.name)) continue;
    return absl::UnimplementedError(absl::StrCat(
        "the model has embedding table \"", v.name, "\", which ",
        v.shape.empty() || v.shape[0] == 0
            ? "grows with the ids it meets (vocab_size 0)"
            : "is placed TABLE_SHARDED",
        ": mirrored replicas cannot hold tables that live on parameter ",
        "servers; train it in mode hybrid or hybrid:sync (the dense ",
        "variables replicated and all-reduced as in mirrored, the tables ",
        "sharded on the servers), mode sync (every variable on the ",
        "servers), async or ssp"));
  }
  return absl::OkStatus();
}

absl::Status CheckDataFits(const ModelDef& model, const std::string& format) {
  const std::string what = absl::StrCat("data format \"", format, "\"");
  if (format == "idx") {
    if (model.inputs_size() != 1 || !model.inputs(0).has_dense()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " provides one dense input (the image's pixels); the model ",
          "has ", model.inputs_size(), " inputs",
          model.inputs_size() > 0 && !model.inputs(0).has_dense()
              ? absl::StrCat(", \"", model.inputs(0).name(), "\" sparse")
              : ""));
    }
    if (model.label().kind() != LabelDef::CLASS_INDEX) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " provides class-index labels; the model's label is ",
          LabelDef::Kind_Name(model.label().kind())));
    }
    return absl::OkStatus();
  }
  if (format == "criteo") {
    int dense = 0;
    for (const InputDef& in : model.inputs()) {
      if (in.has_sparse()) continue;
      if (++dense > 1 || in.dense().shape_size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " provides one dense input of shape [d] (its integer ",
            "columns) besides the sparse fields; the model's input \"",
            in.name(), "\" is ",
            dense > 1 ? "a second dense input" : "not of shape [d]"));
      }
    }
    if (model.label().kind() != LabelDef::BINARY) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " provides binary (click) labels; the model's label is ",
          LabelDef::Kind_Name(model.label().kind())));
    }
    return absl::OkStatus();
  }
  if (format == "tfrecord" || format == "csv") {
    // Any inputs: the job's DataConfig names the feature or column of each
    // (data/stream/example_layout.h checks them against the files).
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown data format \"", format, "\" (idx, criteo, tfrecord, csv)"));
}

CriteoColumns CriteoColumnsOf(const ModelDef& model) {
  CriteoColumns columns;
  for (const InputDef& in : model.inputs()) {
    if (in.has_sparse()) {
      ++columns.num_fields;
    } else {
      columns.num_dense = static_cast<int>(in.dense().shape(0));
    }
  }
  return columns;
}

}  // namespace tessera
