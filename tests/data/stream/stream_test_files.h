// Streamed-format files for worker tests: tf.train.Example records built
// with proto/tf_example.proto, written as TFRecord (plain or gzip) or CSV
// into a folder of the test's own.

#ifndef TESSERA_TESTS_WORKER_DATA_STREAM_TEST_FILES_H_
#define TESSERA_TESTS_WORKER_DATA_STREAM_TEST_FILES_H_

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/records/example_schema.h"
#include "data/records/tf_record_file_writer.h"
#include "gtest/gtest.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"
#include "proto/tf_example.pb.h"

namespace tessera {
namespace stream_test {

// The test examples' layout: a dense input "x" of 3 values, a sparse
// input "cat" of up to 2 ids, a binary label "y".
inline ExampleSchema TestSchema() {
  ExampleSchema schema;
  schema.dense.push_back({"x", 3, {"x"}});
  schema.sparse.push_back({"cat", "cat", 2});
  schema.label = "y";
  schema.label_kind = ExampleSchema::LabelKind::kBinary;
  schema.dense_values = 3;
  return schema;
}

// Example `id` of the test data set: x = (id, id + 0.5, -id), cat = {id,
// 7}, y = id % 2, so a batch tells which records it holds.
inline tf::Example TestExample(int64_t id) {
  tf::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  auto* x = features["x"].mutable_float_list();
  x->add_value(static_cast<float>(id));
  x->add_value(static_cast<float>(id) + 0.5f);
  x->add_value(-static_cast<float>(id));
  auto* cat = features["cat"].mutable_int64_list();
  cat->add_value(id);
  cat->add_value(7);
  features["y"].mutable_int64_list()->add_value(id % 2);
  return example;
}

// A model that reads the test examples: "x" dense [3], "cat" sparse of up
// to 2 ids, a binary label; and the data section that names the label.
inline ModelDef TestModel() {
  ModelDef model;
  InputDef* x = model.add_inputs();
  x->set_name("x");
  x->mutable_dense()->add_shape(3);
  InputDef* cat = model.add_inputs();
  cat->set_name("cat");
  cat->mutable_sparse()->set_max_hotness(2);
  model.mutable_label()->set_kind(LabelDef::BINARY);
  return model;
}

inline DataConfig TestData() {
  DataConfig data;
  data.set_format("tfrecord");
  data.set_label_feature("y");
  return data;
}

inline std::string TestRecord(int64_t id) {
  return TestExample(id).SerializeAsString();
}

class StreamFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* test =
        ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = absl::StrCat(::testing::TempDir(), "/", test->test_suite_name(), "_",
                        getpid(), "_", test->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_, "/", name);
  }

  // Writes `records` as the TFRecord file `name`; returns its path.
  std::string WriteRecords(const std::string& name,
                           const std::vector<std::string>& records,
                           bool gzip = false) {
    const std::string path = Path(name);
    auto writer = TfRecordFileWriter::Open(path, gzip);
    EXPECT_TRUE(writer.ok()) << writer.status();
    for (const std::string& r : records) {
      EXPECT_TRUE((*writer)->Write(r).ok());
    }
    EXPECT_TRUE((*writer)->Close().ok());
    return path;
  }

  // Test examples [first, first + count) as a TFRecord file.
  std::string WriteExamples(const std::string& name, int64_t first,
                            int64_t count, bool gzip = false) {
    std::vector<std::string> records;
    for (int64_t i = 0; i < count; ++i)
      records.push_back(TestRecord(first + i));
    return WriteRecords(name, records, gzip);
  }

  std::string WriteText(const std::string& name, const std::string& text) {
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::string ReadBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string dir_;
};

}  // namespace stream_test
}  // namespace tessera

#endif  // TESSERA_TESTS_WORKER_DATA_STREAM_TEST_FILES_H_
