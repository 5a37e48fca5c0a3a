#include "data/example_set.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/data_format.h"
#include "common/model/model_graph.h"
#include "common/model/model_support.h"
#include "data/criteo/criteo_reader.h"
#include "data/data_check.h"
#include "data/idx/idx_reader.h"
#include "data/idx/mnist_dataset.h"
#include "data/stream/file_assignment.h"
#include "data/stream/stream_examples.h"

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

// Examples read whole into one HostBatch: a streamed set's records in file
// order, for the tools that hold a set in memory as the IDX and Criteo
// readers do.
class HeldExamples final : public ExampleSet {
 public:
  explicit HeldExamples(HostBatch held) : held_(std::move(held)) {}

  int64_t size() const override { return held_.size; }
  bool has_labels() const override { return held_.labeled; }

  absl::Status Gather(absl::Span<const int64_t> indices,
                      HostBatch* batch) const override {
    const int64_t n = static_cast<int64_t>(indices.size());
    const bool classes = !held_.class_labels.empty();
    batch->labeled = held_.labeled;
    batch->size = n;
    batch->dense.resize(held_.dense.size());
    batch->offsets.resize(held_.offsets.size());
    batch->ids.resize(held_.ids.size());
    batch->class_labels.resize(classes ? n : 0);
    batch->labels.resize(classes ? 0 : n);
    for (size_t k = 0; k < held_.dense.size(); ++k) {
      batch->dense[k].resize(n * DenseWidth(k));
    }
    for (size_t f = 0; f < held_.ids.size(); ++f) {
      batch->offsets[f].assign(1, 0);
      batch->ids[f].clear();
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = indices[i];
      if (absl::Status s = CheckIndex(e, held_.size); !s.ok()) return s;
      for (size_t k = 0; k < held_.dense.size(); ++k) {
        const int64_t w = DenseWidth(k);
        std::copy_n(held_.dense[k].data() + e * w, w,
                    batch->dense[k].data() + i * w);
      }
      for (size_t f = 0; f < held_.ids.size(); ++f) {
        const std::vector<int64_t>& from = held_.offsets[f];
        batch->ids[f].insert(batch->ids[f].end(),
                             held_.ids[f].begin() + from[e],
                             held_.ids[f].begin() + from[e + 1]);
        batch->offsets[f].push_back(static_cast<int64_t>(batch->ids[f].size()));
      }
      if (classes) {
        batch->class_labels[i] = held_.class_labels[e];
      } else {
        batch->labels[i] = held_.labels[e];
      }
    }
    return absl::OkStatus();
  }

 private:
  int64_t DenseWidth(size_t k) const {
    return held_.size == 0
               ? 0
               : static_cast<int64_t>(held_.dense[k].size()) / held_.size;
  }

  const HostBatch held_;
};

// Records [first, first + count) of a streamed set's training or test
// files in file order, unshuffled, parsed by the workers' own reader.
absl::StatusOr<std::unique_ptr<ExampleSet>> LoadStreamed(const DataConfig& data,
                                                         const ModelDef& model,
                                                         bool train,
                                                         int64_t first,
                                                         int64_t count) {
  absl::StatusOr<std::vector<FileSlice>> files =
      CountStreamedFiles(data, train);
  if (!files.ok()) return files.status();
  // StreamExamples reads its test files in order, which is exactly what
  // is wanted here, whichever files they are; its one training shard is
  // never read.
  StreamShard unused;
  for (const FileSlice& f : *files) *unused.add_slices() = f;
  absl::StatusOr<std::unique_ptr<StreamExamples>> stream =
      StreamExamples::Create(data, model, /*seed=*/0, {unused}, *files);
  if (!stream.ok()) return stream.status();
  if (first < 0 || count < 0 || first + count > (*stream)->test_size()) {
    return absl::OutOfRangeError(absl::StrCat(
        "examples [", first, ", ", first + count, ") are not inside the ",
        (*stream)->test_size(), " records of the ", train ? "training" : "test",
        " files"));
  }
  HostBatch held;
  if (count > 0) {
    if (absl::Status s = (*stream)->TakeTest(first, first + count, &held);
        !s.ok()) {
      return s;
    }
  }
  held.size = count;
  return std::make_unique<HeldExamples>(std::move(held));
}

// How a file's examples are counted: read through, or from its header.
enum class Counting { kVerified, kDeclared };

absl::StatusOr<int64_t> FileCount(const DataConfig& data, bool train,
                                  Counting counting,
                                  VerifiedCountCache* cache) {
  if (IsStreamedFormat(data.format())) {
    absl::StatusOr<std::vector<FileSlice>> files =
        CountStreamedFiles(data, train);
    if (!files.ok()) return files.status();
    int64_t n = 0;
    for (const FileSlice& f : *files) n += f.end();
    return n;
  }
  const bool criteo = DataFormatNamed(data.format()) == DataFormat::kCriteo;
  const std::string& path =
      criteo ? (train ? data.train_path() : data.test_path())
             : (train ? data.train_images() : data.test_images());
  if (!criteo && counting == Counting::kDeclared) {
    absl::StatusOr<std::vector<int64_t>> dims = ReadIdxDims(path);
    if (!dims.ok()) return dims.status();
    return dims->front();
  }
  auto count = [&]() -> absl::StatusOr<int64_t> {
    return criteo ? CountCriteoExamples(path) : CountIdxItems(path);
  };
  return cache != nullptr ? cache->Count(path, count) : count();
}

// The job's cap on `n` examples in the files.
absl::StatusOr<int64_t> Capped(const DataConfig& data, bool train, int64_t n) {
  const int64_t cap = train ? data.train_examples() : data.test_examples();
  const std::string what = train ? "train_examples" : "test_examples";
  const std::string path =
      IsStreamedFormat(data.format())
          ? absl::StrCat(
                train ? "train_files" : "test_files", " (",
                absl::StrJoin(train ? data.train_files() : data.test_files(),
                              ", "),
                ")")
      : DataFormatNamed(data.format()) == DataFormat::kCriteo
          ? (train ? data.train_path() : data.test_path())
          : (train ? data.train_images() : data.test_images());
  // Asking for more examples than the data holds is a mistake to report,
  // not a request to quietly train on fewer.
  if (cap > n) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", cap, " but ", path, " holds only ", n,
                     " examples (0 takes them all)"));
  }
  if (cap < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be >= 0 (0: all), got ", cap));
  }
  const int64_t count = cap > 0 ? cap : n;
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no examples: the ",
                     train ? "training" : "test", " set is empty"));
  }
  return count;
}

}  // namespace

absl::StatusOr<int64_t> CountExamples(const DataConfig& data, bool train,
                                      VerifiedCountCache* cache) {
  absl::StatusOr<int64_t> n =
      FileCount(data, train, Counting::kVerified, cache);
  if (!n.ok()) return n.status();
  return Capped(data, train, *n);
}

absl::StatusOr<int64_t> DeclaredExamples(const DataConfig& data, bool train,
                                         VerifiedCountCache* cache) {
  absl::StatusOr<int64_t> n =
      FileCount(data, train, Counting::kDeclared, cache);
  if (!n.ok()) return n.status();
  return Capped(data, train, *n);
}

absl::StatusOr<std::unique_ptr<ExampleSet>> LoadExamples(
    const DataConfig& data, const ModelDef& model, bool train, int64_t first,
    int64_t count, LabelUse labels) {
  const bool optional = labels == LabelUse::kOptional;
  if (absl::Status s = CheckDataFits(model, data.format()); !s.ok()) return s;
  if (IsStreamedFormat(data.format())) {
    return LoadStreamed(data, model, train, first, count);
  }
  if (DataFormatNamed(data.format()) == DataFormat::kCriteo) {
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
  // A label the model cannot take is found here, naming the file, rather
  // than by a training step that knows only its batch row.
  if (loaded->has_labels && model.label().kind() == LabelDef::CLASS_INDEX) {
    if (absl::Status s = CheckClassLabels(
            loaded->labels, model.label().num_classes(), label_file, first);
        !s.ok()) {
      return s;
    }
  }
  return std::make_unique<IdxExamples>(*std::move(loaded));
}

}  // namespace tessera
