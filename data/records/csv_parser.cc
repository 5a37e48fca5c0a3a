#include "data/records/csv_parser.h"

#include <cmath>
#include <utility>

#include "absl/strings/charconv.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "data/criteo/hex_id.h"
#include "data/records/feature_hash.h"

namespace tessera {
namespace {

constexpr size_t kMaxQuotedBytes = 40;
constexpr char kIdSeparator = '|';

std::string Quote(absl::string_view text) {
  if (text.size() <= kMaxQuotedBytes) {
    return absl::StrCat("\"", absl::CHexEscape(text), "\"");
  }
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMaxQuotedBytes)),
                      "\"... (", text.size(), " bytes)");
}

// A "hex" column's value: Criteo's hexadecimal ids (hex_id.h), as int64.
bool ParseHex(absl::string_view text, int64_t* out) {
  uint64_t value;
  if (!ParseHexId(text, &value)) return false;
  *out = static_cast<int64_t>(value);
  return true;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CsvParser::SplitHeader(
    absl::string_view line, char delimiter) {
  // Split never reads the schema.
  static const ExampleSchema* const kNoSchema = new ExampleSchema;
  CsvParser splitter(*kNoSchema, delimiter, -1);
  if (absl::Status s = splitter.Split(line); !s.ok()) return s;
  return std::vector<std::string>(splitter.fields_.begin(),
                                  splitter.fields_.end());
}

// The file's columns by name, and the options that type them.
struct CsvParser::Columns {
  absl::Span<const std::string> names;
  absl::flat_hash_map<std::string, int> index;
  const CsvOptions* csv;
};

namespace {

// Each column name's position; InvalidArgument when a name repeats.
absl::StatusOr<absl::flat_hash_map<std::string, int>> IndexColumns(
    absl::Span<const std::string> columns) {
  absl::flat_hash_map<std::string, int> index;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (!index.emplace(columns[i], static_cast<int>(i)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("column name ", Quote(columns[i]), " repeats"));
    }
  }
  return index;
}

// Every type the options give (a column's, and sparse_type) is one the
// parser reads.
absl::Status CheckColumnTypes(const CsvOptions& csv) {
  std::vector<std::pair<std::string, std::string>> typed(csv.types.begin(),
                                                         csv.types.end());
  typed.emplace_back("(sparse_type)", csv.sparse_type);
  for (const auto& [name, type] : typed) {
    if (type != "float" && type != "int" && type != "hex" && type != "string") {
      return absl::InvalidArgumentError(
          absl::StrCat("csv type of column ", Quote(name), " is ", Quote(type),
                       " (float, int, hex, string)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CsvParser>> CsvParser::Create(
    const ExampleSchema& schema, const CsvOptions& csv,
    absl::Span<const std::string> columns) {
  absl::StatusOr<absl::flat_hash_map<std::string, int>> index =
      IndexColumns(columns);
  if (!index.ok()) return index.status();
  if (absl::Status s = CheckColumnTypes(csv); !s.ok()) return s;
  const Columns found{columns, *std::move(index), &csv};
  std::unique_ptr<CsvParser> parser(
      new CsvParser(schema, csv.delimiter, static_cast<int>(columns.size())));
  parser->names_.assign(columns.begin(), columns.end());
  if (absl::Status s = parser->UseDenseColumns(found); !s.ok()) return s;
  if (absl::Status s = parser->UseSparseColumns(found); !s.ok()) return s;
  if (absl::Status s = parser->UseLabelColumn(found); !s.ok()) return s;
  return parser;
}

absl::StatusOr<CsvParser::Use> CsvParser::Find(const Columns& columns,
                                               const std::string& name,
                                               absl::string_view default_type) {
  auto it = columns.index.find(name);
  if (it == columns.index.end()) {
    const absl::Span<const std::string> names = columns.names;
    return absl::InvalidArgumentError(absl::StrCat(
        "no column ", Quote(name), " among the ", names.size(), " columns",
        names.empty() ? "" : " (first ", names.empty() ? "" : Quote(names[0]),
        names.empty() ? "" : ")"));
  }
  auto t = columns.csv->types.find(name);
  const absl::string_view type =
      t == columns.csv->types.end() ? default_type : t->second;
  Use use;
  use.column = it->second;
  use.type = type == "float" ? Type::kFloat
             : type == "int" ? Type::kInt
             : type == "hex" ? Type::kHex
                             : Type::kString;
  return use;
}

absl::Status CsvParser::UseDenseColumns(const Columns& columns) {
  for (const ExampleSchema::Dense& d : schema_.dense) {
    std::vector<std::string> names = d.features;
    if (names.size() == 1 && d.size > 1 && !columns.index.contains(names[0])) {
      names.clear();
      for (int64_t i = 0; i < d.size; ++i) {
        names.push_back(absl::StrCat(d.features[0], "_", i));
      }
    }
    if (static_cast<int64_t>(names.size()) != d.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense input \"", d.input, "\" needs ", d.size,
                       " values: in a CSV file one column each, got ",
                       names.size(), " column names"));
    }
    for (const std::string& f : names) {
      absl::StatusOr<Use> u = Find(columns, f, "float");
      if (!u.ok()) return u.status();
      if (u->type == Type::kString) {
        return absl::InvalidArgumentError(
            absl::StrCat("column ", Quote(f), " feeds dense input \"", d.input,
                         "\" and cannot be of type string"));
      }
      dense_.push_back(*u);
    }
  }
  return absl::OkStatus();
}

absl::Status CsvParser::UseSparseColumns(const Columns& columns) {
  for (const ExampleSchema::Sparse& s : schema_.sparse) {
    absl::StatusOr<Use> u = Find(columns, s.feature, columns.csv->sparse_type);
    if (!u.ok()) return u.status();
    if (u->type == Type::kFloat) {
      return absl::InvalidArgumentError(
          absl::StrCat("column ", Quote(s.feature), " feeds sparse input \"",
                       s.input, "\" and cannot be of type float"));
    }
    sparse_.push_back(*u);
  }
  return absl::OkStatus();
}

absl::Status CsvParser::UseLabelColumn(const Columns& columns) {
  absl::StatusOr<Use> u = Find(columns, schema_.label, "float");
  if (!u.ok()) return u.status();
  if (u->type == Type::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat("label column ", Quote(schema_.label), " is numeric"));
  }
  label_ = *u;
  return absl::OkStatus();
}

absl::Status CsvParser::Split(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  fields_.clear();
  size_t pos = 0;
  while (true) {
    if (pos < line.size() && line[pos] == '"') {
      // Quoted: up to the closing quote; "" is a quote.
      size_t i = pos + 1;
      bool escaped = false;
      while (true) {
        const size_t q = line.find('"', i);
        if (q == absl::string_view::npos) {
          return absl::InvalidArgumentError(absl::StrCat(
              "column ", fields_.size() + 1, ": unterminated quote"));
        }
        if (q + 1 < line.size() && line[q + 1] == '"') {
          escaped = true;
          i = q + 2;
          continue;
        }
        absl::string_view inner = line.substr(pos + 1, q - pos - 1);
        if (escaped) {
          const size_t c = fields_.size();
          if (c >= unquoted_.size()) unquoted_.resize(c + 1);
          std::string& s = unquoted_[c];
          s.clear();
          for (size_t k = 0; k < inner.size(); ++k) {
            s.push_back(inner[k]);
            if (inner[k] == '"') ++k;
          }
          inner = s;
        }
        fields_.push_back(inner);
        pos = q + 1;
        break;
      }
      if (pos == line.size()) return absl::OkStatus();
      if (line[pos] != delimiter_) {
        return absl::InvalidArgumentError(absl::StrCat(
            "column ", fields_.size(), ": text after the closing quote"));
      }
      ++pos;
      continue;
    }
    const size_t d = line.find(delimiter_, pos);
    fields_.push_back(line.substr(pos, d - pos));
    if (d == absl::string_view::npos) return absl::OkStatus();
    pos = d + 1;
    if (num_columns_ >= 0 && static_cast<int>(fields_.size()) > num_columns_) {
      return absl::OkStatus();  // too many: Parse says so
    }
  }
}

absl::Status CsvParser::Error(int column, absl::string_view what) const {
  return absl::InvalidArgumentError(
      absl::StrCat("column ", column + 1, " (", Quote(names_[column]),
                   "): ", what, ": ", Quote(fields_[column])));
}

absl::Status CsvParser::Number(const Use& use, double* value) {
  absl::string_view text = fields_[use.column];
  if (text.empty()) return Error(use.column, "empty value");
  if (use.type == Type::kHex) {
    int64_t v;
    if (!ParseHex(text, &v)) return Error(use.column, "not a hex number");
    *value = static_cast<double>(v);
    return absl::OkStatus();
  }
  if (use.type == Type::kInt) {
    int64_t v;
    if (!absl::SimpleAtoi(text, &v)) {
      return Error(use.column, "not a 64-bit integer");
    }
    *value = static_cast<double>(v);
    return absl::OkStatus();
  }
  const char* end = text.data() + text.size();
  const absl::from_chars_result r = absl::from_chars(text.data(), end, *value);
  if (r.ec != std::errc() || r.ptr != end || !std::isfinite(*value)) {
    return Error(use.column, "not a finite number");
  }
  return absl::OkStatus();
}

absl::Status CsvParser::Parse(absl::string_view line, ParsedExample* example) {
  if (absl::Status s = Split(line); !s.ok()) return s;
  if (static_cast<int>(fields_.size()) != num_columns_) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", num_columns_, " columns, got ",
                     static_cast<int>(fields_.size()) > num_columns_
                         ? std::string("more")
                         : absl::StrCat(fields_.size()),
                     ": ", Quote(line)));
  }
  example->dense.resize(dense_.size());
  for (size_t i = 0; i < dense_.size(); ++i) {
    double v;
    if (absl::Status s = Number(dense_[i], &v); !s.ok()) return s;
    example->dense[i] = static_cast<float>(v);
  }
  example->ids.clear();
  example->id_ends.clear();
  for (size_t f = 0; f < sparse_.size(); ++f) {
    const Use& u = sparse_[f];
    absl::string_view text = fields_[u.column];
    const size_t first = example->ids.size();
    while (!text.empty()) {
      const size_t bar = text.find(kIdSeparator);
      absl::string_view one = text.substr(0, bar);
      int64_t id = 0;
      if (u.type == Type::kString) {
        id = HashFeatureBytes(one);
      } else if (u.type == Type::kHex ? !ParseHex(one, &id)
                                      : !absl::SimpleAtoi(one, &id)) {
        return Error(u.column, absl::StrCat("bad id ", Quote(one)));
      }
      example->ids.push_back(id);
      if (bar == absl::string_view::npos) break;
      text.remove_prefix(bar + 1);
      if (text.empty()) return Error(u.column, "empty id after '|'");
    }
    const size_t count = example->ids.size() - first;
    if (count > static_cast<size_t>(schema_.sparse[f].max_hotness)) {
      return Error(u.column,
                   absl::StrCat("wrong shape: ", count, " ids, sparse input \"",
                                schema_.sparse[f].input, "\" takes at most ",
                                schema_.sparse[f].max_hotness));
    }
    if (absl::Status s =
            CheckIds(schema_.sparse[f], example->ids.data() + first, count);
        !s.ok()) {
      return Error(u.column, s.message());
    }
    example->id_ends.push_back(static_cast<uint32_t>(example->ids.size()));
  }
  double label;
  if (absl::Status s = Number(label_, &label); !s.ok()) return s;
  if (absl::Status s = SetLabel(schema_, label, example); !s.ok()) {
    return Error(label_.column, s.message());
  }
  return absl::OkStatus();
}

}  // namespace tessera
