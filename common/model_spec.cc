#include "common/model_spec.h"

#include "absl/strings/str_cat.h"
#include "common/counter_rng.h"

namespace tessera {
namespace {

// Keras' Embedding draws initial values from uniform(-0.05, 0.05).
constexpr float kEmbeddingInitRange = 0.05f;
// Salt of the embedding tables' seeds, so they never share a stream with
// the dense layers' (which use the layer index).
constexpr uint64_t kEmbeddingSeedSalt = uint64_t{1} << 32;

absl::Status ValidateHiddenAndDropout(const ModelConfig& model) {
  for (int i = 0; i < model.hidden_units_size(); ++i) {
    if (model.hidden_units(i) <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("model.hidden_units[", i,
                                                     "] must be > 0, got ",
                                                     model.hidden_units(i)));
    }
  }
  if (!(model.dropout() >= 0 && model.dropout() < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.dropout must be in [0, 1), got ", model.dropout()));
  }
  return absl::OkStatus();
}

absl::Status ValidateMlp(const ModelConfig& model) {
  if (model.input_dim() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.input_dim must be > 0, got ", model.input_dim()));
  }
  if (model.num_classes() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.num_classes must be >= 2, got ", model.num_classes()));
  }
  return ValidateHiddenAndDropout(model);
}

absl::Status ValidateCtr(const ModelConfig& model) {
  if (model.embedding_dim() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.embedding_dim must be > 0, got ", model.embedding_dim()));
  }
  if (model.num_fields() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.num_fields must be > 0, got ", model.num_fields()));
  }
  if (model.num_dense() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.num_dense must be >= 0, got ", model.num_dense()));
  }
  if (model.vocab_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.vocab_size must be >= 0 (0: tables grow), got ",
                     model.vocab_size()));
  }
  if (!model.combiner().empty() && model.combiner() != "sum" &&
      model.combiner() != "mean") {
    return absl::InvalidArgumentError(
        absl::StrCat("model.combiner: unknown combiner \"", model.combiner(),
                     "\" (sum, mean)"));
  }
  return ValidateHiddenAndDropout(model);
}

// Appends the dense layers in -> hidden_units... -> out.
void AppendDenseLayers(const ModelConfig& model, int64_t in, int64_t out,
                       uint64_t seed, std::vector<VariableDef>* vars) {
  std::vector<int64_t> widths = {in};
  for (int units : model.hidden_units()) widths.push_back(units);
  widths.push_back(out);
  for (size_t layer = 0; layer + 1 < widths.size(); ++layer) {
    const int64_t fan_in = widths[layer], fan_out = widths[layer + 1];
    VariableDef kernel;
    kernel.name = absl::StrCat("dense_", layer, "/kernel");
    kernel.shape = {fan_in, fan_out};
    kernel.initializer.set_kind(Initializer::GLOROT_UNIFORM);
    kernel.initializer.set_fan_in(fan_in);
    kernel.initializer.set_fan_out(fan_out);
    kernel.initializer.set_seed(DeriveSeed(seed, layer));
    vars->push_back(std::move(kernel));

    VariableDef bias;
    bias.name = absl::StrCat("dense_", layer, "/bias");
    bias.shape = {fan_out};
    bias.initializer.set_kind(Initializer::ZEROS);
    vars->push_back(std::move(bias));
  }
}

}  // namespace

absl::Status ValidateModelConfig(const ModelConfig& model) {
  if (model.kind() == "mlp") return ValidateMlp(model);
  if (model.kind() == "ctr") return ValidateCtr(model);
  return absl::InvalidArgumentError(absl::StrCat("model.kind: unknown model \"",
                                                 model.kind(),
                                                 "\" (supported: mlp, ctr)"));
}

absl::StatusOr<std::vector<VariableDef>> ModelVariables(
    const ModelConfig& model, uint64_t seed) {
  if (absl::Status s = ValidateModelConfig(model); !s.ok()) return s;
  std::vector<VariableDef> vars;
  if (model.kind() == "mlp") {
    AppendDenseLayers(model, model.input_dim(), model.num_classes(), seed,
                      &vars);
    return vars;
  }
  for (int f = 0; f < model.num_fields(); ++f) {
    VariableDef table;
    table.name = absl::StrCat("embedding_", f);
    table.shape = {model.vocab_size(), model.embedding_dim()};
    table.sparse = true;
    table.initializer.set_kind(Initializer::UNIFORM);
    table.initializer.set_minval(-kEmbeddingInitRange);
    table.initializer.set_maxval(kEmbeddingInitRange);
    table.initializer.set_seed(DeriveSeed(seed, kEmbeddingSeedSalt + f));
    vars.push_back(std::move(table));
  }
  const int64_t in =
      int64_t{model.num_fields()} * model.embedding_dim() + model.num_dense();
  AppendDenseLayers(model, in, 1, seed, &vars);
  return vars;
}

ShardDef WholeShardOf(const VariableDef& v) {
  ShardDef def;
  def.set_name(absl::StrCat(v.name, "/part_0"));
  def.set_variable(v.name);
  def.set_index(0);
  def.set_row_offset(0);
  for (int64_t d : v.shape) {
    def.mutable_variable_shape()->add_dims(d);
    def.mutable_shape()->add_dims(d);
  }
  def.set_dtype(DT_FLOAT);
  *def.mutable_initializer() = v.initializer;
  if (v.sparse && v.shape[0] == 0) {
    def.set_hash_table(true);
    def.set_dim(v.shape[1]);
    def.set_num_shards(1);
  }
  return def;
}

}  // namespace tessera
