// Fuzzes the tf.train.Example wire parser with a schema of every kind of
// input: a dense input of two features, a sparse input, a class label. A
// parsed example must have the shapes the schema promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "data/records/example_parser.h"

namespace {

tessera::ExampleSchema Schema() {
  tessera::ExampleSchema schema;
  schema.dense.push_back({"x", 4, {"a", "b"}});
  schema.sparse.push_back({"ids", "ids", 3});
  schema.label = "y";
  schema.label_kind = tessera::ExampleSchema::LabelKind::kClassIndex;
  schema.num_classes = 10;
  schema.dense_values = 4;
  return schema;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tessera::ExampleSchema* const schema =
      new tessera::ExampleSchema(Schema());
  static tessera::ExampleParser* const parser =
      new tessera::ExampleParser(*schema);
  tessera::ParsedExample example;
  const absl::Status s = parser->Parse(
      absl::string_view(reinterpret_cast<const char*>(data), size), &example);
  if (!s.ok()) return 0;
  if (example.dense.size() != 4 || example.id_ends.size() != 1 ||
      example.id_ends[0] != example.ids.size() || example.ids.size() > 3 ||
      example.class_label < 0 || example.class_label >= 10) {
    std::abort();
  }
  return 0;
}
