#include "common/data_plane/frame.h"

#include <algorithm>
#include <cstring>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

static_assert(ABSL_IS_LITTLE_ENDIAN,
              "the data plane's frames assume a little-endian host");

constexpr char kMagic[4] = {'T', 'S', 'D', 'P'};

template <typename T>
void Put(char* out, size_t offset, T v) {
  std::memcpy(out + offset, &v, sizeof(T));
}

template <typename T>
T Get(const char* in, size_t offset) {
  T v;
  std::memcpy(&v, in + offset, sizeof(T));
  return v;
}

}  // namespace

void EncodeFrameHeader(const FrameHeader& header, char* out) {
  std::memcpy(out, kMagic, sizeof(kMagic));
  Put<uint16_t>(out, 4, static_cast<uint16_t>(header.op));
  Put<uint16_t>(out, 6, header.flags);
  Put<int32_t>(out, 8, header.code);
  Put<uint32_t>(out, 12, header.count);
  Put<int64_t>(out, 16, header.a);
  Put<int64_t>(out, 24, header.b);
  Put<int64_t>(out, 32, header.bytes);
}

absl::Status DecodeFrameHeader(const char* in, FrameHeader* header) {
  if (std::memcmp(in, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(
        "data plane: a frame does not start with TSDP (not a Tessera data "
        "plane peer, or the stream lost its place)");
  }
  header->op = static_cast<FrameOp>(Get<uint16_t>(in, 4));
  header->flags = Get<uint16_t>(in, 6);
  header->code = Get<int32_t>(in, 8);
  header->count = Get<uint32_t>(in, 12);
  header->a = Get<int64_t>(in, 16);
  header->b = Get<int64_t>(in, 24);
  header->bytes = Get<int64_t>(in, 32);
  if (header->bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data plane: a frame claims ", header->bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status ReadFrameHeader(Socket& socket, FrameHeader* header) {
  char raw[kFrameHeaderBytes];
  if (absl::Status s = socket.ReadFull(raw, sizeof(raw)); !s.ok()) return s;
  return DecodeFrameHeader(raw, header);
}

absl::Status ReadNextFrameHeader(Socket& socket, FrameHeader* header) {
  char raw[kFrameHeaderBytes];
  if (absl::Status s = socket.ReadFullAfterIdle(raw, sizeof(raw)); !s.ok()) {
    return s;
  }
  return DecodeFrameHeader(raw, header);
}

absl::Status ReadReplyHeader(Socket& socket, FrameOp op, FrameHeader* header,
                             bool* in_step) {
  bool ignored;
  if (in_step == nullptr) in_step = &ignored;
  *in_step = false;
  if (absl::Status s = ReadFrameHeader(socket, header); !s.ok()) {
    // A stream out of step is as good as a broken one.
    return s.code() == absl::StatusCode::kInvalidArgument
               ? absl::InternalError(s.message())
               : s;
  }
  if (header->op != op) {
    return absl::InternalError(absl::StrCat(
        "data plane: expected a reply of op ", static_cast<int>(op),
        ", got op ", static_cast<int>(header->op)));
  }
  if (header->code == 0) {
    *in_step = true;
    return absl::OkStatus();
  }
  if (header->bytes > kMaxFrameTableBytes) {
    return absl::InternalError("data plane: an error reply is too long");
  }
  std::string message(header->bytes, '\0');
  if (absl::Status s = socket.ReadFull(message.data(), message.size());
      !s.ok()) {
    return s;
  }
  *in_step = true;
  const int code = header->code;
  return absl::Status(code > 0 && code <= 16
                          ? static_cast<absl::StatusCode>(code)
                          : absl::StatusCode::kUnknown,
                      message);
}

absl::Status WriteErrorReply(Socket& socket, FrameOp op,
                             const absl::Status& error) {
  FrameHeader header;
  header.op = op;
  header.code = static_cast<int32_t>(error.code());
  header.bytes = static_cast<int64_t>(error.message().size());
  char raw[kFrameHeaderBytes];
  EncodeFrameHeader(header, raw);
  const iovec parts[2] = {
      {raw, sizeof(raw)},
      {const_cast<char*>(error.message().data()), error.message().size()}};
  return socket.WriteAll(parts);
}

void AppendString16(absl::string_view s, std::string* out) {
  const uint16_t n = static_cast<uint16_t>(std::min<size_t>(s.size(), 65535));
  out->append(reinterpret_cast<const char*>(&n), sizeof(n));
  out->append(s.data(), n);
}

void AppendInt64(int64_t v, std::string* out) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

bool WireReader::ReadString16(std::string* out) {
  uint16_t n;
  if (!ok_ || data_.size() < sizeof(n)) return ok_ = false;
  std::memcpy(&n, data_.data(), sizeof(n));
  data_.remove_prefix(sizeof(n));
  if (data_.size() < n) return ok_ = false;
  out->assign(data_.data(), n);
  data_.remove_prefix(n);
  return true;
}

bool WireReader::ReadInt64(int64_t* out) {
  if (!ok_ || data_.size() < sizeof(*out)) return ok_ = false;
  std::memcpy(out, data_.data(), sizeof(*out));
  data_.remove_prefix(sizeof(*out));
  return true;
}

}  // namespace tessera
