// Prints the examples of TFRecord files, read in order by the stream
// reader, one line each, for tf_examples_check.py: a dense input of the
// float feature "x" (3 values) and the int64 feature "n" (2), sparse inputs
// "tag" (bytes, hashed) and "id" (int64), a binary label "y".
//
// Usage: dump_stream_examples <file>...

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "data/records/record_reader.h"
#include "data/stream/file_assignment.h"
#include "data/stream/stream_reader.h"

int main(int argc, char** argv) {
  tessera::ExampleSchema schema;
  schema.dense.push_back({"features", 5, {"x", "n"}});
  schema.sparse.push_back({"tag", "tag", 3});
  schema.sparse.push_back({"id", "id", 3});
  schema.label = "y";
  schema.label_kind = tessera::ExampleSchema::LabelKind::kBinary;
  schema.dense_values = 5;
  std::vector<std::string> files(argv + 1, argv + argc);
  std::vector<int64_t> counts;
  for (const std::string& f : files) {
    absl::StatusOr<int64_t> n =
        tessera::CountRecords("tfrecord", f, tessera::CsvOptions());
    if (!n.ok()) {
      std::fprintf(stderr, "%s\n", n.status().ToString().c_str());
      return 1;
    }
    counts.push_back(*n);
  }
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  auto shard = tessera::RecordRange(files, counts, 0, total);
  tessera::StreamOptions options;
  options.format = "tfrecord";
  options.shuffle = false;
  auto reader = tessera::StreamReader::Open(schema, *shard, options, 0);
  if (!reader.ok()) {
    std::fprintf(stderr, "%s\n", reader.status().ToString().c_str());
    return 1;
  }
  tessera::HostBatch batch;
  absl::StatusOr<int64_t> n = (*reader)->Next(total, &batch);
  if (!n.ok()) {
    std::fprintf(stderr, "%s\n", n.status().ToString().c_str());
    return 1;
  }
  for (int64_t i = 0; i < batch.size; ++i) {
    std::string line =
        absl::StrFormat("y=%d dense=", static_cast<int>(batch.labels[i]));
    for (int j = 0; j < 5; ++j) {
      absl::StrAppendFormat(&line, "%s%.9g", j ? "," : "",
                            batch.dense[0][i * 5 + j]);
    }
    const char* names[] = {" tag=", " id="};
    for (int f = 0; f < 2; ++f) {
      line += names[f];
      for (int64_t k = batch.offsets[f][i]; k < batch.offsets[f][i + 1]; ++k) {
        absl::StrAppendFormat(&line, "%s%d", k > batch.offsets[f][i] ? "," : "",
                              batch.ids[f][k]);
      }
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}
