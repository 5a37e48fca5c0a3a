#include "data/idx/mnist_dataset.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/idx/idx_reader.h"

namespace tessera {
namespace {

constexpr int kNumClasses = 10;

// Reads only headers, so a mismatched pair is rejected before any slice is
// read and regardless of which slice was asked for.
absl::Status CheckShapes(const std::string& images_path,
                         const std::string& labels_path) {
  absl::StatusOr<std::vector<int64_t>> image_dims = ReadIdxDims(images_path);
  if (!image_dims.ok()) return image_dims.status();
  if (image_dims->size() != 3) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: images must be 3-D (items x rows x cols), got dims [%s]",
        images_path, absl::StrJoin(*image_dims, ", ")));
  }
  const int64_t max_pixels = std::numeric_limits<int>::max();
  if ((*image_dims)[1] * (*image_dims)[2] > max_pixels) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: images of %d x %d pixels are too large",
                        images_path, (*image_dims)[1], (*image_dims)[2]));
  }
  if (labels_path.empty()) return absl::OkStatus();  // images to predict
  absl::StatusOr<std::vector<int64_t>> label_dims = ReadIdxDims(labels_path);
  if (!label_dims.ok()) return label_dims.status();
  if (label_dims->size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: labels must be 1-D, got dims [%s]", labels_path,
                        absl::StrJoin(*label_dims, ", ")));
  }
  if ((*image_dims)[0] != (*label_dims)[0]) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "item count mismatch: %s has %d images but %s has %d labels",
        images_path, (*image_dims)[0], labels_path, (*label_dims)[0]));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MnistDataset> LoadMnist(const std::string& images_path,
                                       const std::string& labels_path,
                                       int64_t first, int64_t count) {
  absl::Status shapes = CheckShapes(images_path, labels_path);
  if (!shapes.ok()) return shapes;
  IdxArray labels;
  if (!labels_path.empty()) {
    absl::StatusOr<IdxArray> read = ReadIdx(labels_path, first, count);
    if (!read.ok()) return read.status();
    labels = *std::move(read);
  }
  // Labels are validated before the (much larger) images are read.
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kNumClasses) {
      return absl::DataLossError(absl::StrFormat(
          "%s: label of item %d is %d, expected 0 to %d", labels_path,
          first + static_cast<int64_t>(i), labels.data[i], kNumClasses - 1));
    }
  }
  absl::StatusOr<IdxArray> images = ReadIdx(images_path, first, count);
  if (!images.ok()) return images.status();

  MnistDataset ds;
  ds.size = images->dims[0];
  ds.rows = static_cast<int>(images->dims[1]);
  ds.cols = static_cast<int>(images->dims[2]);
  ds.num_classes = kNumClasses;
  ds.has_labels = !labels_path.empty();
  ds.labels.assign(labels.data.begin(), labels.data.end());
  ds.pixels.resize(images->data.size());
  for (size_t i = 0; i < images->data.size(); ++i) {
    ds.pixels[i] = images->data[i] / 255.0f;
  }
  return ds;
}

MnistFiles FashionMnistFiles(const std::string& dir) {
  // An empty dir means the current directory; a trailing slash is optional.
  const std::string prefix =
      (dir.empty() || dir.back() == '/') ? dir : absl::StrCat(dir, "/");
  MnistFiles files;
  files.train_images = absl::StrCat(prefix, "train-images-idx3-ubyte.gz");
  files.train_labels = absl::StrCat(prefix, "train-labels-idx1-ubyte.gz");
  files.test_images = absl::StrCat(prefix, "t10k-images-idx3-ubyte.gz");
  files.test_labels = absl::StrCat(prefix, "t10k-labels-idx1-ubyte.gz");
  return files;
}

}  // namespace tessera
