#include "data/data_check.h"

#include <cmath>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/data_format.h"
#include "data/idx/idx_reader.h"
#include "data/stream/stream_examples.h"

namespace tessera {
namespace {

std::string SourceOf(const DataConfig& data, bool train) {
  if (IsStreamedFormat(data.format())) {
    return absl::StrCat(
        train ? "train_files" : "test_files", " (",
        absl::StrJoin(train ? data.train_files() : data.test_files(), ", "),
        ")");
  }
  if (DataFormatNamed(data.format()) == DataFormat::kCriteo) {
    return train ? data.train_path() : data.test_path();
  }
  return train ? data.train_labels() : data.test_labels();
}

}  // namespace

absl::Status CheckClassLabels(absl::Span<const int32_t> labels, int num_classes,
                              absl::string_view source, int64_t first) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": example ", first + static_cast<int64_t>(i),
                       ": label ", labels[i], " is outside [0, ", num_classes,
                       "): the model's label has num_classes ", num_classes));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(const HostBatch& batch, const LabelDef& label,
                         absl::string_view source, int64_t first) {
  if (!batch.labeled) return absl::OkStatus();
  if (label.kind() == LabelDef::CLASS_INDEX) {
    return CheckClassLabels(batch.class_labels, label.num_classes(), source,
                            first);
  }
  for (int64_t i = 0;
       i < batch.size && i < static_cast<int64_t>(batch.labels.size()); ++i) {
    const float y = batch.labels[i];
    std::string problem;
    if (label.kind() == LabelDef::BINARY && !(y >= 0.0f && y <= 1.0f)) {
      problem = absl::StrCat("label ", y,
                             " is outside [0, 1]: the model's label is "
                             "BINARY");
    } else if (!std::isfinite(y)) {
      problem = absl::StrCat("label ", y, " is not finite");
    }
    if (!problem.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": example ", first + i, ": ", problem));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDataAgainstModel(const DataConfig& data,
                                   const ModelDef& model) {
  for (bool train : {true, false}) {
    absl::StatusOr<std::unique_ptr<ExampleSet>> first =
        LoadExamples(data, model, train, 0, 1);
    if (!first.ok()) return first.status();
    HostBatch batch;
    const int64_t zero = 0;
    if (absl::Status s = (*first)->Gather({&zero, 1}, &batch); !s.ok()) {
      return s;
    }
    if (absl::Status s =
            CheckLabels(batch, model.label(), SourceOf(data, train), 0);
        !s.ok()) {
      return s;
    }
    const std::string& labels =
        train ? data.train_labels() : data.test_labels();
    if (DataFormatNamed(data.format()) == DataFormat::kIdx && !labels.empty()) {
      // One byte a label: the whole file costs less than one image batch.
      absl::StatusOr<IdxArray> all = ReadIdx(labels);
      if (!all.ok()) return all.status();
      batch.labeled = true;
      batch.size = static_cast<int64_t>(all->data.size());
      batch.class_labels.assign(all->data.begin(), all->data.end());
      if (absl::Status s = CheckLabels(batch, model.label(), labels, 0);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
