#include "data/idx/mnist_dataset.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/idx/idx_test_files.h"
#include "tests/skip_unless_required.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using idx_test::Bytes;
using idx_test::Ubyte;

class MnistDatasetTest : public idx_test::IdxFileTest {};

TEST_F(MnistDatasetTest, LoadsAndScales) {
  const std::string images = WriteGz(
      "img.gz", Ubyte({3, 2, 2}, {0, 255, 51, 102, 1, 2, 3, 4, 5, 6, 7, 8}));
  const std::string labels = WritePlain("lbl", Ubyte({3}, {0, 9, 4}));
  absl::StatusOr<MnistDataset> ds = LoadMnist(images, labels);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size, 3);
  EXPECT_EQ(ds->rows, 2);
  EXPECT_EQ(ds->cols, 2);
  EXPECT_EQ(ds->feature_dim(), 4);
  EXPECT_EQ(ds->num_classes, 10);
  ASSERT_EQ(ds->pixels.size(), 12u);
  EXPECT_FLOAT_EQ(ds->pixels[0], 0.0f);
  EXPECT_FLOAT_EQ(ds->pixels[1], 1.0f);
  EXPECT_FLOAT_EQ(ds->pixels[2], 0.2f);
  EXPECT_FLOAT_EQ(ds->pixels[3], 0.4f);
  EXPECT_FLOAT_EQ(ds->example(2)[3], 8 / 255.0f);
  EXPECT_THAT(ds->labels, ElementsAre(0, 9, 4));
}

// Images to predict: no labels file.
TEST_F(MnistDatasetTest, LoadsImagesWithoutLabels) {
  const std::string images =
      WritePlain("img", Ubyte({3, 1, 2}, {10, 11, 20, 21, 30, 31}));
  absl::StatusOr<MnistDataset> ds = LoadMnist(images, "", 1, 2);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_FALSE(ds->has_labels);
  EXPECT_TRUE(ds->labels.empty());
  EXPECT_EQ(ds->size, 2);
  EXPECT_FLOAT_EQ(ds->example(1)[1], 31 / 255.0f);
}

TEST_F(MnistDatasetTest, LoadsSlice) {
  const std::string images =
      WriteGz("img.gz", Ubyte({3, 1, 2}, {10, 11, 20, 21, 30, 31}));
  const std::string labels = WriteGz("lbl.gz", Ubyte({3}, {7, 8, 9}));
  absl::StatusOr<MnistDataset> ds = LoadMnist(images, labels, 1, 2);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size, 2);
  EXPECT_EQ(ds->feature_dim(), 2);
  EXPECT_FLOAT_EQ(ds->example(0)[0], 20 / 255.0f);
  EXPECT_FLOAT_EQ(ds->example(1)[1], 31 / 255.0f);
  EXPECT_THAT(ds->labels, ElementsAre(8, 9));

  EXPECT_EQ(LoadMnist(images, labels, 2, 2).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(MnistDatasetTest, CountMismatch) {
  const std::string images = WritePlain("img", Ubyte({3, 1, 1}, {1, 2, 3}));
  const std::string labels = WritePlain("lbl", Ubyte({4}, {1, 2, 3, 4}));
  // Rejected even for a slice that both files could serve.
  absl::StatusOr<MnistDataset> ds = LoadMnist(images, labels, 0, 2);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr(absl::StrCat(images, " has 3")));
  EXPECT_THAT(ds.status().message(), HasSubstr(absl::StrCat(labels, " has 4")));
}

TEST_F(MnistDatasetTest, LabelOutOfRange) {
  const std::string images = WritePlain("img", Ubyte({3, 1, 1}, {1, 2, 3}));
  const std::string labels = WriteGz("lbl.gz", Ubyte({3}, {1, 10, 2}));
  for (int64_t first : {0, 1}) {
    absl::StatusOr<MnistDataset> ds = LoadMnist(images, labels, first);
    EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(ds.status().message(), HasSubstr(labels));
    EXPECT_THAT(ds.status().message(), HasSubstr("item 1 is 10"));
  }
  // Only the loaded slice is checked.
  EXPECT_TRUE(LoadMnist(images, labels, 2).ok());
}

TEST_F(MnistDatasetTest, WrongRanks) {
  const std::string flat = WritePlain("flat", Ubyte({2, 4}, Bytes(8)));
  const std::string images = WritePlain("img", Ubyte({2, 2, 2}, Bytes(8)));
  const std::string labels = WritePlain("lbl", Ubyte({2}, {0, 1}));
  const std::string labels2d = WritePlain("lbl2", Ubyte({2, 1}, {0, 1}));

  absl::StatusOr<MnistDataset> ds = LoadMnist(flat, labels);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("3-D"));
  ds = LoadMnist(images, labels2d);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("1-D"));
}

TEST_F(MnistDatasetTest, MissingFile) {
  const std::string labels = WritePlain("lbl", Ubyte({1}, {0}));
  EXPECT_EQ(LoadMnist(absl::StrCat(dir_, "/nope"), labels).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(FashionMnistFilesTest, StandardNames) {
  const MnistFiles files = FashionMnistFiles("/data/fm");
  EXPECT_EQ(files.train_images, "/data/fm/train-images-idx3-ubyte.gz");
  EXPECT_EQ(files.train_labels, "/data/fm/train-labels-idx1-ubyte.gz");
  EXPECT_EQ(files.test_images, "/data/fm/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(files.test_labels, "/data/fm/t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(FashionMnistFiles("/data/fm/").test_labels,
            "/data/fm/t10k-labels-idx1-ubyte.gz");
}

TEST(RealFashionMnistTest, LoadsTestSet) {
  if (!std::filesystem::exists(kDefaultFashionMnistDir)) {
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireData)
        << kDefaultFashionMnistDir
        << " is missing; install Debian's dataset-fashion-mnist";
  }
  const MnistFiles files = FashionMnistFiles(kDefaultFashionMnistDir);
  absl::StatusOr<MnistDataset> full =
      LoadMnist(files.test_images, files.test_labels);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->size, 10000);
  EXPECT_EQ(full->rows, 28);
  EXPECT_EQ(full->cols, 28);
  ASSERT_EQ(full->pixels.size(), 10000u * 28 * 28);
  ASSERT_EQ(full->labels.size(), 10000u);
  std::set<int32_t> classes;
  for (int32_t label : full->labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    classes.insert(label);
  }
  EXPECT_EQ(classes.size(), 10u);
  for (float p : full->pixels) {
    ASSERT_GE(p, 0.0f);
    ASSERT_LE(p, 1.0f);
  }

  absl::StatusOr<MnistDataset> tail =
      LoadMnist(files.test_images, files.test_labels, 9990, 10);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(tail->size, 10);
  EXPECT_EQ(tail->pixels, std::vector<float>(full->pixels.end() - 10 * 28 * 28,
                                             full->pixels.end()));
  EXPECT_EQ(tail->labels,
            std::vector<int32_t>(full->labels.end() - 10, full->labels.end()));
}

}  // namespace
}  // namespace tessera
