#include "bench/grpc_floor.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/grpc_status.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/sync_stream.h"

namespace tessera {
namespace bench {
namespace {

// A message of one slice over memory that outlives the call, not copied.
grpc::ByteBuffer Borrowed(const char* data, int64_t length) {
  const grpc::Slice slice(data, static_cast<size_t>(length),
                          grpc::Slice::STATIC_SLICE);
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer EncodeLength(int64_t bytes) {
  char raw[sizeof(bytes)];
  std::memcpy(raw, &bytes, sizeof(bytes));
  const grpc::Slice slice(raw, sizeof(raw));  // copies
  return grpc::ByteBuffer(&slice, 1);
}

// Push: reads and drops every chunk, then answers one empty message.
// Pull: reads the length asked for, then writes that many bytes of
// `payload` in chunks.
class FloorReactor : public grpc::ServerGenericBidiReactor {
 public:
  FloorReactor(bool push, const std::vector<char>* payload, int64_t chunk)
      : push_(push), payload_(payload), chunk_(chunk) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (push_) {
      if (ok) {
        in_.Clear();  // drop it: the floor does nothing with the bytes
        StartRead(&in_);
        return;
      }
      // An empty message: a default ByteBuffer is no message at all.
      const grpc::Slice empty;
      out_ = grpc::ByteBuffer(&empty, 1);
      StartWriteAndFinish(&out_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    }
    std::vector<grpc::Slice> slices;
    std::string request;
    if (ok && in_.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        request.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    if (request.size() != sizeof(total_)) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "GrpcFloor/Pull: the request is not a length"));
      return;
    }
    std::memcpy(&total_, request.data(), sizeof(total_));
    if (total_ < 0 || total_ > static_cast<int64_t>(payload_->size())) {
      Finish(grpc::Status(
          grpc::StatusCode::OUT_OF_RANGE,
          absl::StrCat("GrpcFloor/Pull: ", total_, " bytes asked, at most ",
                       payload_->size())));
      return;
    }
    NextWrite();
  }

  void OnWriteDone(bool ok) override {
    if (push_) return;
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    NextWrite();
  }

  void OnDone() override { delete this; }

 private:
  void NextWrite() {
    if (sent_ >= total_) {
      Finish(grpc::Status::OK);
      return;
    }
    const int64_t length = std::min(chunk_, total_ - sent_);
    out_ = Borrowed(payload_->data() + sent_, length);
    sent_ += length;
    StartWrite(&out_);
  }

  const bool push_;
  const std::vector<char>* const payload_;
  const int64_t chunk_;
  grpc::ByteBuffer in_;
  grpc::ByteBuffer out_;
  int64_t total_ = 0;
  int64_t sent_ = 0;
};

class Unimplemented : public grpc::ServerGenericBidiReactor {
 public:
  explicit Unimplemented(const std::string& method) {
    Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        absl::StrCat("GrpcFloor has no method ", method)));
  }
  void OnDone() override { delete this; }
};

}  // namespace

GrpcFloorService::GrpcFloorService(int64_t max_bytes, int64_t chunk_bytes)
    : chunk_bytes_(std::max<int64_t>(chunk_bytes, 1)),
      payload_(static_cast<size_t>(max_bytes), 1) {}

grpc::ServerGenericBidiReactor* GrpcFloorService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  const std::string& method = context->method();
  if (method == kPush) return new FloorReactor(true, &payload_, chunk_bytes_);
  if (method == kPull) return new FloorReactor(false, &payload_, chunk_bytes_);
  return new Unimplemented(method);
}

GrpcFloorClient::GrpcFloorClient(std::shared_ptr<grpc::Channel> channel,
                                 int64_t max_bytes, int64_t chunk_bytes)
    : channel_(std::move(channel)),
      chunk_bytes_(std::max<int64_t>(chunk_bytes, 1)),
      payload_(static_cast<size_t>(max_bytes), 1),
      push_method_(GrpcFloorService::kPush,
                   grpc::internal::RpcMethod::CLIENT_STREAMING, channel_),
      pull_method_(GrpcFloorService::kPull,
                   grpc::internal::RpcMethod::SERVER_STREAMING, channel_) {}

absl::Status GrpcFloorClient::Push(int64_t bytes) {
  if (bytes <= 0 || bytes > static_cast<int64_t>(payload_.size())) {
    return absl::OutOfRangeError(absl::StrCat(
        "GrpcFloor push of ", bytes, " bytes, at most ", payload_.size()));
  }
  grpc::ClientContext context;
  SetDeadline(&context, kDefaultRpcTimeoutS);
  grpc::ByteBuffer response;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
          channel_.get(), push_method_, &context, &response));
  for (int64_t sent = 0; sent < bytes;) {
    const int64_t length = std::min(chunk_bytes_, bytes - sent);
    if (!writer->Write(Borrowed(payload_.data() + sent, length))) break;
    sent += length;
  }
  writer->WritesDone();
  return FromGrpcStatus(writer->Finish(), "GrpcFloor/Push");
}

absl::Status GrpcFloorClient::Pull(int64_t bytes) {
  grpc::ClientContext context;
  SetDeadline(&context, kDefaultRpcTimeoutS);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel_.get(), pull_method_, &context, EncodeLength(bytes)));
  grpc::ByteBuffer message;
  int64_t received = 0;
  while (reader->Read(&message)) {
    received += static_cast<int64_t>(message.Length());
    message.Clear();  // drop it: the floor does nothing with the bytes
  }
  if (absl::Status s = FromGrpcStatus(reader->Finish(), "GrpcFloor/Pull");
      !s.ok()) {
    return s;
  }
  if (received != bytes) {
    return absl::DataLossError(absl::StrCat("GrpcFloor/Pull: got ", received,
                                            " of ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace tessera
