#include "tools/convert/example_converter.h"

#include <zlib.h>

#include <cerrno>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/data_format.h"
#include "data/io/gz_file.h"
#include "data/records/tf_record_file_writer.h"
#include "proto/tf_example.pb.h"

namespace tessera {
namespace {

// One output file of either format.
class ShardFile {
 public:
  static absl::StatusOr<std::unique_ptr<ShardFile>> Open(
      const std::string& path, const ConvertOptions& options) {
    auto file = std::unique_ptr<ShardFile>(new ShardFile);
    if (DataFormatNamed(options.output_format) == DataFormat::kTfRecord) {
      absl::StatusOr<std::unique_ptr<TfRecordFileWriter>> writer =
          TfRecordFileWriter::Open(path, options.gzip);
      if (!writer.ok()) return writer.status();
      file->records_ = *std::move(writer);
      return file;
    }
    absl::StatusOr<gzFile> text =
        OpenGzFile(path, options.gzip ? "wb6" : "wbT");
    if (!text.ok()) return text.status();
    file->text_ = *text;
    file->path_ = path;
    return file;
  }
  ~ShardFile() {
    if (text_ != nullptr) gzclose(text_);
  }

  absl::Status Write(const std::string& bytes) {
    if (records_ != nullptr) return records_->Write(bytes);
    if (gzwrite(text_, bytes.data(), static_cast<unsigned>(bytes.size())) !=
        static_cast<int>(bytes.size())) {
      return absl::DataLossError(absl::StrCat(path_, ": write failed"));
    }
    return absl::OkStatus();
  }

  absl::Status Close() {
    if (records_ != nullptr) return records_->Close();
    const int rc = gzclose(text_);
    text_ = nullptr;
    if (rc != Z_OK) {
      return absl::DataLossError(absl::StrCat(path_, ": close failed"));
    }
    return absl::OkStatus();
  }

 private:
  ShardFile() = default;
  std::unique_ptr<TfRecordFileWriter> records_;
  gzFile text_ = nullptr;
  std::string path_;
};

// %.9g gives back the same float.
void AppendFloat(float v, std::string* out) {
  absl::StrAppend(out, absl::StrFormat("%.9g", v));
}

// Writes examples [0, size) into the shards: `header` (CSV) first in each,
// then what `encode(i, &bytes)` gives for each example.
absl::StatusOr<std::vector<std::string>> WriteShards(
    int64_t size, const ConvertOptions& options, const std::string& header,
    const std::function<void(int64_t, std::string*)>& encode) {
  if (!IsStreamedFormat(options.output_format)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output format \"", options.output_format, "\" (tfrecord, csv)"));
  }
  if (options.shards < 1 || options.prefix.empty()) {
    return absl::InvalidArgumentError("need a prefix and shards >= 1");
  }
  std::vector<std::string> paths;
  std::string bytes;
  for (int k = 0; k < options.shards; ++k) {
    const std::string path = absl::StrFormat(
        "%s-%05d-of-%05d.%s%s", options.prefix, k, options.shards,
        options.output_format, options.gzip ? ".gz" : "");
    absl::StatusOr<std::unique_ptr<ShardFile>> file =
        ShardFile::Open(path, options);
    if (!file.ok()) return file.status();
    if (DataFormatNamed(options.output_format) == DataFormat::kCsv) {
      if (absl::Status s = (*file)->Write(header + "\n"); !s.ok()) return s;
    }
    for (int64_t i = size * k / options.shards;
         i < size * (k + 1) / options.shards; ++i) {
      bytes.clear();
      encode(i, &bytes);
      if (absl::Status s = (*file)->Write(bytes); !s.ok()) return s;
    }
    if (absl::Status s = (*file)->Close(); !s.ok()) return s;
    paths.push_back(path);
  }
  return paths;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ConvertMnist(
    const MnistDataset& data, const ConvertOptions& options) {
  const int dim = data.feature_dim();
  std::string header = "label";
  for (int j = 0; j < dim; ++j) absl::StrAppend(&header, ",image_", j);
  const bool csv = DataFormatNamed(options.output_format) == DataFormat::kCsv;
  tf::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  return WriteShards(
      data.size, options, header, [&](int64_t i, std::string* out) {
        const float* pixels = data.example(i);
        if (csv) {
          absl::StrAppend(out, data.labels[i]);
          for (int j = 0; j < dim; ++j) {
            out->push_back(',');
            AppendFloat(pixels[j], out);
          }
          out->push_back('\n');
          return;
        }
        auto* image = features["image"].mutable_float_list()->mutable_value();
        image->Clear();
        image->Add(pixels, pixels + dim);
        auto* label = features["label"].mutable_int64_list()->mutable_value();
        label->Clear();
        label->Add(data.labels[i]);
        example.SerializeToString(out);
      });
}

absl::StatusOr<std::vector<std::string>> ConvertCtr(
    const CtrDataset& data, const ConvertOptions& options) {
  std::string header = "label";
  for (int j = 0; j < data.num_dense; ++j)
    absl::StrAppend(&header, ",dense_", j);
  for (int f = 0; f < data.num_fields; ++f)
    absl::StrAppend(&header, ",C", f + 1);
  const bool csv = DataFormatNamed(options.output_format) == DataFormat::kCsv;
  tf::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  std::vector<std::string> names;
  for (int f = 0; f < data.num_fields; ++f) {
    names.push_back(absl::StrCat("C", f + 1));
  }
  return WriteShards(
      data.size, options, header, [&](int64_t i, std::string* out) {
        const float* dense = data.dense_row(i);
        if (csv) {
          absl::StrAppend(out, static_cast<int>(data.labels[i]));
          for (int j = 0; j < data.num_dense; ++j) {
            out->push_back(',');
            AppendFloat(dense[j], out);
          }
          for (int f = 0; f < data.num_fields; ++f) {
            const CtrFieldColumn& c = data.fields[f];
            out->push_back(',');
            for (uint32_t k = c.offsets[i]; k < c.offsets[i + 1]; ++k) {
              if (k > c.offsets[i]) out->push_back('|');
              absl::StrAppend(out, c.ids[k]);
            }
          }
          out->push_back('\n');
          return;
        }
        if (data.num_dense > 0) {
          auto* d = features["dense"].mutable_float_list()->mutable_value();
          d->Clear();
          d->Add(dense, dense + data.num_dense);
        }
        for (int f = 0; f < data.num_fields; ++f) {
          const CtrFieldColumn& c = data.fields[f];
          auto* ids = features[names[f]].mutable_int64_list()->mutable_value();
          ids->Clear();
          ids->Add(c.ids.begin() + c.offsets[i],
                   c.ids.begin() + c.offsets[i + 1]);
        }
        auto* label = features["label"].mutable_int64_list()->mutable_value();
        label->Clear();
        label->Add(static_cast<int64_t>(data.labels[i]));
        example.SerializeToString(out);
      });
}

}  // namespace tessera
