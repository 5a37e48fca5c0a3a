#include "worker/data/example_set.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/model/model_graph.h"
#include "common/model/model_support.h"
#include "worker/data/criteo_reader.h"
#include "worker/data/idx_reader.h"
#include "worker/data/mnist_dataset.h"

namespace tessera {
namespace {

absl::Status CheckIndex(int64_t index, int64_t size) {
  if (index < 0 || index >= size) {
    return absl::OutOfRangeError(absl::StrCat(
        "example ", index, " is outside the ", size, " examples loaded"));
  }
  return absl::OkStatus();
}

// IDX images and labels: the pixels are the model's one dense input.
class IdxExamples final : public ExampleSet {
 public:
  explicit IdxExamples(MnistDataset data) : data_(std::move(data)) {}

  int64_t size() const override { return data_.size; }
  bool has_labels() const override { return data_.has_labels; }

  absl::Status Gather(absl::Span<const int64_t> indices,
                      HostBatch* batch) const override {
    const int64_t n = static_cast<int64_t>(indices.size());
    const int dim = data_.feature_dim();
    batch->labeled = data_.has_labels;
    batch->size = n;
    batch->dense.resize(1);
    batch->dense[0].resize(n * dim);
    batch->class_labels.resize(n);
    batch->labels.clear();
    batch->offsets.clear();
    batch->ids.clear();
    for (int64_t i = 0; i < n; ++i) {
      if (absl::Status s = CheckIndex(indices[i], data_.size); !s.ok()) {
        return s;
      }
      std::copy_n(data_.example(indices[i]), dim,
                  batch->dense[0].data() + i * dim);
      batch->class_labels[i] = data_.has_labels ? data_.labels[indices[i]] : 0;
    }
    return absl::OkStatus();
  }

 private:
  const MnistDataset data_;
};

// Criteo TSV: the categorical columns are the sparse inputs in order, the
// integer columns the dense input.
class CriteoExamples final : public ExampleSet {
 public:
  explicit CriteoExamples(CtrDataset data) : data_(std::move(data)) {}

  int64_t size() const override { return data_.size; }
  bool has_labels() const override { return data_.has_labels; }

  absl::Status Gather(absl::Span<const int64_t> indices,
                      HostBatch* batch) const override {
    const int64_t n = static_cast<int64_t>(indices.size());
    const int nd = data_.num_dense;
    batch->labeled = data_.has_labels;
    batch->size = n;
    batch->dense.resize(nd > 0 ? 1 : 0);
    if (nd > 0) batch->dense[0].resize(n * nd);
    batch->labels.resize(n);
    batch->class_labels.clear();
    batch->offsets.resize(data_.num_fields);
    batch->ids.resize(data_.num_fields);
    for (int f = 0; f < data_.num_fields; ++f) {
      batch->offsets[f].assign(1, 0);
      batch->ids[f].clear();
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = indices[i];
      if (absl::Status s = CheckIndex(e, data_.size); !s.ok()) return s;
      batch->labels[i] = data_.has_labels ? data_.labels[e] : 0.0f;
      if (nd > 0) {
        std::copy_n(data_.dense_row(e), nd, batch->dense[0].data() + i * nd);
      }
      for (int f = 0; f < data_.num_fields; ++f) {
        const CtrFieldColumn& column = data_.fields[f];
        std::vector<int64_t>& ids = batch->ids[f];
        ids.insert(ids.end(), column.ids.begin() + column.offsets[e],
                   column.ids.begin() + column.offsets[e + 1]);
        batch->offsets[f].push_back(static_cast<int64_t>(ids.size()));
      }
    }
    return absl::OkStatus();
  }

 private:
  const CtrDataset data_;
};

absl::StatusOr<int64_t> FileCount(const DataConfig& data, bool train) {
  if (data.format() == "criteo") {
    return CountCriteoExamples(train ? data.train_path() : data.test_path());
  }
  return CountIdxItems(train ? data.train_images() : data.test_images());
}

}  // namespace

absl::StatusOr<int64_t> CountExamples(const DataConfig& data, bool train) {
  absl::StatusOr<int64_t> n = FileCount(data, train);
  if (!n.ok()) return n.status();
  const int64_t cap = train ? data.train_examples() : data.test_examples();
  const std::string what = train ? "train_examples" : "test_examples";
  const std::string path =
      data.format() == "criteo"
          ? (train ? data.train_path() : data.test_path())
          : (train ? data.train_images() : data.test_images());
  // Asking for more examples than the data holds is a mistake to report,
  // not a request to quietly train on fewer.
  if (cap > *n) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", cap, " but ", path, " holds only ", *n,
                     " examples (0 takes them all)"));
  }
  if (cap < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be >= 0 (0: all), got ", cap));
  }
  const int64_t count = cap > 0 ? cap : *n;
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no examples: the ",
                     train ? "training" : "test", " set is empty"));
  }
  return count;
}

absl::StatusOr<std::unique_ptr<ExampleSet>> LoadExamples(
    const DataConfig& data, const ModelDef& model, bool train, int64_t first,
    int64_t count, LabelUse labels) {
  const bool optional = labels == LabelUse::kOptional;
  if (absl::Status s = CheckDataFits(model, data.format()); !s.ok()) return s;
  if (data.format() == "criteo") {
    const CriteoColumns columns = CriteoColumnsOf(model);
    absl::StatusOr<CtrDataset> loaded =
        LoadCriteo(train ? data.train_path() : data.test_path(), first, count,
                   CriteoFormat{columns.num_dense, columns.num_fields,
                                /*label_optional=*/optional});
    if (!loaded.ok()) return loaded.status();
    return std::make_unique<CriteoExamples>(*std::move(loaded));
  }
  const std::string& images = train ? data.train_images() : data.test_images();
  const std::string& label_file =
      train ? data.train_labels() : data.test_labels();
  if (label_file.empty() && !optional) {
    return absl::InvalidArgumentError(
        absl::StrCat("no labels file (", train ? "train" : "test",
                     "_labels) for the images ", images));
  }
  absl::StatusOr<MnistDataset> loaded =
      LoadMnist(images, label_file, first, count);
  if (!loaded.ok()) return loaded.status();
  int64_t elements = 1;
  for (int64_t d : model.inputs(0).dense().shape()) elements *= d;
  if (loaded->feature_dim() != elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wrong shape: images in ", images, " have ", loaded->feature_dim(),
        " pixels (", loaded->rows, "x", loaded->cols, "), the model's input \"",
        model.inputs(0).name(), "\" expects ", elements));
  }
  return std::make_unique<IdxExamples>(*std::move(loaded));
}

}  // namespace tessera
