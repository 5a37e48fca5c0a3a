#include "data/records/example_schema.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {

absl::Status SetLabel(const ExampleSchema& schema, double value,
                      ParsedExample* example) {
  switch (schema.label_kind) {
    case ExampleSchema::LabelKind::kClassIndex: {
      const int32_t classes = schema.num_classes;
      if (!(value >= 0 && value < classes) || value != std::floor(value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "label ", value, " is not a class index in [0, ", classes, ")"));
      }
      example->class_label = static_cast<int32_t>(value);
      return absl::OkStatus();
    }
    case ExampleSchema::LabelKind::kBinary:
      if (value != 0 && value != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("label ", value, " is not 0 or 1"));
      }
      example->label = static_cast<float>(value);
      return absl::OkStatus();
    default:
      if (!std::isfinite(value)) {
        return absl::InvalidArgumentError(
            absl::StrCat("label ", value, " is not a finite number"));
      }
      example->label = static_cast<float>(value);
      return absl::OkStatus();
  }
}

absl::Status CheckIds(const ExampleSchema::Sparse& input, const int64_t* ids,
                      size_t count) {
  if (input.id_bound <= 0) return absl::OkStatus();
  for (size_t i = 0; i < count; ++i) {
    if (ids[i] < 0 || ids[i] >= input.id_bound) {
      return absl::InvalidArgumentError(absl::StrCat(
          "id ", ids[i], " of sparse input \"", input.input,
          "\" is outside [0, ", input.id_bound,
          ") (its vocab_size; ids_in_vocab: such an id is refused, not "
          "wrapped, as Keras' Embedding has no row for it)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
