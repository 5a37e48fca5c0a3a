// Decodes a serialized tf.train.Example (proto/tf_example.proto's wire
// format) straight into a ParsedExample, without building the message:
// only the features the schema names are decoded, and nothing is
// allocated per record once the buffers have grown.
//
// Contract:
//  - Parse returns InvalidArgument with a message that names the problem
//    and the feature (callers prefix the file and record): bytes that are
//    not an Example, a missing feature, a feature of the wrong type (float
//    values for a sparse input; bytes for a dense input or the label), a
//    dense input whose features do not hold exactly its size in values, a
//    sparse feature with more than max_hotness ids, a label that is not one
//    value of the label's kind.
//  - int64 values of a dense input become floats; bytes values of a sparse
//    input become ids by HashFeatureBytes; an empty list of a sparse input
//    is an empty bag.
//  - As protobuf does, the last entry of a repeated feature name wins, and
//    unknown fields are skipped.
//  - Thread safety: one thread at a time per parser.

#ifndef TESSERA_DATA_RECORDS_EXAMPLE_PARSER_H_
#define TESSERA_DATA_RECORDS_EXAMPLE_PARSER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "data/records/example_schema.h"

namespace tessera {

class ExampleParser {
 public:
  explicit ExampleParser(const ExampleSchema& schema);

  absl::Status Parse(absl::string_view record, ParsedExample* example);

 private:
  // A feature found in the record: its kind's field number (1 bytes, 2
  // float, 3 int64; 0 none) and the list message's bytes.
  struct Found {
    int kind = 0;
    absl::string_view list;
  };

  absl::Status ReadFeatures(absl::string_view features);
  absl::Status ReadEntry(absl::string_view entry);
  absl::Status Dense(const ExampleSchema::Dense& input, ParsedExample* example);
  absl::Status Sparse(const ExampleSchema::Sparse& input,
                      ParsedExample* example);
  absl::Status Label(ParsedExample* example);
  const Found& Get(int slot) const;

  const ExampleSchema& schema_;
  // Feature name -> slot; the schema's features, each once.
  absl::flat_hash_map<std::string, int> slots_;
  std::vector<std::string> names_;
  std::vector<Found> found_;
  // Which slots the current record set (by record serial number), so that
  // found_ is not cleared per record.
  std::vector<uint64_t> seen_;
  uint64_t serial_ = 0;
  std::vector<int> dense_slots_;  // per dense input, per feature
  std::vector<int> dense_first_;  // per dense input, its first in dense_slots_
  std::vector<int> sparse_slots_;
  int label_slot_ = 0;
  // Per map entry position, the key last seen there and its slot (-1: not
  // the schema's): a writer serializes every record's keys in the same
  // order, so a short compare replaces most hash lookups.
  std::vector<std::string> entry_keys_;
  std::vector<int> entry_slots_;
  size_t entry_ = 0;  // position of the next entry in the current record
};

}  // namespace tessera

#endif  // TESSERA_DATA_RECORDS_EXAMPLE_PARSER_H_
