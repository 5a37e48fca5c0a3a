// What every example of a streamed data set must provide: the model's
// inputs mapped to the features or columns that hold them
// (example_layout.h builds this from the model and the job), and one
// parsed example. Parsers of every format fill a ParsedExample; the stream
// reader shuffles those and appends them to batches. No protos here, so
// the parsers build alone (tests/fuzz).

#ifndef TESSERA_DATA_RECORDS_EXAMPLE_SCHEMA_H_
#define TESSERA_DATA_RECORDS_EXAMPLE_SCHEMA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tessera {

struct ExampleSchema {
  // A dense input: `size` floats, the concatenation of `features`.
  struct Dense {
    std::string input;
    int64_t size = 0;
    std::vector<std::string> features;
  };
  // A sparse input: the ids of one feature, at most max_hotness.
  struct Sparse {
    std::string input;
    std::string feature;
    int32_t max_hotness = 1;
    // > 0: every id must lie in [0, id_bound) (an input whose ids are not
    // wrapped, model.proto's ids_in_vocab); 0: any id.
    int64_t id_bound = 0;
  };

  // As proto/model.proto's LabelDef.Kind.
  enum class LabelKind { kClassIndex, kBinary, kReal };

  std::vector<Dense> dense;    // the model's dense inputs, in order
  std::vector<Sparse> sparse;  // the model's sparse inputs, in order
  std::string label;           // the feature or column of the label
  LabelKind label_kind = LabelKind::kClassIndex;
  int32_t num_classes = 0;   // kClassIndex
  int64_t dense_values = 0;  // sum of dense[i].size
};

// One example as parsed from its record.
struct ParsedExample {
  std::vector<float> dense;       // the dense inputs' values, concatenated
  std::vector<int64_t> ids;       // the sparse inputs' ids, concatenated
  std::vector<uint32_t> id_ends;  // per sparse input, its end in ids
  float label = 0.0f;             // BINARY and REAL labels
  int32_t class_label = 0;        // CLASS_INDEX labels
};

// Checks a label value read as a double against the schema's label kind
// and stores it; InvalidArgument says why it is not one.
absl::Status SetLabel(const ExampleSchema& schema, double value,
                      ParsedExample* example);

// Checks the ids `input` read against its id_bound; InvalidArgument names
// the input and the first id outside [0, id_bound).
absl::Status CheckIds(const ExampleSchema::Sparse& input, const int64_t* ids,
                      size_t count);

}  // namespace tessera

#endif  // TESSERA_DATA_RECORDS_EXAMPLE_SCHEMA_H_
