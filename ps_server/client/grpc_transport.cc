#include "ps_server/client/grpc_transport.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/byte_codec.h"
#include "common/optimizer/row_precision.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/tensor_chunk_codec.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/sync_stream.h"
#include "ps_server/wire/push_size.h"

namespace tessera {

GrpcTransport::GrpcTransport(std::shared_ptr<grpc::Channel> channel,
                             GrpcTransportOptions options)
    : options_(std::move(options)),
      channel_(channel),
      stub_(ParameterServer::NewStub(channel)),
      pull_dense_method_("/tessera.ParameterServer/PullDense",
                         grpc::internal::RpcMethod::SERVER_STREAMING, channel),
      push_dense_method_("/tessera.ParameterServer/PushDense",
                         grpc::internal::RpcMethod::CLIENT_STREAMING, channel) {
}

GrpcTransport::~GrpcTransport() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

std::string GrpcTransport::Peer(const char* call) const {
  return absl::StrCat(options_.peer, " ", call);
}

absl::Status GrpcTransport::PullDense(absl::Span<const std::string> shards,
                                      absl::Span<const absl::Span<float>> out,
                                      std::vector<int64_t>* versions,
                                      std::optional<int64_t> sync_step) {
  PullRequest request;
  for (const std::string& s : shards) request.add_shards(s);
  if (versions != nullptr) versions->assign(shards.size(), 0);

  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  if (sync_step.has_value()) AttachSyncPull(*sync_step, &context);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel_.get(), pull_dense_method_, &context, request));
  grpc::ByteBuffer message;
  TensorChunkParser parser;  // reused, so its vectors are allocated once
  size_t index = 0;
  int64_t received = 0;
  bool started = false;
  absl::Status bad;
  while (reader->Read(&message)) {
    if (absl::Status s = parser.Parse(message); !s.ok()) {
      bad = absl::InternalError(
          absl::StrCat(Peer("PullDense"), ": ", s.message()));
      context.TryCancel();
      break;
    }
    const TensorChunkView& chunk = parser.chunk();
    const TensorChunkHeader& header = chunk.header;
    if (started && header.offset == 0) {
      ++index;
      received = 0;
    }
    started = true;
    if (index >= shards.size() || header.name != shards[index]) {
      bad = absl::InternalError(absl::StrCat(
          Peer("PullDense"), ": unexpected chunk of ", header.name));
      context.TryCancel();
      break;
    }
    const int64_t capacity = out[index].size() * sizeof(float);
    if (header.total_bytes != capacity) {
      bad = absl::InvalidArgumentError(absl::StrCat(
          Peer("PullDense"), ": wrong shape: shard ", header.name, " has ",
          header.total_bytes, " bytes, the destination ", capacity));
      context.TryCancel();
      break;
    }
    if (header.offset != received || received + chunk.data_bytes > capacity) {
      bad = absl::InternalError(absl::StrCat(
          Peer("PullDense"), ": chunk of ", header.name, " at byte ",
          header.offset, " does not follow byte ", received));
      context.TryCancel();
      break;
    }
    // The one copy: from gRPC's receive slices into the caller's buffer.
    chunk.CopyDataTo(reinterpret_cast<char*>(out[index].data()) + received);
    received += chunk.data_bytes;
    if (versions != nullptr) (*versions)[index] = header.version;
    parser.Clear();
  }
  parser.Clear();
  grpc::Status status = reader->Finish();
  if (!bad.ok()) return bad;
  if (!status.ok()) return FromGrpcStatus(status, Peer("PullDense"));
  if (shards.empty()) return absl::OkStatus();
  if (index + 1 != shards.size() ||
      received != static_cast<int64_t>(out[index].size() * sizeof(float))) {
    return absl::DataLossError(
        absl::StrCat(Peer("PullDense"), ": stream ended early"));
  }
  return absl::OkStatus();
}

namespace {

// Counts the gRPC slices that reference a caller's memory. gRPC may hold a
// sent slice after the write that carried it completed (until the bytes
// are in the socket), so memory lent to it is only free again once the
// slice's destroy callback ran.
class LentMemory {
 public:
  LentMemory() = default;
  LentMemory(const LentMemory&) = delete;
  LentMemory& operator=(const LentMemory&) = delete;
  ~LentMemory() { WaitUntilReturned(); }

  // A slice over bytes [data, data + size) that gRPC may keep and send
  // from; sub-slices share its count. REQUIRES: size > 0.
  grpc::Slice Lend(const void* data, size_t size) {
    absl::MutexLock lock(&mu_);
    ++lent_;
    return grpc::Slice(const_cast<void*>(data), size, &LentMemory::Returned,
                       this);
  }

  // Blocks until gRPC dropped every slice from Lend(). Once the call is
  // over that is immediate in practice: the last bytes are in the socket.
  void WaitUntilReturned() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* lent) { return *lent == 0; }, &lent_));
  }

 private:
  static void Returned(void* self) {
    LentMemory* lent = static_cast<LentMemory*>(self);
    absl::MutexLock lock(&lent->mu_);
    --lent->lent_;
  }

  absl::Mutex mu_;
  int lent_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

absl::Status GrpcTransport::PushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync) {
  // Declared first, so it is destroyed (and waits) after the call.
  LentMemory lent;
  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  if (sync != nullptr) AttachSyncPush(*sync, &context);
  PushSize size{static_cast<int64_t>(shards.size()), 0};
  for (absl::Span<const float> g : grads) {
    size.bytes += static_cast<int64_t>(g.size() * sizeof(float));
  }
  DeclarePushSize(size, &context);
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
          channel_.get(), push_dense_method_, &context, response));
  // Whole floats per chunk: the server refuses a chunk that splits one.
  const int64_t chunk_bytes = std::max<int64_t>(
      sizeof(float), options_.chunk_bytes / sizeof(float) * sizeof(float));
  TensorChunkHeader header;
  for (size_t i = 0; i < shards.size(); ++i) {
    const int64_t total = grads[i].size() * sizeof(float);
    header.name = shards[i];
    header.total_bytes = total;
    header.version = base_versions.empty() ? 0 : base_versions[i];
    // Each chunk is a small header slice plus a sub-slice of this one: the
    // gradient is sent from the caller's memory, not copied.
    const grpc::Slice gradient =
        total > 0 ? lent.Lend(grads[i].data(), total) : grpc::Slice();
    bool write_failed = false;
    int64_t offset = 0;
    do {
      const int64_t length = std::min(chunk_bytes, total - offset);
      header.offset = offset;
      if (!writer->Write(MakeTensorChunkBuffer(
              header, gradient.sub(offset, offset + length)))) {
        write_failed = true;  // the server ended the call; Finish says why
        break;
      }
      offset += length;
    } while (offset < total);
    if (write_failed) break;
  }
  writer->WritesDone();
  return FromGrpcStatus(writer->Finish(), Peer("PushDense"));
}

absl::Status GrpcTransport::PullRowsOfShard(const RowsPart& part,
                                            absl::Span<float> out,
                                            std::optional<int64_t> sync_step) {
  const absl::Span<const int64_t> ids = part.ids;
  const int64_t row_elements = part.row_elements;
  if (out.size() != ids.size() * row_elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        Peer("PullRows"), ": ", ids.size(), " rows of ", row_elements,
        " floats do not fit a destination of ", out.size()));
  }
  PullRowsRequest request;
  request.set_shard(std::string(part.shard));
  AppendRaw(ids, request.mutable_ids());
  request.set_precision(part.precision);
  const int64_t value_bytes = RowPrecisionBytes(part.precision);
  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  if (sync_step.has_value()) AttachSyncPull(*sync_step, &context);
  std::unique_ptr<grpc::ClientReader<RowsChunk>> reader =
      stub_->PullRows(&context, request);
  RowsChunk chunk;
  int64_t rows_received = 0;
  absl::Status bad;
  while (reader->Read(&chunk)) {
    const int64_t n = chunk.values().size() / value_bytes /
                      std::max<int64_t>(1, row_elements);
    if (chunk.row_elements() != row_elements ||
        chunk.first() != rows_received || chunk.precision() != part.precision ||
        static_cast<int64_t>(chunk.values().size()) !=
            n * row_elements * value_bytes ||
        rows_received + n > static_cast<int64_t>(ids.size())) {
      bad = absl::InvalidArgumentError(
          absl::StrCat(Peer("PullRows"), ": wrong shape: shard ", part.shard,
                       " rows have ", chunk.row_elements(), " elements of ",
                       RowPrecisionName(chunk.precision()), ", expected ",
                       row_elements, " of ", RowPrecisionName(part.precision)));
      context.TryCancel();
      break;
    }
    if (!chunk.values().empty()) {
      // 2-byte rows widen here, exactly: the worker computes in fp32.
      WidenRow(part.precision, chunk.values().data(),
               out.data() + rows_received * row_elements, n * row_elements);
    }
    rows_received += n;
  }
  grpc::Status status = reader->Finish();
  if (!bad.ok()) return bad;
  if (!status.ok()) return FromGrpcStatus(status, Peer("PullRows"));
  if (rows_received != static_cast<int64_t>(ids.size())) {
    return absl::DataLossError(absl::StrCat(Peer("PullRows"), ": got ",
                                            rows_received, " of ", ids.size(),
                                            " rows"));
  }
  return absl::OkStatus();
}

absl::Status GrpcTransport::PushRowsOfShard(const RowsPart& part,
                                            absl::Span<const float> grads,
                                            PushResponse* response,
                                            const SyncPush* sync) {
  const absl::Span<const int64_t> ids = part.ids;
  const int64_t row_elements = part.row_elements;
  if (grads.size() != ids.size() * row_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat(Peer("PushRows"), ": ", ids.size(), " ids of ",
                     row_elements, " floats need ", ids.size() * row_elements,
                     " values, got ", grads.size()));
  }
  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  if (sync != nullptr) AttachSyncPush(*sync, &context);
  const int64_t value_bytes = RowPrecisionBytes(part.precision);
  DeclarePushSize({static_cast<int64_t>(ids.size()),
                   static_cast<int64_t>(grads.size()) * value_bytes},
                  &context);
  std::unique_ptr<grpc::ClientWriter<RowsChunk>> writer =
      stub_->PushRows(&context, response);
  const int64_t rows_per_chunk = std::max<int64_t>(
      1,
      options_.chunk_bytes / std::max<int64_t>(1, row_elements * value_bytes));
  RowsChunk chunk;
  chunk.set_name(std::string(part.shard));
  chunk.set_row_elements(row_elements);
  chunk.set_precision(part.precision);
  int64_t next = 0;
  const int64_t total = static_cast<int64_t>(ids.size());
  do {
    const int64_t n = std::min(rows_per_chunk, total - next);
    chunk.set_first(next);
    chunk.clear_ids();
    AppendRaw(ids.subspan(next, n), chunk.mutable_ids());
    chunk.clear_values();
    if (part.precision == ROW_FP32) {
      AppendRaw(grads.subspan(next * row_elements, n * row_elements),
                chunk.mutable_values());
    } else {
      // Rounded to nearest: a pure function of the gradient, so a sync
      // step's sum is the same on every run (ps_transport.h).
      chunk.mutable_values()->resize(n * row_elements * value_bytes);
      NarrowRowNearest(part.precision, grads.data() + next * row_elements,
                       chunk.mutable_values()->data(), n * row_elements);
    }
    if (!writer->Write(chunk)) break;
    next += n;
  } while (next < total);
  writer->WritesDone();
  return FromGrpcStatus(writer->Finish(), Peer("PushRows"));
}

absl::Status GrpcTransport::PullRows(absl::Span<const RowsPart> parts,
                                     absl::Span<const absl::Span<float>> out,
                                     std::optional<int64_t> sync_step) {
  for (size_t i = 0; i < parts.size(); ++i) {
    if (absl::Status s = PullRowsOfShard(parts[i], out[i], sync_step);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status GrpcTransport::PushRows(
    absl::Span<const RowsPart> parts,
    absl::Span<const absl::Span<const float>> grads, PushResponse* response,
    const SyncPush* sync) {
  response->Clear();
  for (size_t i = 0; i < parts.size(); ++i) {
    PushResponse one;
    if (absl::Status s = PushRowsOfShard(parts[i], grads[i], &one, sync);
        !s.ok()) {
      return s;
    }
    response->MergeFrom(one);
  }
  return absl::OkStatus();
}

namespace {

// A call running on a kept thread. Dropping it waits for the call, which
// uses the caller's buffers until it returns.
class BackgroundCall final : public PsTransport::Pending {
 public:
  ~BackgroundCall() override { done_.WaitForNotification(); }
  absl::Status Finish() override {
    done_.WaitForNotification();
    return status_;
  }
  void Run(const std::function<absl::Status()>& call) {
    status_ = call();
    done_.Notify();
  }

 private:
  absl::Status status_;
  absl::Notification done_;
};

}  // namespace

std::unique_ptr<PsTransport::Pending> GrpcTransport::InBackground(
    std::function<absl::Status()> call) {
  auto pending = std::make_unique<BackgroundCall>();
  BackgroundCall* raw = pending.get();
  absl::MutexLock lock(&mu_);
  queued_.push_back([raw, call = std::move(call)] { raw->Run(call); });
  // A thread per call in flight: start one when every kept one is busy.
  if (static_cast<int>(queued_.size()) > idle_) {
    threads_.emplace_back([this] { ServeBackground(); });
  }
  return pending;
}

void GrpcTransport::ServeBackground() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    ++idle_;
    mu_.Await(absl::Condition(
        +[](GrpcTransport* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return t->stop_ || !t->queued_.empty();
        },
        this));
    --idle_;
    if (queued_.empty()) return;  // stopping, nothing left to run
    std::function<void()> call = std::move(queued_.front());
    queued_.pop_front();
    mu_.Unlock();
    call();
    mu_.Lock();
  }
}

std::unique_ptr<PsTransport::Pending> GrpcTransport::BeginPullDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
    std::optional<int64_t> sync_step) {
  return InBackground([this, shards, out, versions, sync_step] {
    return PullDense(shards, out, versions, sync_step);
  });
}

std::unique_ptr<PsTransport::Pending> GrpcTransport::BeginPushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync) {
  return InBackground([this, shards, grads, base_versions, response, sync] {
    return PushDense(shards, grads, base_versions, response, sync);
  });
}

}  // namespace tessera
