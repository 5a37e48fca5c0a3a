#include "common/cluster/hostlist.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

// Longest host name accepted, DNS's limit. Without it a long literal times
// kMaxExpandedHosts names could ask for gigabytes (found by
// tests/fuzz/hostlist_fuzzer).
constexpr size_t kMaxHostNameBytes = 255;

// One "lo-hi" (or single "lo") inside brackets; values are printed with at
// least `width` digits.
struct Range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  size_t width = 0;
};

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string Quote(absl::string_view s) {
  return absl::StrCat("\"", absl::CHexEscape(s), "\"");
}

std::string ZeroPadded(uint64_t value, size_t width) {
  std::string digits = absl::StrCat(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// Parses one host list; every error quotes the whole list.
class HostlistParser {
 public:
  explicit HostlistParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::vector<std::string>> Parse() {
    if (text_.empty()) return Error("empty list");
    std::vector<std::string> hosts;
    size_t name_start = 0;
    size_t open = absl::string_view::npos;  // The unclosed '[', if any.
    for (size_t i = 0; i <= text_.size(); ++i) {
      const bool at_end = i == text_.size();
      if (at_end || (text_[i] == ',' && open == absl::string_view::npos)) {
        if (open != absl::string_view::npos) {
          return ErrorAt(open, "'[' is never closed");
        }
        if (i == name_start) {
          return ErrorAt(i,
                         "empty host name (two commas in a row, or a comma "
                         "at an end)");
        }
        if (absl::Status s = ExpandName(name_start, i, &hosts); !s.ok()) {
          return s;
        }
        name_start = i + 1;
        continue;
      }
      const unsigned char c = static_cast<unsigned char>(text_[i]);
      if (absl::ascii_isspace(c) || absl::ascii_iscntrl(c)) {
        return ErrorAt(i, "whitespace or a control character");
      }
      if (c == '[') {
        if (open != absl::string_view::npos) {
          return Error(absl::StrCat("'[' at position ", i,
                                    " is inside the bracket group opened at "
                                    "position ",
                                    open));
        }
        open = i;
      } else if (c == ']') {
        if (open == absl::string_view::npos) {
          return ErrorAt(i, "']' without a matching '['");
        }
        open = absl::string_view::npos;
      }
    }
    return hosts;
  }

 private:
  absl::Status Error(absl::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat("host list ", Quote(text_), ": ", problem));
  }
  absl::Status ErrorAt(size_t pos, absl::string_view problem) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "host list ", Quote(text_), ": ", problem, " at position ", pos));
  }

  // Parses the range text_[begin, end) of a bracket group.
  absl::StatusOr<Range> ParseRange(size_t begin, size_t end) const {
    const absl::string_view part = text_.substr(begin, end - begin);
    const size_t dash = part.find('-');
    const absl::string_view lo_text = part.substr(0, dash);
    const absl::string_view hi_text =
        dash == absl::string_view::npos ? lo_text : part.substr(dash + 1);
    if (!AllDigits(lo_text) || !AllDigits(hi_text)) {
      return ErrorAt(begin, absl::StrCat(Quote(part),
                                         " is neither a number nor a range "
                                         "lo-hi of decimal numbers"));
    }
    Range range;
    range.width = lo_text.size();
    // Padding is the one part of a value the text does not bound; without
    // this "n[" + 2000 zeros + "-65535]" expanded to 2000-digit names.
    if (range.width > kMaxHostNameBytes) {
      return ErrorAt(
          begin, absl::StrCat("range ", Quote(part), " pads its values to ",
                              range.width, " digits; a host name has at most ",
                              kMaxHostNameBytes, " characters"));
    }
    if (!absl::SimpleAtoi(lo_text, &range.lo) ||
        !absl::SimpleAtoi(hi_text, &range.hi)) {
      return ErrorAt(begin, absl::StrCat("a number in ", Quote(part),
                                         " does not fit in 64 bits"));
    }
    if (range.lo > range.hi) {
      return ErrorAt(begin, absl::StrCat("reversed range ", Quote(part),
                                         " (its start is after its end)"));
    }
    if (range.hi - range.lo >= static_cast<uint64_t>(kMaxHostRange)) {
      return ErrorAt(begin,
                     absl::StrCat("range ", Quote(part), " has more than ",
                                  kMaxHostRange, " values"));
    }
    return range;
  }

  // Parses the contents text_[begin, end) of a bracket group into its
  // ranges, without expanding them; *count is the number of values they
  // stand for (at most kMaxExpandedHosts) and *widest the most characters
  // one of them prints as.
  absl::StatusOr<std::vector<Range>> ParseGroup(size_t begin, size_t end,
                                                uint64_t* count,
                                                size_t* widest) const {
    if (begin == end) return ErrorAt(begin - 1, "empty bracket group \"[]\"");
    std::vector<Range> ranges;
    *count = 0;
    *widest = 0;
    size_t part_start = begin;
    for (size_t i = begin; i <= end; ++i) {
      if (i != end && text_[i] != ',') continue;
      if (i == part_start) {
        return ErrorAt(i, "empty range in a bracket group");
      }
      absl::StatusOr<Range> range = ParseRange(part_start, i);
      if (!range.ok()) return range.status();
      *count += range->hi - range->lo + 1;  // Each term is at most 2^16.
      if (*count > static_cast<uint64_t>(kMaxExpandedHosts)) {
        return Error(
            absl::StrCat("expands to more than ", kMaxExpandedHosts, " names"));
      }
      *widest =
          std::max({*widest, range->width, absl::StrCat(range->hi).size()});
      ranges.push_back(*range);
      part_start = i + 1;
    }
    return ranges;
  }

  // The zero-padded values `ranges` stand for, in order.
  static std::vector<std::string> ExpandGroup(
      const std::vector<Range>& ranges) {
    std::vector<std::string> values;
    for (const Range& range : ranges) {
      for (uint64_t v = range.lo;; ++v) {
        values.push_back(ZeroPadded(v, range.width));
        if (v == range.hi) break;  // hi may be UINT64_MAX.
      }
    }
    return values;
  }

  // Appends the names the name text_[begin, end) stands for to *hosts.
  absl::Status ExpandName(size_t begin, size_t end,
                          std::vector<std::string>* hosts) const {
    // The name is literals[0] groups[0] literals[1] groups[1] ... with one
    // more literal than groups; the last literal must be empty if there is
    // a group. Every group is parsed and sized before any is expanded, so
    // the limits on names and their length are checked first.
    std::vector<absl::string_view> literals;
    std::vector<std::vector<Range>> ranges;
    uint64_t count = 1;     // names the groups so far stand for
    size_t name_bytes = 0;  // longest name the groups so far can give
    size_t pos = begin;
    while (true) {
      const size_t open = text_.find('[', pos);
      if (open == absl::string_view::npos || open >= end) break;
      const size_t close = text_.find(']', open);  // Balanced: Parse checked.
      literals.push_back(text_.substr(pos, open - pos));
      name_bytes += literals.back().size();
      uint64_t group_count = 0;
      size_t widest = 0;
      absl::StatusOr<std::vector<Range>> group =
          ParseGroup(open + 1, close, &group_count, &widest);
      if (!group.ok()) return group.status();
      count *= group_count;  // Each factor and the product stay <= 2^20.
      if (hosts->size() + count > static_cast<uint64_t>(kMaxExpandedHosts)) {
        return Error(
            absl::StrCat("expands to more than ", kMaxExpandedHosts, " names"));
      }
      name_bytes += widest;
      ranges.push_back(*std::move(group));
      pos = close + 1;
    }
    literals.push_back(text_.substr(pos, end - pos));
    name_bytes += literals.back().size();
    if (name_bytes > kMaxHostNameBytes) {
      return ErrorAt(begin, absl::StrCat("a host name of up to ", name_bytes,
                                         " characters; at most ",
                                         kMaxHostNameBytes, " are allowed"));
    }
    if (ranges.empty()) {
      hosts->emplace_back(literals[0]);
      return absl::OkStatus();
    }
    if (!literals.back().empty()) {
      return ErrorAt(pos, absl::StrCat(Quote(literals.back()),
                                       " follows the last bracket group; "
                                       "Slurm allows no text there"));
    }
    std::vector<std::vector<std::string>> groups;
    for (const std::vector<Range>& group : ranges) {
      groups.push_back(ExpandGroup(group));
    }
    // Slurm's order: the next-to-last group outermost, then the groups
    // before it from right to left, and the last group innermost.
    const int n = static_cast<int>(groups.size());
    std::vector<int> order;  // Outermost first.
    for (int g = n - 2; g >= 0; --g) order.push_back(g);
    order.push_back(n - 1);
    std::vector<size_t> index(n, 0);
    while (true) {
      std::string name(literals[0]);
      for (int g = 0; g < n; ++g) {
        absl::StrAppend(&name, groups[g][index[g]], literals[g + 1]);
      }
      hosts->push_back(std::move(name));
      // Advance the innermost group; carry outwards.
      int k = n - 1;
      for (; k >= 0; --k) {
        const int g = order[k];
        if (++index[g] < groups[g].size()) break;
        index[g] = 0;
      }
      if (k < 0) break;
    }
    return absl::OkStatus();
  }

  absl::string_view text_;
};

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandHostlist(
    absl::string_view hostlist) {
  return HostlistParser(hostlist).Parse();
}

absl::StatusOr<std::vector<int>> ExpandTasksPerNode(
    absl::string_view tasks_per_node) {
  const absl::string_view text = tasks_per_node;
  auto error = [text](size_t pos, absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tasks per node ", Quote(text), ": ", problem, " at position ", pos));
  };
  if (text.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tasks per node ", Quote(text), " is empty"));
  }
  std::vector<int> counts;
  size_t part_start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i != text.size() && text[i] != ',') continue;
    const absl::string_view part = text.substr(part_start, i - part_start);
    if (part.empty()) {
      return error(part_start,
                   "empty part (two commas in a row, or a comma at an end)");
    }
    const size_t paren = part.find('(');
    const absl::string_view count_text = part.substr(0, paren);
    absl::string_view repeat_text = "1";
    if (paren != absl::string_view::npos) {
      const absl::string_view suffix = part.substr(paren);
      if (suffix.size() < 4 || suffix.substr(0, 2) != "(x" ||
          suffix.back() != ')') {
        return error(part_start + paren,
                     absl::StrCat("malformed repeat ", Quote(suffix),
                                  "; expected (xN)"));
      }
      repeat_text = suffix.substr(2, suffix.size() - 3);
    }
    int count = 0;
    int repeat = 0;
    if (!AllDigits(count_text) || !AllDigits(repeat_text)) {
      return error(part_start, absl::StrCat(Quote(part),
                                            " is neither a count N nor a "
                                            "repeated count N(xR)"));
    }
    if (!absl::SimpleAtoi(count_text, &count) ||
        !absl::SimpleAtoi(repeat_text, &repeat)) {
      return error(part_start, absl::StrCat("a number in ", Quote(part),
                                            " does not fit in an int"));
    }
    if (count == 0) {
      return error(part_start,
                   absl::StrCat("count 0 in ", Quote(part),
                                "; every node of a step runs a task"));
    }
    if (repeat == 0) {
      return error(part_start, absl::StrCat("repeat (x0) in ", Quote(part),
                                            "; a repeat is at least 1"));
    }
    if (counts.size() + static_cast<size_t>(repeat) >
        static_cast<size_t>(kMaxExpandedHosts)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tasks per node ", Quote(text), " expands to more than ",
                       kMaxExpandedHosts, " counts"));
    }
    counts.insert(counts.end(), repeat, count);
    part_start = i + 1;
  }
  return counts;
}

}  // namespace tessera
