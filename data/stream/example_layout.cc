#include "data/stream/example_layout.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tessera {

absl::StatusOr<ExampleSchema> ExampleSchemaOf(const ModelDef& model,
                                              const DataConfig& data) {
  absl::flat_hash_map<std::string, const InputSource*> sources;
  for (const InputSource& source : data.inputs()) {
    const bool known = std::any_of(
        model.inputs().begin(), model.inputs().end(),
        [&](const InputDef& in) { return in.name() == source.input(); });
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("data inputs name \"", source.input(),
                       "\", which is not an input of the model"));
    }
    sources[source.input()] = &source;
  }
  ExampleSchema schema;
  for (const InputDef& in : model.inputs()) {
    std::vector<std::string> features;
    if (auto it = sources.find(in.name());
        it != sources.end() && it->second->features_size() > 0) {
      features.assign(it->second->features().begin(),
                      it->second->features().end());
    } else {
      features.push_back(in.name());
    }
    if (in.has_sparse()) {
      if (features.size() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("sparse input \"", in.name(),
                         "\" reads one feature, not ", features.size()));
      }
      schema.sparse.push_back(
          {in.name(), features[0], std::max(in.sparse().max_hotness(), 1),
           in.sparse().ids_in_vocab() ? in.sparse().vocab_size() : 0});
      continue;
    }
    int64_t size = 1;
    for (int64_t d : in.dense().shape()) size *= d;
    if (in.dense().shape_size() == 0 || size <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dense input \"", in.name(), "\" needs a shape of positive sizes"));
    }
    schema.dense.push_back({in.name(), size, std::move(features)});
    schema.dense_values += size;
  }
  if (data.label_feature().empty()) {
    return absl::InvalidArgumentError(
        "the data's label_feature is unset: name the feature or column that "
        "holds the label");
  }
  schema.label = data.label_feature();
  switch (model.label().kind()) {
    case LabelDef::CLASS_INDEX:
      schema.label_kind = ExampleSchema::LabelKind::kClassIndex;
      break;
    case LabelDef::BINARY:
      schema.label_kind = ExampleSchema::LabelKind::kBinary;
      break;
    default:
      schema.label_kind = ExampleSchema::LabelKind::kReal;
  }
  schema.num_classes = model.label().num_classes();
  return schema;
}

absl::StatusOr<CsvOptions> CsvOptionsOf(const CsvFormat& csv) {
  CsvOptions options;
  options.header = csv.columns_size() == 0;
  options.columns.assign(csv.columns().begin(), csv.columns().end());
  if (csv.delimiter() == "\\t") {
    options.delimiter = '\t';
  } else if (!csv.delimiter().empty()) {
    if (csv.delimiter().size() != 1 || csv.delimiter()[0] == '"' ||
        csv.delimiter()[0] == '\n' || csv.delimiter()[0] == '\r') {
      return absl::InvalidArgumentError(absl::StrCat(
          "csv delimiter must be one byte (not a quote or a line break), "
          "got \"",
          absl::CHexEscape(csv.delimiter()), "\""));
    }
    options.delimiter = csv.delimiter()[0];
  }
  for (const auto& [name, type] : csv.types()) options.types[name] = type;
  if (!csv.sparse_type().empty()) options.sparse_type = csv.sparse_type();
  return options;
}

void StartBatch(const ExampleSchema& schema, HostBatch* batch) {
  batch->size = 0;
  batch->dense.resize(schema.dense.size());
  for (std::vector<float>& d : batch->dense) d.clear();
  batch->offsets.resize(schema.sparse.size());
  batch->ids.resize(schema.sparse.size());
  for (size_t f = 0; f < schema.sparse.size(); ++f) {
    batch->offsets[f].assign(1, 0);
    batch->ids[f].clear();
  }
  batch->class_labels.clear();
  batch->labels.clear();
}

void AppendToBatch(const ExampleSchema& schema, const ParsedExample& example,
                   HostBatch* batch) {
  const float* dense = example.dense.data();
  for (size_t i = 0; i < schema.dense.size(); ++i) {
    batch->dense[i].insert(batch->dense[i].end(), dense,
                           dense + schema.dense[i].size);
    dense += schema.dense[i].size;
  }
  uint32_t begin = 0;
  for (size_t f = 0; f < schema.sparse.size(); ++f) {
    const uint32_t end = example.id_ends[f];
    batch->ids[f].insert(batch->ids[f].end(), example.ids.begin() + begin,
                         example.ids.begin() + end);
    batch->offsets[f].push_back(static_cast<int64_t>(batch->ids[f].size()));
    begin = end;
  }
  if (schema.label_kind == ExampleSchema::LabelKind::kClassIndex) {
    batch->class_labels.push_back(example.class_label);
  } else {
    batch->labels.push_back(example.label);
  }
  ++batch->size;
}

}  // namespace tessera
