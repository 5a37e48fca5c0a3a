#include "common/rpc/tensor_chunk_codec.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

// Wire types of the protobuf encoding.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kStartGroup = 3;
constexpr uint32_t kEndGroup = 4;
constexpr uint32_t kFixed32 = 5;

constexpr int kNameField = 1;
constexpr int kOffsetField = 2;
constexpr int kTotalBytesField = 3;
constexpr int kVersionField = 4;
constexpr int kDataField = 15;
constexpr uint32_t kMaxFieldNumber = (1u << 29) - 1;

constexpr char Tag(int field, uint32_t wire_type) {
  return static_cast<char>((field << 3) | wire_type);  // fields < 16: 1 byte
}

void AppendVarint(uint64_t value, std::string* out) {
  char bytes[10];
  int n = 0;
  while (value >= 0x80) {
    bytes[n++] = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  bytes[n++] = static_cast<char>(value);
  out->append(bytes, n);
}

// Reads bytes that lie in consecutive pieces as one stream.
class PieceReader {
 public:
  explicit PieceReader(absl::Span<const absl::string_view> pieces)
      : pieces_(pieces) {
    for (absl::string_view p : pieces) size_ += p.size();
    SkipExhausted();
  }

  bool done() const { return index_ == pieces_.size(); }
  int64_t position() const { return position_; }
  int64_t size() const { return size_; }
  int64_t remaining() const { return size_ - position_; }

  // Empty on success, else what is wrong with the varint.
  absl::string_view ReadVarint(uint64_t* value) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (done()) return "truncated";
      const uint8_t byte = static_cast<uint8_t>(pieces_[index_][offset_]);
      Advance(1);
      result |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) {
        *value = result;
        return {};
      }
    }
    return "over-long (more than 10 bytes)";
  }

  // Calls visit(view) for each piece of the next n bytes and moves past
  // them. REQUIRES: n <= remaining().
  template <typename Visit>
  void Take(int64_t n, Visit&& visit) {
    while (n > 0) {
      absl::string_view piece = pieces_[index_].substr(offset_);
      if (static_cast<int64_t>(piece.size()) > n) piece = piece.substr(0, n);
      visit(piece);
      n -= piece.size();
      Advance(piece.size());
    }
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    position_ += n;
    SkipExhausted();
  }
  void SkipExhausted() {
    while (index_ < pieces_.size() && offset_ == pieces_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }

  const absl::Span<const absl::string_view> pieces_;
  size_t index_ = 0;   // current piece; pieces_.size() at the end
  size_t offset_ = 0;  // within the current piece, always < its size
  int64_t position_ = 0;
  int64_t size_ = 0;
};

const char* FieldName(int field) {
  switch (field) {
    case kNameField:
      return "name";
    case kOffsetField:
      return "offset";
    case kTotalBytesField:
      return "total_bytes";
    case kVersionField:
      return "version";
    case kDataField:
      return "data";
  }
  return "unknown";
}

absl::Status Malformed(const PieceReader& in, int64_t at,
                       absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed TensorChunk (",
                                                 in.size(), " bytes): ", what,
                                                 " at byte ", at));
}

// The tag of the field that starts at `start`: its number and wire type,
// checked against what the message declares for a known field.
absl::Status ReadFieldTag(PieceReader& in, int64_t start, int* field_out,
                          uint32_t* wire_type_out) {
  auto malformed = [&](int64_t at, absl::string_view what) {
    return Malformed(in, at, what);
  };
  uint64_t tag = 0;
  if (absl::string_view bad = in.ReadVarint(&tag); !bad.empty()) {
    return malformed(start, absl::StrCat(bad, " field tag"));
  }
  const uint64_t field64 = tag >> 3;
  const uint32_t wire_type = static_cast<uint32_t>(tag & 7);
  if (field64 == 0 || field64 > kMaxFieldNumber) {
    return malformed(start, absl::StrCat("invalid field number ", field64));
  }
  const int field = static_cast<int>(field64);
  const bool known = field <= kVersionField || field == kDataField;
  if (known) {
    const uint32_t expected =
        field == kNameField || field == kDataField ? kLengthDelimited : kVarint;
    if (wire_type != expected) {
      return malformed(start, absl::StrCat("field ", field, " (",
                                           FieldName(field), ") has wire type ",
                                           wire_type, ", expected ", expected));
    }
  }
  *field_out = field;
  *wire_type_out = wire_type;
  return absl::OkStatus();
}

// The field's value for a varint (stored in *header; *length 0 and
// *consumed), else the length of the bytes that follow.
absl::Status ReadFieldLength(PieceReader& in, int64_t start, int field,
                             uint32_t wire_type, TensorChunkHeader* header,
                             int64_t* length, bool* consumed) {
  auto malformed = [&](int64_t at, absl::string_view what) {
    return Malformed(in, at, what);
  };
  *consumed = false;
  switch (wire_type) {
    case kVarint: {
      uint64_t value = 0;
      if (absl::string_view bad = in.ReadVarint(&value); !bad.empty()) {
        return malformed(start, absl::StrCat(bad, " varint of field ", field,
                                             " (", FieldName(field), ")"));
      }
      // int64 fields carry two's complement in 64 bits.
      const int64_t v = static_cast<int64_t>(value);
      if (field == kOffsetField) header->offset = v;
      if (field == kTotalBytesField) header->total_bytes = v;
      if (field == kVersionField) header->version = v;
      *consumed = true;
      return absl::OkStatus();
    }
    case kFixed64:
      *length = 8;
      break;
    case kFixed32:
      *length = 4;
      break;
    case kLengthDelimited: {
      uint64_t n = 0;
      if (absl::string_view bad = in.ReadVarint(&n); !bad.empty()) {
        return malformed(start, absl::StrCat(bad, " length of field ", field,
                                             " (", FieldName(field), ")"));
      }
      // protobuf caps a length at 2^31 - 1 as well.
      if (n > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
        return malformed(start,
                         absl::StrCat("length ", n, " of field ", field, " (",
                                      FieldName(field), ") is too large"));
      }
      *length = static_cast<int64_t>(n);
      break;
    }
    case kStartGroup:
    case kEndGroup:
      return malformed(start, absl::StrCat("group (wire type ", wire_type,
                                           ") in field ", field));
    default:
      return malformed(start, absl::StrCat("invalid wire type ", wire_type,
                                           " of field ", field));
  }
  return absl::OkStatus();
}

}  // namespace

void TensorChunkView::CopyDataTo(char* dst) const {
  for (absl::string_view piece : data) {
    std::memcpy(dst, piece.data(), piece.size());
    dst += piece.size();
  }
}

absl::Status ParseTensorChunk(absl::Span<const absl::string_view> wire,
                              TensorChunkView* chunk) {
  chunk->header.name.clear();  // keeps its capacity
  chunk->header.offset = 0;
  chunk->header.total_bytes = 0;
  chunk->header.version = 0;
  chunk->data.clear();
  chunk->data_bytes = 0;

  PieceReader in(wire);
  auto malformed = [&](int64_t at, absl::string_view what) {
    return Malformed(in, at, what);
  };
  while (!in.done()) {
    const int64_t start = in.position();
    int field = 0;
    uint32_t wire_type = 0;
    if (absl::Status s = ReadFieldTag(in, start, &field, &wire_type); !s.ok()) {
      return s;
    }
    int64_t length = 0;  // of the field's bytes still to take or skip
    bool consumed = false;
    if (absl::Status s = ReadFieldLength(in, start, field, wire_type,
                                         &chunk->header, &length, &consumed);
        !s.ok()) {
      return s;
    }
    if (consumed) continue;
    if (length > in.remaining()) {
      return malformed(
          start,
          absl::StrCat("field ", field, " (", FieldName(field), ") needs ",
                       length, " bytes but ", in.remaining(), " remain"));
    }
    if (field == kNameField) {
      chunk->header.name.clear();  // the last occurrence wins
      in.Take(length, [&](absl::string_view piece) {
        chunk->header.name.append(piece.data(), piece.size());
      });
    } else if (field == kDataField) {
      chunk->data.clear();
      chunk->data_bytes = length;
      in.Take(length,
              [&](absl::string_view piece) { chunk->data.push_back(piece); });
    } else {
      in.Take(length, [](absl::string_view) {});
    }
  }
  return absl::OkStatus();
}

void AppendTensorChunkPrefix(const TensorChunkHeader& header,
                             int64_t data_bytes, std::string* out) {
  // Field order and omitted defaults as in the generated serializer.
  if (!header.name.empty()) {
    out->push_back(Tag(kNameField, kLengthDelimited));
    AppendVarint(header.name.size(), out);
    out->append(header.name);
  }
  auto append_int64 = [out](int field, int64_t value) {
    if (value == 0) return;
    out->push_back(Tag(field, kVarint));
    AppendVarint(static_cast<uint64_t>(value), out);
  };
  append_int64(kOffsetField, header.offset);
  append_int64(kTotalBytesField, header.total_bytes);
  append_int64(kVersionField, header.version);
  if (data_bytes > 0) {
    out->push_back(Tag(kDataField, kLengthDelimited));
    AppendVarint(static_cast<uint64_t>(data_bytes), out);
  }
}

grpc::ByteBuffer MakeTensorChunkBuffer(const TensorChunkHeader& header,
                                       const grpc::Slice& data) {
  std::string prefix;
  AppendTensorChunkPrefix(header, data.size(), &prefix);
  const grpc::Slice slices[2] = {grpc::Slice(prefix), data};
  return grpc::ByteBuffer(slices, data.size() > 0 ? 2 : 1);
}

absl::Status TensorChunkParser::Parse(const grpc::ByteBuffer& buffer) {
  pieces_.clear();
  if (grpc::Status s = buffer.Dump(&slices_); !s.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot read a TensorChunk message: ", s.error_message()));
  }
  for (const grpc::Slice& slice : slices_) {
    pieces_.emplace_back(reinterpret_cast<const char*>(slice.begin()),
                         slice.size());
  }
  return ParseTensorChunk(pieces_, &chunk_);
}

void TensorChunkParser::Clear() {
  chunk_.data.clear();
  pieces_.clear();
  slices_.clear();
}

}  // namespace tessera
