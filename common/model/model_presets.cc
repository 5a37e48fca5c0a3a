#include "common/model/model_presets.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/model_spec.h"

namespace tessera {
namespace {

// Appends hidden_units... -> `out` dense layers reading `inputs`, with
// ReLU and dropout after each hidden layer; returns the last tensor.
std::string AppendDenseStack(const ModelConfig& config,
                             std::vector<std::string> inputs, int64_t out,
                             ModelDef* model) {
  const int hidden = config.hidden_units_size();
  for (int l = 0; l <= hidden; ++l) {
    LayerDef* layer = model->add_layers();
    layer->set_name(absl::StrCat("dense_", l));
    for (const std::string& in : inputs) layer->add_inputs(in);
    DenseLayer* dense = layer->mutable_dense();
    dense->set_units(l < hidden ? config.hidden_units(l) : out);
    if (l < hidden) dense->set_activation(RELU);
    inputs = {layer->name()};
    if (l < hidden && config.dropout() > 0) {
      LayerDef* drop = model->add_layers();
      drop->set_name(absl::StrCat("dropout_", l));
      drop->add_inputs(layer->name());
      drop->mutable_dropout()->set_rate(config.dropout());
      inputs = {drop->name()};
    }
  }
  return inputs[0];
}

}  // namespace

absl::StatusOr<ModelDef> PresetModel(const ModelConfig& config) {
  if (absl::Status s = ValidateModelConfig(config); !s.ok()) return s;
  ModelDef model;
  if (config.kind() == "mlp") {
    InputDef* image = model.add_inputs();
    image->set_name("image");
    image->mutable_dense()->add_shape(config.input_dim());
    model.mutable_label()->set_kind(LabelDef::CLASS_INDEX);
    model.mutable_label()->set_num_classes(config.num_classes());
    const std::string logits =
        AppendDenseStack(config, {"image"}, config.num_classes(), &model);
    model.mutable_loss()->set_kind(LossDef::SOFTMAX_CROSS_ENTROPY);
    model.mutable_loss()->set_input(logits);
    model.add_metrics(ACCURACY);
    return model;
  }
  std::vector<std::string> features;
  for (int f = 0; f < config.num_fields(); ++f) {
    InputDef* field = model.add_inputs();
    field->set_name(absl::StrCat("C", f + 1));
    field->mutable_sparse()->set_max_hotness(1);
    field->mutable_sparse()->set_vocab_size(config.vocab_size());
  }
  if (config.num_dense() > 0) {
    InputDef* dense = model.add_inputs();
    dense->set_name("dense");
    dense->mutable_dense()->add_shape(config.num_dense());
  }
  for (int f = 0; f < config.num_fields(); ++f) {
    LayerDef* bag = model.add_layers();
    bag->set_name(absl::StrCat("bag_", f));
    bag->add_inputs(absl::StrCat("C", f + 1));
    EmbeddingBagLayer* p = bag->mutable_embedding_bag();
    p->set_table(absl::StrCat("embedding_", f));
    p->set_dim(config.embedding_dim());
    p->set_combiner(config.combiner() == "mean" ? MEAN : SUM);
    features.push_back(bag->name());
  }
  if (config.num_dense() > 0) features.push_back("dense");
  model.mutable_label()->set_kind(LabelDef::BINARY);
  const std::string logit = AppendDenseStack(config, features, 1, &model);
  model.mutable_loss()->set_kind(LossDef::SIGMOID_CROSS_ENTROPY);
  model.mutable_loss()->set_input(logit);
  model.add_metrics(AUC);
  model.add_metrics(LOG_LOSS);
  model.add_metrics(ACCURACY);
  return model;
}

absl::StatusOr<ModelDef> JobModel(const JobConfig& job) {
  if (job.has_model_def()) return job.model_def();
  return PresetModel(job.model());
}

}  // namespace tessera
