// MNIST-format image classification data (MNIST, Fashion-MNIST) loaded from
// an IDX image file and an IDX label file into memory as float features.
//
// Contract:
//  - The image file must be 3-D (items x rows x cols) and the label file 1-D,
//    and both must declare the same number of items (InvalidArgument naming
//    both paths and counts), checked before any slice is read.
//  - Pixels are scaled to [0, 1] as x / 255.
//  - Every label must be below num_classes (10); otherwise DataLoss naming
//    the item index in the file and the offending value.
//  - An empty labels path loads images to predict, with no labels
//    (has_labels false, labels empty).
//  - `first` and `count` select a slice of items exactly as ReadIdx does, so
//    a worker can load only its shard without reading the whole file.

#ifndef TESSERA_DATA_IDX_MNIST_DATASET_H_
#define TESSERA_DATA_IDX_MNIST_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

inline constexpr char kDefaultFashionMnistDir[] =
    "/usr/share/datasets/fashion-mnist";

struct MnistDataset {
  int64_t size = 0;
  int rows = 0;
  int cols = 0;
  std::vector<float> pixels;  // size * rows * cols, row-major per example.
  bool has_labels = true;
  std::vector<int32_t> labels;  // size, or empty without labels
  int num_classes = 10;

  int feature_dim() const { return rows * cols; }
  // Pointer to the feature_dim() pixels of example i; requires 0 <= i < size.
  const float* example(int64_t i) const {
    return pixels.data() + i * feature_dim();
  }
};

// Loads items [first, first + count) of an image/label file pair; count == -1
// loads to the end.
absl::StatusOr<MnistDataset> LoadMnist(const std::string& images_path,
                                       const std::string& labels_path,
                                       int64_t first = 0, int64_t count = -1);

struct MnistFiles {
  std::string train_images, train_labels, test_images, test_labels;
};

// The four standard (gzipped) file names under `dir`, e.g.
// FashionMnistFiles(kDefaultFashionMnistDir).
MnistFiles FashionMnistFiles(const std::string& dir);

}  // namespace tessera

#endif  // TESSERA_DATA_IDX_MNIST_DATASET_H_
