// The converter's files hold exactly the examples the in-memory readers
// make of the source: generated click data (Criteo TSV, multi-hot fields,
// missing values) and Fashion-MNIST, streamed back as TFRecord (plain and
// gzip) and CSV.
#include "tools/convert/example_converter.h"

#include <filesystem>
#include <string>
#include <vector>

#include "data/criteo/criteo_reader.h"
#include "data/idx/mnist_dataset.h"
#include "data/records/record_reader.h"
#include "data/stream/example_layout.h"
#include "data/stream/file_assignment.h"
#include "data/stream/stream_reader.h"
#include "gtest/gtest.h"
#include "tests/data/stream/stream_test_files.h"
#include "tests/skip_unless_required.h"
#include "tools/ctr_gen/ctr_generator.h"

namespace tessera {
namespace {

using stream_test::StreamFileTest;

class ExampleConverterTest : public StreamFileTest {
 protected:
  // All examples of `files`, in order, as `model`'s inputs.
  HostBatch ReadBack(const ModelDef& model, const DataConfig& data,
                     const std::vector<std::string>& files) {
    absl::StatusOr<ExampleSchema> schema = ExampleSchemaOf(model, data);
    EXPECT_TRUE(schema.ok()) << schema.status();
    schema_ = *schema;
    absl::StatusOr<StreamOptions> options = StreamOptionsOf(data, 1, 0);
    EXPECT_TRUE(options.ok()) << options.status();
    options->shuffle = false;
    std::vector<int64_t> counts;
    int64_t total = 0;
    for (const std::string& f : files) {
      absl::StatusOr<int64_t> n = CountRecords(data.format(), f, options->csv);
      EXPECT_TRUE(n.ok()) << n.status();
      counts.push_back(*n);
      total += *n;
    }
    HostBatch batch;
    auto reader = StreamReader::Open(
        schema_, *RecordRange(files, counts, 0, total), *options, 0);
    EXPECT_TRUE(reader.ok()) << reader.status();
    absl::StatusOr<int64_t> n = (*reader)->Next(total, &batch);
    EXPECT_TRUE(n.ok()) << n.status();
    return batch;
  }

  ExampleSchema schema_;
};

TEST_F(ExampleConverterTest, ClickDataRoundTripsAsTfRecordAndCsv) {
  CtrGeneratorOptions gen;
  gen.train_examples = 300;
  gen.test_examples = 10;
  gen.num_fields = 4;
  gen.num_dense = 3;
  gen.multi_hot_fields = 1;
  gen.missing = 0.2;
  gen.threads = 1;
  absl::StatusOr<CtrGeneratorSummary> summary = GenerateCtrFiles(gen, dir_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  absl::StatusOr<CtrDataset> source =
      LoadCriteo(summary->train_path, 0, -1, CriteoFormat{3, 4});
  ASSERT_TRUE(source.ok()) << source.status();

  ModelDef model;
  for (int f = 0; f < 4; ++f) {
    InputDef* in = model.add_inputs();
    in->set_name(absl::StrCat("C", f + 1));
    in->mutable_sparse()->set_max_hotness(f == 0 ? 4 : 1);
  }
  InputDef* dense = model.add_inputs();
  dense->set_name("dense");
  dense->mutable_dense()->add_shape(3);
  model.mutable_label()->set_kind(LabelDef::BINARY);

  for (const char* format : {"tfrecord", "csv"}) {
    for (bool gzip : {false, true}) {
      ConvertOptions options;
      options.output_format = format;
      options.prefix = absl::StrCat(dir_, "/out-", format, gzip);
      options.shards = 3;
      options.gzip = gzip;
      absl::StatusOr<std::vector<std::string>> files =
          ConvertCtr(*source, options);
      ASSERT_TRUE(files.ok()) << files.status();
      DataConfig data;
      data.set_format(format);
      data.set_label_feature("label");
      data.mutable_csv()->set_sparse_type("int");
      const HostBatch batch = ReadBack(model, data, *files);
      ASSERT_EQ(batch.size, source->size) << format;
      EXPECT_EQ(batch.labels, source->labels) << format;
      EXPECT_EQ(batch.dense[0], source->dense) << format;
      for (int f = 0; f < 4; ++f) {
        const CtrFieldColumn& c = source->fields[f];
        EXPECT_EQ(batch.ids[f], c.ids) << format << " C" << f + 1;
        EXPECT_EQ(batch.offsets[f],
                  std::vector<int64_t>(c.offsets.begin(), c.offsets.end()))
            << format;
      }
    }
  }
}

TEST_F(ExampleConverterTest, FashionMnistRoundTrips) {
  const MnistFiles real = FashionMnistFiles(kDefaultFashionMnistDir);
  if (!std::filesystem::exists(real.test_images)) {
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireData)
        << real.test_images
        << " is missing; install Debian's dataset-fashion-mnist";
  }
  absl::StatusOr<MnistDataset> source =
      LoadMnist(real.test_images, real.test_labels, 0, 2000);
  ASSERT_TRUE(source.ok()) << source.status();
  ModelDef model;
  InputDef* image = model.add_inputs();
  image->set_name("image");
  image->mutable_dense()->add_shape(28);
  image->mutable_dense()->add_shape(28);
  image->mutable_dense()->add_shape(1);
  model.mutable_label()->set_kind(LabelDef::CLASS_INDEX);
  model.mutable_label()->set_num_classes(10);
  for (const char* format : {"tfrecord", "csv"}) {
    ConvertOptions options;
    options.output_format = format;
    options.prefix = absl::StrCat(dir_, "/fm-", format);
    options.shards = 4;
    options.gzip = true;
    absl::StatusOr<std::vector<std::string>> files =
        ConvertMnist(*source, options);
    ASSERT_TRUE(files.ok()) << files.status();
    DataConfig data;
    data.set_format(format);
    data.set_label_feature("label");
    const HostBatch batch = ReadBack(model, data, *files);
    ASSERT_EQ(batch.size, 2000);
    EXPECT_EQ(batch.dense[0], source->pixels) << format;
    EXPECT_EQ(batch.class_labels, source->labels) << format;
  }
}

}  // namespace
}  // namespace tessera
