// Parses the data lines of a CSV or TSV file into ParsedExamples.
//
// A line is split at the delimiter (one byte). A field may be wrapped in
// double quotes, with "" standing for a quote inside it; a quoted field may
// hold the delimiter but not a line break. '\r' before the line's end is
// ignored. Column types (CsvFormat.types): "float" and "int" are numbers,
// "hex" up to 16 hexadecimal digits (Criteo's ids), "string" any bytes
// hashed by HashFeatureBytes. A sparse column may hold several ids
// separated by '|'; an empty one is an empty bag. A dense input "x" of d > 1
// values whose only feature is "x", when no column is named "x", reads
// columns x_0 .. x_<d-1>.
//
// Contract:
//  - Create: InvalidArgument when a column the schema needs is not among
//    the column names, a name repeats, or a type is unknown or does not
//    fit the input (a string column for a dense input).
//  - Parse: InvalidArgument naming the column and the bad text (callers
//    prefix file and line): fewer columns than the header, an empty or
//    non-numeric value in a numeric column, a label that is not one of the
//    label's kind, more ids than max_hotness. Extra columns are an error
//    too (a shifted row would otherwise train on wrong columns).
//  - Thread safety: one thread at a time per parser.

#ifndef TESSERA_DATA_RECORDS_CSV_PARSER_H_
#define TESSERA_DATA_RECORDS_CSV_PARSER_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "data/records/example_schema.h"

namespace tessera {

// proto/job.proto's CsvFormat, checked (example_layout.h CsvOptionsOf).
struct CsvOptions {
  bool header = true;                // the first line names the columns
  std::vector<std::string> columns;  // the names when !header
  char delimiter = ',';
  absl::flat_hash_map<std::string, std::string> types;
  std::string sparse_type = "string";  // sparse columns not in `types`
};

class CsvParser {
 public:
  // `columns`: the file's column names (its header, or options.columns).
  // `schema` must outlive the parser.
  static absl::StatusOr<std::unique_ptr<CsvParser>> Create(
      const ExampleSchema& schema, const CsvOptions& options,
      absl::Span<const std::string> columns);

  // Splits a header line into column names.
  static absl::StatusOr<std::vector<std::string>> SplitHeader(
      absl::string_view line, char delimiter);

  absl::Status Parse(absl::string_view line, ParsedExample* example);

 private:
  enum class Type { kFloat, kInt, kHex, kString };
  struct Use {
    int column;
    Type type;
  };
  CsvParser(const ExampleSchema& schema, char delimiter, int num_columns)
      : schema_(schema), delimiter_(delimiter), num_columns_(num_columns) {}
  struct Columns;
  // The column `name` and its type (the options', else `default_type`);
  // InvalidArgument naming the column when the file has none.
  static absl::StatusOr<Use> Find(const Columns& columns,
                                  const std::string& name,
                                  absl::string_view default_type);
  // The columns of the schema's dense inputs, sparse inputs and label, in
  // order; InvalidArgument for a missing column or a type that does not
  // fit its input.
  absl::Status UseDenseColumns(const Columns& columns);
  absl::Status UseSparseColumns(const Columns& columns);
  absl::Status UseLabelColumn(const Columns& columns);
  absl::Status Split(absl::string_view line);
  absl::Status Number(const Use& use, double* value);
  absl::Status Error(int column, absl::string_view what) const;

  const ExampleSchema& schema_;
  const char delimiter_;
  const int num_columns_;
  std::vector<std::string> names_;
  std::vector<Use> dense_;  // per dense value, in order
  std::vector<Use> sparse_;
  Use label_{0, Type::kFloat};
  std::vector<absl::string_view> fields_;
  // Per column, its text when it had "" (a deque: growing it keeps the
  // earlier strings, which fields_ points into, in place).
  std::deque<std::string> unquoted_;
};

}  // namespace tessera

#endif  // TESSERA_DATA_RECORDS_CSV_PARSER_H_
