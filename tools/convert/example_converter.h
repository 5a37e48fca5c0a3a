// Writes the data sets Tessera reads in memory (IDX images, Criteo TSV) as
// streamed-format files: sharded TFRecord files of tf.train.Example (plain
// or gzip) or CSV files, so the same examples can be trained either way.
//
// Features written, named as the preset models' inputs:
//  - IDX: "image", a float_list of the pixels scaled to [0, 1] exactly as
//    LoadMnist scales them; "label", an int64_list of the class.
//  - Criteo: "dense", a float_list of the integer columns as
//    CriteoDenseValue makes them (log(1 + x)); "C1".., int64_lists of the
//    ids as LoadCriteo reads them; "label", 0 or 1.
// CSV files hold the same values: a header "label,image_0,..." or
// "label,dense_0,...,C1,..."; ids are decimal, several joined by '|'
// (csv.sparse_type "int").
//
// Shard k of n holds examples [k * N / n, (k + 1) * N / n), so the shards
// in order are the source's examples in order.

#ifndef TESSERA_TOOLS_CONVERT_EXAMPLE_CONVERTER_H_
#define TESSERA_TOOLS_CONVERT_EXAMPLE_CONVERTER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/criteo/ctr_dataset.h"
#include "data/idx/mnist_dataset.h"

namespace tessera {

struct ConvertOptions {
  std::string output_format = "tfrecord";  // or "csv"
  // Files are <prefix>-<k>-of-<n>.tfrecord (or .csv), ".gz" added when
  // gzip.
  std::string prefix;
  int shards = 1;
  bool gzip = false;
};

// The files written, in shard order.
absl::StatusOr<std::vector<std::string>> ConvertMnist(
    const MnistDataset& data, const ConvertOptions& options);
absl::StatusOr<std::vector<std::string>> ConvertCtr(
    const CtrDataset& data, const ConvertOptions& options);

}  // namespace tessera

#endif  // TESSERA_TOOLS_CONVERT_EXAMPLE_CONVERTER_H_
