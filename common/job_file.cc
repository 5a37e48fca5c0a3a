#include "common/job_file.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/data_format.h"
#include "common/io/bounded_file_read.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace tessera {
namespace {

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) {
      first_ = absl::StrCat("line ", line + 1, " column ", column + 1, ": ",
                            message);
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// `dir`/`name`, plain or with ".gz": the one that exists, `preferred`
// when both or neither do (neither: the reader's NotFound names it). The
// readers detect compression from the bytes, so the name only has to
// exist: Debian ships Fashion-MNIST gzipped, a user may have gunzipped it.
std::string ExistingFile(const std::string& dir, const std::string& name,
                         bool prefer_gz) {
  const std::string plain = absl::StrCat(dir, "/", name);
  const std::string gz = plain + ".gz";
  const bool has_plain = static_cast<bool>(std::ifstream(plain));
  const bool has_gz = static_cast<bool>(std::ifstream(gz));
  if (has_plain != has_gz) return has_gz ? gz : plain;
  return prefer_gz ? gz : plain;
}

}  // namespace

absl::StatusOr<JobConfig> ReadJobFile(const std::string& path) {
  // A job file is a few KB of text; the cap refuses a wrong path such as
  // /dev/zero before it is read into memory.
  constexpr size_t kMaxJobFileBytes = 1 << 20;
  absl::StatusOr<std::string> text =
      ReadBoundedFile(path, kMaxJobFileBytes, absl::StrCat("job file ", path));
  if (!text.ok()) return text.status();
  JobConfig job;
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(*text, &job)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job file ", path, ": ", errors.first()));
  }
  return job;
}

void SetDataDir(const std::string& dir, DataConfig* data) {
  if (IsStreamedFormat(data->format())) {
    // The same file patterns, looked up in `dir`.
    for (auto* files :
         {data->mutable_train_files(), data->mutable_test_files()}) {
      for (std::string& pattern : *files) {
        const size_t slash = pattern.rfind('/');
        pattern = absl::StrCat(
            dir, "/",
            slash == std::string::npos ? pattern : pattern.substr(slash + 1));
      }
    }
    return;
  }
  if (DataFormatNamed(data->format()) == DataFormat::kCriteo) {
    data->clear_train_images();
    data->clear_train_labels();
    data->clear_test_images();
    data->clear_test_labels();
    data->set_train_path(ExistingFile(dir, "train.tsv", false));
    data->set_test_path(ExistingFile(dir, "test.tsv", false));
    return;
  }
  data->clear_train_path();
  data->clear_test_path();
  data->set_train_images(ExistingFile(dir, "train-images-idx3-ubyte", true));
  data->set_train_labels(ExistingFile(dir, "train-labels-idx1-ubyte", true));
  data->set_test_images(ExistingFile(dir, "t10k-images-idx3-ubyte", true));
  data->set_test_labels(ExistingFile(dir, "t10k-labels-idx1-ubyte", true));
}

}  // namespace tessera
