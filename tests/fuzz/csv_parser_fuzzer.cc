// Fuzzes the CSV parser: the first line of the input is the header (as a
// file's would be), every later line a row. The first byte picks the
// delimiter and the sparse column's type. A parsed row must have the
// shapes the schema promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/records/csv_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  tessera::ExampleSchema schema;
  schema.dense.push_back({"x", 2, {"x"}});
  schema.sparse.push_back({"c", "c", 2});
  schema.label = "y";
  schema.label_kind = tessera::ExampleSchema::LabelKind::kBinary;
  schema.dense_values = 2;
  tessera::CsvOptions options;
  options.delimiter = (data[0] & 1) ? '\t' : ',';
  static const char* const kTypes[] = {"string", "int", "hex", "string"};
  options.sparse_type = kTypes[(data[0] >> 1) & 3];
  absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t newline = text.find('\n');
  absl::StatusOr<std::vector<std::string>> header =
      tessera::CsvParser::SplitHeader(text.substr(0, newline),
                                      options.delimiter);
  if (!header.ok() || newline == absl::string_view::npos) return 0;
  auto parser = tessera::CsvParser::Create(schema, options, *header);
  if (!parser.ok()) return 0;
  text.remove_prefix(newline + 1);
  tessera::ParsedExample example;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const absl::Status s = (*parser)->Parse(text.substr(0, end), &example);
    if (s.ok() && (example.dense.size() != 2 || example.id_ends.size() != 1 ||
                   example.ids.size() > 2 ||
                   (example.label != 0.0f && example.label != 1.0f))) {
      std::abort();
    }
    if (end == absl::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return 0;
}
