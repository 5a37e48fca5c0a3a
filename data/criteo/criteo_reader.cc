#include "data/criteo/criteo_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "data/criteo/hex_id.h"
#include "data/io/gz_line_reader.h"

namespace tessera {
namespace {

// Quoted bad text is cut to this many bytes, so one bad line of a binary
// file does not flood the log.
constexpr size_t kMaxQuotedBytes = 40;
// Caps on up-front reservations: a count far beyond the file, or a format
// with many columns, should surface as OutOfRange or a parse error, not as
// an allocation failure. Beyond them the vectors grow as lines arrive.
constexpr int64_t kMaxReserveExamples = int64_t{1} << 22;
constexpr int64_t kMaxReserveBytes = int64_t{256} << 20;
// Columns of each kind a format may declare; the real files have 13 and 26.
constexpr int kMaxColumns = 1 << 20;

std::string Quote(absl::string_view text) {
  if (text.size() <= kMaxQuotedBytes) {
    return absl::StrCat("\"", absl::CHexEscape(text), "\"");
  }
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMaxQuotedBytes)),
                      "\"... (", text.size(), " bytes)");
}

// Parses one line into the data set; knows the column layout.
class LineParser {
 public:
  LineParser(const std::string& path, const CriteoFormat& format)
      : path_(path),
        format_(format),
        labeled_(format.label_optional ? kUndecided : kLabeled) {}

  // Appends the example on `line` (line number `line_number`) to *data.
  absl::Status Parse(absl::string_view line, int64_t line_number,
                     CtrDataset* data) {
    line_number_ = line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::Status s = SplitColumns(line, data); !s.ok()) return s;
    shift_ = labeled_ == kUnlabeled ? 1 : 0;
    if (absl::Status s = ParseLabel(data); !s.ok()) return s;
    if (absl::Status s = ParseDense(data); !s.ok()) return s;
    for (int f = 0; f < format_.num_fields; ++f) {
      if (absl::Status s = ParseField(f, data); !s.ok()) return s;
    }
    ++data->size;
    return absl::OkStatus();
  }

 private:
  // Splits `line` into columns_, deciding from the first line of a file
  // whose label is optional whether it has one.
  absl::Status SplitColumns(absl::string_view line, CtrDataset* data) {
    const int64_t full =
        int64_t{1} + format_.num_dense + int64_t{format_.num_fields};
    // Until a line decides it, a file whose label is optional may have
    // either count.
    const int64_t most = full - (labeled_ == kUnlabeled ? 1 : 0);
    columns_.clear();
    size_t start = 0;
    while (true) {
      const size_t tab = line.find('\t', start);
      columns_.push_back(line.substr(start, tab - start));
      if (tab == absl::string_view::npos) break;
      start = tab + 1;
      if (static_cast<int64_t>(columns_.size()) > most) break;
    }
    const int64_t got = static_cast<int64_t>(columns_.size());
    if (labeled_ == kUndecided && got == full - 1) {
      // Examples to predict: the label column is left out.
      labeled_ = kUnlabeled;
      data->has_labels = false;
    } else if (labeled_ == kUndecided && got == full) {
      labeled_ = kLabeled;
    }
    const int64_t want = full - (labeled_ == kUnlabeled ? 1 : 0);
    if (got != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ":", line_number_, ": expected ", want,
          " tab-separated columns (",
          labeled_ == kUndecided ? absl::StrCat("label, ", format_.num_dense)
          : labeled_ == kUnlabeled
              ? absl::StrCat("no label, as the file's first line, ",
                             format_.num_dense)
              : absl::StrCat("label, ", format_.num_dense),
          " integer, ", format_.num_fields, " categorical",
          labeled_ == kUndecided
              ? absl::StrCat("; or ", full - 1, " without the label")
              : "",
          "), got ", got > want ? absl::StrCat("more") : absl::StrCat(got),
          ": ", Quote(line)));
    }
    return absl::OkStatus();
  }

  absl::Status ParseLabel(CtrDataset* data) {
    if (labeled_ == kUnlabeled) {
      // No label to read.
    } else if (columns_[0] == "0") {
      data->labels.push_back(0.0f);
    } else if (columns_[0] == "1") {
      data->labels.push_back(1.0f);
    } else {
      return Error(0, "label must be 0 or 1");
    }
    return absl::OkStatus();
  }

  absl::Status ParseDense(CtrDataset* data) {
    for (int j = 0; j < format_.num_dense; ++j) {
      absl::string_view text = columns_[1 + j - shift_];
      int64_t x = 0;
      if (!text.empty() && !ParseInt(text, &x)) {
        return Error(1 + j, "not a 64-bit integer");
      }
      data->dense.push_back(CriteoDenseValue(x));
    }
    return absl::OkStatus();
  }

  // Appends categorical field f's ids (a bag: ',' between them).
  absl::Status ParseField(int f, CtrDataset* data) {
    const int column = 1 + format_.num_dense + f;
    absl::string_view text = columns_[column - shift_];
    CtrFieldColumn& field = data->fields[f];
    while (!text.empty()) {
      const size_t comma = text.find(',');
      absl::string_view hex = text.substr(0, comma);
      uint64_t id = 0;
      if (!ParseHexId(hex, &id)) {
        return Error(column,
                     absl::StrCat("bad hexadecimal id ", Quote(hex),
                                  " (1 to 16 hex digits, ',' between ids)"));
      }
      field.ids.push_back(static_cast<int64_t>(id));
      if (comma == absl::string_view::npos) break;
      text.remove_prefix(comma + 1);
      if (text.empty()) {
        return Error(column, "bad hexadecimal id \"\" after the last ','");
      }
    }
    // The offsets are 32-bit.
    if (field.ids.size() > std::numeric_limits<uint32_t>::max()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          path_, ":", line_number_, ": column ", ColumnName(column),
          " holds more than 2^32 ids in the data set"));
    }
    field.offsets.push_back(static_cast<uint32_t>(field.ids.size()));
    return absl::OkStatus();
  }

  // `column` counts the label as column 0 whether or not the file has
  // one; the name gives the column's place in the line.
  std::string ColumnName(int column) const {
    if (column == 0) return "1 (label)";
    const int place = column + 1 - shift_;
    if (column <= format_.num_dense) {
      return absl::StrCat(place, " (I", column, ")");
    }
    return absl::StrCat(place, " (C", column - format_.num_dense, ")");
  }

  absl::Status Error(int column, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ":", line_number_, ": column ", ColumnName(column),
                     ": ", what, ": ", Quote(columns_[column - shift_])));
  }

  // A decimal integer with an optional '-'; false if not one or out of
  // range.
  static bool ParseInt(absl::string_view text, int64_t* out) {
    const bool negative = text[0] == '-';
    if (negative) text.remove_prefix(1);
    if (text.empty() || text.size() > 19) return false;
    uint64_t value = 0;
    for (char c : text) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + (c - '0');
    }
    // 19 digits never overflow uint64; check the int64 range.
    const uint64_t limit =
        uint64_t{std::numeric_limits<int64_t>::max()} + (negative ? 1 : 0);
    if (value > limit) return false;
    *out = negative ? static_cast<int64_t>(0 - value)
                    : static_cast<int64_t>(value);
    return true;
  }

  enum Labeled { kUndecided, kLabeled, kUnlabeled };

  const std::string& path_;
  const CriteoFormat format_;
  Labeled labeled_;
  int shift_ = 0;  // 1 when the lines have no label column
  int64_t line_number_ = 0;
  std::vector<absl::string_view> columns_;
};

absl::Status CheckFormat(const std::string& path, const CriteoFormat& format) {
  if (format.num_dense < 0 || format.num_fields < 0 ||
      format.num_dense > kMaxColumns || format.num_fields > kMaxColumns) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": bad format: ", format.num_dense, " integer and ",
        format.num_fields, " categorical columns (each must be in [0, ",
        kMaxColumns, "])"));
  }
  return absl::OkStatus();
}

// How many examples to reserve room for up front: at most `count`,
// kMaxReserveExamples and what fits in kMaxReserveBytes.
int64_t ReserveExamples(int64_t count, const CriteoFormat& format) {
  // A label, the dense values, and per field an offset and (at least) an
  // id; CheckFormat bounds the columns, so this cannot overflow.
  const int64_t bytes_per_example =
      static_cast<int64_t>(sizeof(float)) * (1 + format.num_dense) +
      static_cast<int64_t>(sizeof(uint32_t) + sizeof(int64_t)) *
          format.num_fields;
  return std::min(
      {count, kMaxReserveExamples, kMaxReserveBytes / bytes_per_example});
}

}  // namespace

absl::StatusOr<CtrDataset> LoadCriteo(const std::string& path, int64_t first,
                                      int64_t count,
                                      const CriteoFormat& format) {
  if (absl::Status s = CheckFormat(path, format); !s.ok()) return s;
  if (first < 0 || count < -1) {
    return absl::OutOfRangeError(
        absl::StrCat(path, ": bad slice first=", first, " count=", count));
  }
  absl::StatusOr<std::unique_ptr<GzLineReader>> reader =
      GzLineReader::Open(path);
  if (!reader.ok()) return reader.status();

  CtrDataset data;
  data.num_dense = format.num_dense;
  data.num_fields = format.num_fields;
  data.first = first;
  data.fields.resize(format.num_fields);
  if (count > 0) {
    const int64_t reserve = ReserveExamples(count, format);
    data.labels.reserve(reserve);
    data.dense.reserve(reserve * format.num_dense);
    for (CtrFieldColumn& field : data.fields) {
      field.offsets.reserve(reserve + 1);
      field.ids.reserve(reserve);
    }
  }
  LineParser parser(path, format);
  absl::string_view line;
  while (true) {
    if (count != -1 && data.size == count &&
        (*reader)->line_number() >= first) {
      break;  // the lines after the slice are not read
    }
    absl::StatusOr<bool> more = (*reader)->Next(&line);
    if (!more.ok()) return more.status();
    if (!*more) break;
    const int64_t line_number = (*reader)->line_number();
    if (line_number <= first) continue;
    if (absl::Status s = parser.Parse(line, line_number, &data); !s.ok()) {
      return s;
    }
  }
  if (data.size < count || (*reader)->line_number() < first) {
    return absl::OutOfRangeError(absl::StrCat(
        path, ": slice first=", first, " count=", count,
        " is out of range for ", (*reader)->line_number(), " examples"));
  }
  // The vectors grew by doubling; the data set lives for the whole job.
  data.labels.shrink_to_fit();
  data.dense.shrink_to_fit();
  for (CtrFieldColumn& field : data.fields) {
    field.offsets.shrink_to_fit();
    field.ids.shrink_to_fit();
  }
  return data;
}

absl::StatusOr<int64_t> CountCriteoExamples(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GzLineReader>> reader =
      GzLineReader::Open(path);
  if (!reader.ok()) return reader.status();
  absl::string_view line;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&line);
    if (!more.ok()) return more.status();
    if (!*more) return (*reader)->line_number();
  }
}

}  // namespace tessera
