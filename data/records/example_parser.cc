#include "data/records/example_parser.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "data/records/feature_hash.h"

namespace tessera {
namespace {

// Wire types of the protobuf encoding.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

absl::Status NotAnExample(absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("not a tf.train.Example: ", why));
}

// A cursor over protobuf wire bytes. Every read checks the bounds.
class Wire {
 public:
  explicit Wire(absl::string_view bytes)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return p_ == end_; }

  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t byte = static_cast<uint8_t>(*p_++);
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (byte < 0x80) {
        *v = result;
        return true;
      }
    }
    return false;
  }

  bool Tag(int* field, int* wire_type) {
    uint64_t tag;
    if (!Varint(&tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) {
      return false;
    }
    *field = static_cast<int>(tag >> 3);
    *wire_type = static_cast<int>(tag & 7);
    return true;
  }

  bool Bytes(absl::string_view* out) {
    uint64_t n;
    if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    *out = absl::string_view(p_, n);
    p_ += n;
    return true;
  }

  bool Fixed32(uint32_t* v) {
    if (end_ - p_ < 4) return false;
    std::memcpy(v, p_, 4);  // little-endian hosts only, as the rest of
    p_ += 4;                // Tessera's binary formats assume
    return true;
  }

  // Skips a field of `wire_type` (groups are refused: proto3 has none).
  bool Skip(int wire_type) {
    uint64_t v;
    absl::string_view bytes;
    switch (wire_type) {
      case kVarint:
        return Varint(&v);
      case kFixed64:
        if (end_ - p_ < 8) return false;
        p_ += 8;
        return true;
      case kLengthDelimited:
        return Bytes(&bytes);
      case kFixed32:
        if (end_ - p_ < 4) return false;
        p_ += 4;
        return true;
      default:
        return false;
    }
  }

 private:
  const char* p_;
  const char* end_;
};

// Calls on_value for each value of a FloatList or Int64List's field 1,
// packed or not; false when the bytes are malformed.
template <typename OnValue>
bool ForEachNumber(absl::string_view list, bool is_float, OnValue on_value) {
  Wire wire(list);
  while (!wire.done()) {
    int field, type;
    if (!wire.Tag(&field, &type)) return false;
    if (field != 1) {
      if (!wire.Skip(type)) return false;
      continue;
    }
    if (type == kLengthDelimited) {
      absl::string_view packed;
      if (!wire.Bytes(&packed)) return false;
      if (is_float) {
        if (packed.size() % 4 != 0) return false;
        for (size_t i = 0; i < packed.size(); i += 4) {
          float f;
          std::memcpy(&f, packed.data() + i, 4);
          on_value(static_cast<double>(f), int64_t{0});
        }
      } else {
        Wire values(packed);
        while (!values.done()) {
          uint64_t v;
          if (!values.Varint(&v)) return false;
          on_value(0.0, static_cast<int64_t>(v));
        }
      }
    } else if (is_float && type == kFixed32) {
      uint32_t bits;
      if (!wire.Fixed32(&bits)) return false;
      float f;
      std::memcpy(&f, &bits, 4);
      on_value(static_cast<double>(f), int64_t{0});
    } else if (!is_float && type == kVarint) {
      uint64_t v;
      if (!wire.Varint(&v)) return false;
      on_value(0.0, static_cast<int64_t>(v));
    } else {
      return false;
    }
  }
  return true;
}

const char* KindName(int kind) {
  switch (kind) {
    case 1:
      return "bytes_list";
    case 2:
      return "float_list";
    case 3:
      return "int64_list";
    default:
      return "no list";
  }
}

}  // namespace

ExampleParser::ExampleParser(const ExampleSchema& schema) : schema_(schema) {
  auto slot = [this](const std::string& name) {
    auto [it, inserted] = slots_.try_emplace(name, names_.size());
    if (inserted) names_.push_back(name);
    return it->second;
  };
  for (const ExampleSchema::Dense& d : schema.dense) {
    dense_first_.push_back(static_cast<int>(dense_slots_.size()));
    for (const std::string& f : d.features) dense_slots_.push_back(slot(f));
  }
  for (const ExampleSchema::Sparse& s : schema.sparse) {
    sparse_slots_.push_back(slot(s.feature));
  }
  label_slot_ = slot(schema.label);
  found_.resize(names_.size());
  seen_.assign(names_.size(), 0);
}

const ExampleParser::Found& ExampleParser::Get(int slot) const {
  static const Found kNone;
  return seen_[slot] == serial_ ? found_[slot] : kNone;
}

absl::Status ExampleParser::ReadEntry(absl::string_view entry) {
  Wire wire(entry);
  absl::string_view key, value;
  while (!wire.done()) {
    int field, type;
    if (!wire.Tag(&field, &type)) return NotAnExample("bad map entry");
    if ((field == 1 || field == 2) && type == kLengthDelimited) {
      if (!wire.Bytes(field == 1 ? &key : &value)) {
        return NotAnExample("bad map entry");
      }
    } else if (!wire.Skip(type)) {
      return NotAnExample("bad map entry");
    }
  }
  Found found;
  Wire feature(value);
  while (!feature.done()) {
    int field, type;
    if (!feature.Tag(&field, &type)) {
      return NotAnExample(absl::StrCat("bad Feature \"", key, "\""));
    }
    if (field >= 1 && field <= 3 && type == kLengthDelimited) {
      // A oneof: the last kind wins.
      if (!feature.Bytes(&found.list)) {
        return NotAnExample(absl::StrCat("bad Feature \"", key, "\""));
      }
      found.kind = field;
    } else if (!feature.Skip(type)) {
      return NotAnExample(absl::StrCat("bad Feature \"", key, "\""));
    }
  }
  int slot;
  if (entry_ < entry_keys_.size() && entry_keys_[entry_] == key) {
    slot = entry_slots_[entry_];
  } else {
    auto it = slots_.find(key);
    slot = it == slots_.end() ? -1 : it->second;
    if (entry_ >= entry_keys_.size()) {
      entry_keys_.resize(entry_ + 1);
      entry_slots_.resize(entry_ + 1);
    }
    entry_keys_[entry_].assign(key.data(), key.size());
    entry_slots_[entry_] = slot;
  }
  ++entry_;
  if (slot < 0) return absl::OkStatus();
  found_[slot] = found;
  seen_[slot] = serial_;
  return absl::OkStatus();
}

absl::Status ExampleParser::ReadFeatures(absl::string_view features) {
  Wire wire(features);
  while (!wire.done()) {
    int field, type;
    if (!wire.Tag(&field, &type)) return NotAnExample("bad Features");
    if (field == 1 && type == kLengthDelimited) {
      absl::string_view entry;
      if (!wire.Bytes(&entry)) return NotAnExample("bad Features");
      if (absl::Status s = ReadEntry(entry); !s.ok()) return s;
    } else if (!wire.Skip(type)) {
      return NotAnExample("bad Features");
    }
  }
  return absl::OkStatus();
}

absl::Status ExampleParser::Parse(absl::string_view record,
                                  ParsedExample* example) {
  ++serial_;
  entry_ = 0;
  Wire wire(record);
  while (!wire.done()) {
    int field, type;
    if (!wire.Tag(&field, &type)) return NotAnExample("bad field tag");
    if (field == 1 && type == kLengthDelimited) {
      absl::string_view features;
      if (!wire.Bytes(&features)) return NotAnExample("bad field length");
      if (absl::Status s = ReadFeatures(features); !s.ok()) return s;
    } else if (!wire.Skip(type)) {
      return NotAnExample("bad field");
    }
  }
  example->dense.clear();
  example->ids.clear();
  example->id_ends.clear();
  for (const ExampleSchema::Dense& d : schema_.dense) {
    if (absl::Status s = Dense(d, example); !s.ok()) return s;
  }
  for (const ExampleSchema::Sparse& s : schema_.sparse) {
    if (absl::Status st = Sparse(s, example); !st.ok()) return st;
  }
  return Label(example);
}

absl::Status ExampleParser::Dense(const ExampleSchema::Dense& input,
                                  ParsedExample* example) {
  const size_t first = example->dense.size();
  const size_t slot_index = dense_first_[&input - schema_.dense.data()];
  for (size_t i = 0; i < input.features.size(); ++i) {
    const Found& found = Get(dense_slots_[slot_index + i]);
    const std::string& name = input.features[i];
    if (found.kind == 0) {
      return absl::InvalidArgumentError(absl::StrCat("missing feature \"", name,
                                                     "\" (dense input \"",
                                                     input.input, "\")"));
    }
    if (found.kind == 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("feature \"", name, "\" is a bytes_list; dense input \"",
                       input.input, "\" needs float_list or int64_list"));
    }
    const bool is_float = found.kind == 2;
    std::vector<float>& out = example->dense;
    const bool ok =
        ForEachNumber(found.list, is_float, [&](double f, int64_t v) {
          out.push_back(is_float ? static_cast<float>(f)
                                 : static_cast<float>(v));
        });
    if (!ok) return NotAnExample(absl::StrCat("bad list in \"", name, "\""));
  }
  const int64_t got = static_cast<int64_t>(example->dense.size() - first);
  if (got != input.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wrong shape: dense input \"", input.input, "\" needs ", input.size,
        " values, feature", input.features.size() > 1 ? "s \"" : " \"",
        input.features.front(),
        input.features.size() > 1 ? "\".. hold " : "\" holds ", got));
  }
  return absl::OkStatus();
}

absl::Status ExampleParser::Sparse(const ExampleSchema::Sparse& input,
                                   ParsedExample* example) {
  const int index = static_cast<int>(&input - schema_.sparse.data());
  const Found& found = Get(sparse_slots_[index]);
  if (found.kind == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing feature \"", input.feature, "\" (sparse input \"",
                     input.input, "\")"));
  }
  const size_t first = example->ids.size();
  if (found.kind == 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature \"", input.feature, "\" is a float_list; sparse input \"",
        input.input, "\" needs int64_list or bytes_list"));
  }
  if (found.kind == 3) {
    std::vector<int64_t>& ids = example->ids;
    if (!ForEachNumber(found.list, false,
                       [&](double, int64_t v) { ids.push_back(v); })) {
      return NotAnExample(
          absl::StrCat("bad int64_list in \"", input.feature, "\""));
    }
  } else {
    Wire wire(found.list);
    while (!wire.done()) {
      int field, type;
      absl::string_view value;
      if (!wire.Tag(&field, &type) ||
          (field == 1 && type == kLengthDelimited ? !wire.Bytes(&value)
                                                  : !wire.Skip(type))) {
        return NotAnExample(
            absl::StrCat("bad bytes_list in \"", input.feature, "\""));
      }
      if (field == 1 && type == kLengthDelimited) {
        example->ids.push_back(HashFeatureBytes(value));
      }
    }
  }
  const size_t count = example->ids.size() - first;
  if (count > static_cast<size_t>(input.max_hotness)) {
    return absl::InvalidArgumentError(
        absl::StrCat("wrong shape: feature \"", input.feature, "\" holds ",
                     count, " ids, sparse input \"", input.input,
                     "\" takes at most ", input.max_hotness, " (max_hotness)"));
  }
  if (absl::Status s = CheckIds(input, example->ids.data() + first, count);
      !s.ok()) {
    return s;
  }
  example->id_ends.push_back(static_cast<uint32_t>(example->ids.size()));
  return absl::OkStatus();
}

absl::Status ExampleParser::Label(ParsedExample* example) {
  const Found& found = Get(label_slot_);
  if (found.kind == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing label feature \"", schema_.label, "\""));
  }
  if (found.kind == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("label feature \"", schema_.label,
                     "\" is a bytes_list; it needs int64_list or float_list"));
  }
  const bool is_float = found.kind == 2;
  int count = 0;
  double value = 0;
  if (!ForEachNumber(found.list, is_float, [&](double f, int64_t v) {
        ++count;
        value = is_float ? f : static_cast<double>(v);
      })) {
    return NotAnExample(absl::StrCat("bad list in \"", schema_.label, "\""));
  }
  if (count != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wrong shape: label feature \"", schema_.label, "\" holds ", count,
        " values, not 1 (", KindName(found.kind), ")"));
  }
  if (absl::Status s = SetLabel(schema_, value, example); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("label feature \"", schema_.label, "\": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace tessera
