#include "ps_server/data_plane/dense_plane_server.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/tls.h"
#include "glog/logging.h"
#include "ps_server/dense_push_apply.h"
#include "ps_server/gradient_check.h"
#include "ps_server/wire/dense_wire.h"

namespace tessera {
namespace {

// A pull holds a shard's shared lock for one chunk of at most this.
constexpr int64_t kPullChunkBytes = int64_t{4} << 20;
// On the pool, a pull copies a piece of at most this under the lock, and
// sends it after; the copy stays in cache until the kernel copies it into
// the socket.
constexpr int64_t kPullPieceBytes = int64_t{1} << 20;
// A push is received in pieces of this, each checked for NaN/Inf while it
// is still in cache.
constexpr int64_t kPushPieceBytes = int64_t{1} << 20;
// No single push declares more (a shard is at most 2^40 floats).
constexpr int64_t kMaxPushBytes = int64_t{1} << 44;
// The least bytes of a table entry: a pull's name (its 2-byte length), a
// push's name, base version and size.
constexpr int64_t kMinPullEntryBytes = 2;
constexpr int64_t kMinPushEntryBytes = 2 + 8 + 8;

absl::Status ReadTable(Socket& socket, const FrameHeader& request,
                       std::string* table) {
  if (request.bytes > kMaxFrameTableBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data plane: a request table of ", request.bytes,
                     " bytes is more than any request needs"));
  }
  table->resize(request.bytes);
  return socket.ReadFull(table->data(), table->size());
}

// A shard whose push is being received.
struct Incoming {
  std::shared_ptr<Shard> shard;
  std::unique_ptr<float[]> grad;  // the shard's reused buffer
  int64_t bytes = 0;
};

// A push's table: each shard's name and gradient bytes, the bytes
// bounded by kMaxPushBytes in all.
absl::Status ReadPushTable(const std::string& table, uint32_t count,
                           std::vector<std::string>* names,
                           std::vector<int64_t>* sizes) {
  // Each entry takes at least kMinPushEntryBytes of the table: a count
  // past that is a broken frame, refused before it sizes anything.
  if (static_cast<int64_t>(count) * kMinPushEntryBytes >
      static_cast<int64_t>(table.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("data plane: a push table of ", table.size(),
                     " bytes cannot name ", count, " shards"));
  }
  WireReader reader(table);
  names->resize(count);
  sizes->resize(count);
  int64_t declared = 0;
  for (uint32_t i = 0; i < count; ++i) {
    int64_t base_version;
    if (!reader.ReadString16(&(*names)[i]) ||
        !reader.ReadInt64(&base_version) || !reader.ReadInt64(&(*sizes)[i]) ||
        (*sizes)[i] < 0 || (*sizes)[i] > kMaxPushBytes - declared) {
      return absl::InvalidArgumentError("data plane: malformed push table");
    }
    declared += (*sizes)[i];
  }
  if (!reader.done()) {
    return absl::InvalidArgumentError("data plane: malformed push table");
  }
  return absl::OkStatus();
}

// The shards a push names, checked: each known, of the gradient's size
// and named once. The first refusal; the shards matched before it.
absl::Status MatchShards(ShardStore* store,
                         const std::vector<std::string>& names,
                         const std::vector<int64_t>& sizes,
                         std::vector<Incoming>* incoming) {
  incoming->reserve(names.size());
  absl::Status refused;
  for (size_t i = 0; i < names.size() && refused.ok(); ++i) {
    absl::StatusOr<std::shared_ptr<Shard>> shard = store->Find(names[i]);
    if (!shard.ok()) {
      refused = shard.status();
      break;
    }
    if (sizes[i] != (*shard)->byte_size()) {
      refused = absl::InvalidArgumentError(
          absl::StrCat("wrong shape: shard ", names[i], " has shape [",
                       absl::StrJoin((*shard)->def().shape().dims(), ","),
                       "] (", (*shard)->byte_size(),
                       " bytes) but the gradient has ", sizes[i], " bytes"));
      break;
    }
    for (const Incoming& seen : *incoming) {
      if (seen.shard == *shard) {
        refused = absl::InvalidArgumentError(
            absl::StrCat("shard ", names[i], " appears twice in one push"));
      }
    }
    if (!refused.ok()) break;
    incoming->push_back({*shard, nullptr, sizes[i]});
  }
  return refused;
}

// Receives every declared byte: into the shards' buffers while the push
// is valid, else into scratch, so the connection stays in step. A
// non-finite gradient refuses the push (*refused); the socket's error.
absl::Status ReceiveGradients(Socket& socket,
                              const std::vector<std::string>& names,
                              const std::vector<int64_t>& sizes,
                              std::vector<Incoming>& incoming,
                              std::vector<char>* scratch,
                              absl::Status* refused) {
  absl::Status io;
  for (size_t i = 0; i < names.size() && io.ok(); ++i) {
    Incoming* in = refused->ok() ? &incoming[i] : nullptr;
    if (in != nullptr) in->grad = in->shard->AcquireBuffer();
    for (int64_t done = 0; done < sizes[i] && io.ok();) {
      const int64_t piece = std::min(kPushPieceBytes, sizes[i] - done);
      if (in == nullptr) {
        scratch->resize(kPushPieceBytes);
        io = socket.ReadFull(scratch->data(), piece);
      } else {
        float* dst = in->grad.get() + done / sizeof(float);
        io = socket.ReadFull(dst, piece);
        const size_t floats = piece / sizeof(float);
        if (io.ok() && refused->ok() &&
            internal::AnyNonFinite(dst, floats) != 0) {
          *refused = internal::NameNonFinite(
              absl::MakeConstSpan(dst, floats), names[i],
              done / static_cast<int64_t>(sizeof(float)));
        }
      }
      done += piece;
    }
  }
  return io;
}

// A push's answer: the error, or the response after the update.
absl::Status WritePushReply(Socket& socket, uint32_t count,
                            const absl::Status& status,
                            const PushResponse& response) {
  if (!status.ok()) {
    return WriteErrorReply(socket, FrameOp::kPushDenseReply, status);
  }
  const std::string bytes = response.SerializeAsString();
  FrameHeader reply;
  reply.op = FrameOp::kPushDenseReply;
  reply.count = count;
  reply.bytes = static_cast<int64_t>(bytes.size());
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(reply, head);
  const iovec parts[2] = {{head, sizeof(head)},
                          {const_cast<char*>(bytes.data()), bytes.size()}};
  return socket.WriteAll(parts);
}

// A pull's table: the shards it names. Returns an error only for a
// malformed table (the connection closes); a shard this server does not
// hold sets `refused` (the request gets an error reply).
absl::Status FindPullShards(const std::string& table, uint32_t count,
                            ShardStore* store,
                            std::vector<std::shared_ptr<Shard>>* shards,
                            absl::Status* refused) {
  if (static_cast<int64_t>(count) * kMinPullEntryBytes >
      static_cast<int64_t>(table.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("data plane: a pull table of ", table.size(),
                     " bytes cannot name ", count, " shards"));
  }
  WireReader reader(table);
  shards->reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    std::string name;
    if (!reader.ReadString16(&name)) {
      return absl::InvalidArgumentError("data plane: malformed pull table");
    }
    if (!refused->ok()) continue;
    absl::StatusOr<std::shared_ptr<Shard>> shard = store->Find(name);
    if (!shard.ok()) {
      *refused = shard.status();
      continue;
    }
    shards->push_back(*std::move(shard));
  }
  if (!reader.done()) {
    return absl::InvalidArgumentError("data plane: malformed pull table");
  }
  return absl::OkStatus();
}

// Sends a pull reply's values chunk by chunk; the frame header goes out
// with the first chunk, in one system call. `copy` null: each chunk is
// sent straight from the shard under its shared lock; else copied into
// `copy` under the lock and sent after it.
absl::Status WritePullValues(Socket& socket,
                             const std::vector<std::shared_ptr<Shard>>& shards,
                             std::vector<float>* copy) {
  FrameHeader reply;
  reply.op = FrameOp::kPullDenseReply;
  reply.count = static_cast<uint32_t>(shards.size());
  for (const auto& shard : shards) {
    reply.bytes += kDensePartHeaderBytes + shard->byte_size();
  }
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(reply, head);
  if (shards.empty()) return socket.WriteFull(head, sizeof(head));
  bool head_sent = false;
  const int64_t chunk =
      (copy == nullptr ? kPullChunkBytes : kPullPieceBytes) / sizeof(float);
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::shared_ptr<Shard>& shard = shards[k];
    const int64_t total = shard->num_elements();
    int64_t offset = 0;
    do {
      const int64_t length = std::min(chunk, total - offset);
      // One chunk with its headers; `version` is the chunk's.
      auto send = [&](absl::Span<const float> values, int64_t version) {
        char part[kDensePartHeaderBytes];
        iovec parts[3];
        size_t n = 0;
        if (!head_sent) parts[n++] = {head, sizeof(head)};
        head_sent = true;
        if (offset == 0) {
          // The version of the first chunk; a push may land between
          // chunks of a large shard, as on the gRPC path.
          EncodeDensePartHeader(version, shard->byte_size(), part);
          parts[n++] = {part, sizeof(part)};
        }
        parts[n++] = {const_cast<float*>(values.data()),
                      values.size() * sizeof(float)};
        const bool last = k + 1 == shards.size() && offset + length >= total;
        return socket.WriteAll(absl::MakeConstSpan(parts, n), !last);
      };
      absl::Status s;
      if (copy == nullptr) {
        s = shard->VisitValues(offset, length, send);
      } else {
        int64_t version = 0;
        copy->resize(std::max(copy->size(), static_cast<size_t>(length)));
        s = shard->VisitValues(
            offset, length, [&](absl::Span<const float> values, int64_t v) {
              std::copy(values.begin(), values.end(), copy->begin());
              version = v;
              return absl::OkStatus();
            });
        if (s.ok()) {
          s = send(absl::MakeConstSpan(copy->data(), length), version);
        }
      }
      if (!s.ok()) return s;
      offset += length;
    } while (offset < total);
  }
  return absl::OkStatus();
}

using PushAnswer =
    absl::FunctionRef<void(const absl::Status&, const PushResponse&)>;
// Applies a received push and calls its argument with the outcome.
using PushUpdate = std::function<void(PushAnswer)>;

// Runs a push's update and writes its answer. `applier` null: on this
// thread, and the answer goes out once the shards' locks are released;
// else on the connection's applier thread, answering under them.
absl::Status AnswerPush(Socket& socket, uint32_t count, PushUpdate update,
                        std::unique_ptr<SerialExecutor>* applier) {
  if (applier == nullptr) {
    // The pool: answering under the shards' locks (as the applier does)
    // wakes the client, which on a core it shares with this thread takes
    // it over, and every pool thread that wants the shards then waits for
    // this one: bench_connections saw the pool's threads blocked on one
    // shard's lock most of the time.
    absl::Status status;
    PushResponse response;
    update([&](const absl::Status& s, const PushResponse& r) {
      status = s;
      response = r;
    });
    return WritePushReply(socket, count, status, response);
  }
  // The update runs on the connection's applier thread: it answers once
  // the shards are locked, and this thread goes on to receive the next
  // request (into other buffers of the shard's pool) while the optimizer
  // runs, so a stream of pushes costs the transfer, not transfer + update.
  // This thread waits only for the answer, and reads the next request
  // only after it has been written: the worker may pipeline more calls on
  // this connection meanwhile (#46), but they wait in the socket, so this
  // thread's next reply never overlaps the applier's write.
  absl::Notification answered;
  absl::Status written;
  auto apply = [update = std::move(update), count, &socket, &answered,
                &written] {
    update([&](const absl::Status& status, const PushResponse& response) {
      written = WritePushReply(socket, count, status, response);
      // Nothing on this thread touches `socket`, `written` or `answered`
      // after this.
      answered.Notify();
    });
  };
  if (*applier == nullptr) *applier = std::make_unique<SerialExecutor>();
  (*applier)->Post(std::move(apply));
  answered.WaitForNotification();
  return written;
}

}  // namespace

// A connection of the event pool, served one request at a time. It keeps
// no buffers: a request runs start to end on one pool thread, so the
// buffers it reuses are the thread's (thousands of idle connections cost
// none), and one that grew for a large request is given back after it.
class DensePlaneServer::PooledPlaneConnection : public PooledConnection {
 public:
  explicit PooledPlaneConnection(DensePlaneServer* server) : server_(server) {}

  bool ServeOne(Socket& socket, const char* head) override {
    thread_local ConnectionState state;
    FrameHeader request;
    absl::Status s = DecodeFrameHeader(head, &request);
    if (s.ok()) s = server_->ServeRequest(socket, request, &state, false);
    if (!s.ok() && s.code() != absl::StatusCode::kUnavailable) {
      LOG(WARNING) << "data plane: closing a connection: " << s;
    }
    ShrinkLarge(&state);
    return s.ok();
  }

  // Row requests are the small ones: a batch's rows (in the benches 64 rows
  // of 16 floats, 4 KiB) against a whole dense shard each way (64 KiB and
  // more). Their sizes follow the header, so the op decides.
  bool Small(const char* head) override {
    if (!server_->options_.rows_first) return true;
    FrameHeader request;
    if (!DecodeFrameHeader(head, &request).ok()) return true;
    return request.op == FrameOp::kPullRows || request.op == FrameOp::kPushRows;
  }

 private:
  // A pool thread keeps what a steady stream of ordinary requests needs,
  // not the peak of the largest.
  static void ShrinkLarge(ConnectionState* state) {
    constexpr size_t kKeepBytes = size_t{4} << 20;
    RowPlaneService::Scratch& rows = state->rows;
    if (rows.values.capacity() * sizeof(float) > kKeepBytes) {
      std::vector<float>().swap(rows.values);
    }
    if (rows.ids.capacity() * sizeof(int64_t) > kKeepBytes) {
      std::vector<int64_t>().swap(rows.ids);
    }
    for (RowPlaneService::Scratch::Part& part : rows.parts) {
      if (part.grads.capacity() * sizeof(float) > kKeepBytes) {
        std::vector<float>().swap(part.grads);
      }
      if (part.ids.capacity() * sizeof(int64_t) > kKeepBytes) {
        std::vector<int64_t>().swap(part.ids);
      }
      part.table.reset();  // the table, not kept alive by an idle thread
    }
    if (state->scratch.capacity() > kKeepBytes) {
      std::vector<char>().swap(state->scratch);
    }
    if (state->pulled.capacity() * sizeof(float) > kKeepBytes) {
      std::vector<float>().swap(state->pulled);
    }
  }

  DensePlaneServer* const server_;
};

absl::StatusOr<std::unique_ptr<DensePlaneServer>> DensePlaneServer::Start(
    PsCore* core, DensePlaneServerOptions options) {
  if (options.small_per_large < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DensePlaneServerOptions::small_per_large must be at least 1, not ",
        options.small_per_large));
  }
  std::unique_ptr<DensePlaneServer> server(
      new DensePlaneServer(core, std::move(options)));
  DensePlaneServer* self = server.get();
  std::shared_ptr<const DataPlaneTls> tls;
  if (self->options_.tls.has_value()) {
    absl::StatusOr<std::shared_ptr<const DataPlaneTls>> made =
        DataPlaneTls::Create(*self->options_.tls, DataPlaneTls::Role::kServer);
    if (!made.ok()) return made.status();
    tls = *std::move(made);
  }
  const double handshake_timeout_s = std::min(self->options_.timeout_s, 30.0);
  if (self->options_.serving == DataPlaneServing::kEventPool) {
    EventListenerOptions events;
    events.host = self->options_.host;
    events.port = self->options_.port;
    events.threads = self->options_.threads;
    events.job_token = self->options_.job_token;
    events.tls = std::move(tls);
    events.handshake_timeout_s = handshake_timeout_s;
    events.timeout_s = self->options_.timeout_s;
    events.small_per_large = self->options_.small_per_large;
    absl::StatusOr<std::unique_ptr<EventListener>> listener =
        EventListener::Start(std::move(events), [self] {
          return std::make_unique<PooledPlaneConnection>(self);
        });
    if (!listener.ok()) return listener.status();
    server->events_ = *std::move(listener);
  } else {
    absl::StatusOr<std::unique_ptr<Listener>> listener = Listener::Start(
        self->options_.host, self->options_.port,
        [self](Socket& socket) { self->Serve(socket); }, std::move(tls),
        handshake_timeout_s);
    if (!listener.ok()) return listener.status();
    server->listener_ = *std::move(listener);
  }
  core->set_data_plane_port(server->port());
  return server;
}

DensePlaneServer::DensePlaneServer(PsCore* core,
                                   DensePlaneServerOptions options)
    : core_(core),
      store_(core->store()),
      options_(std::move(options)),
      rows_(core) {}

DensePlaneServer::~DensePlaneServer() {
  core_->set_data_plane_port(0);
  listener_.reset();
  events_.reset();
}

int DensePlaneServer::port() const {
  return events_ != nullptr ? events_->port() : listener_->port();
}

int DensePlaneServer::pool_threads() const {
  return events_ != nullptr ? events_->threads() : 0;
}

int64_t DensePlaneServer::connections_accepted() const {
  return events_ != nullptr ? events_->accepted() : listener_->accepted();
}

void DensePlaneServer::Serve(Socket& socket) {
  // The handshake may wait on a peer that never answers: bound it.
  socket.SetTimeout(std::min(options_.timeout_s, 30.0)).IgnoreError();
  if (absl::Status s = AcceptDataPlaneHandshake(socket, options_.job_token);
      !s.ok()) {
    LOG(WARNING) << "data plane: connection refused: " << s;
    return;
  }
  // One timeout for the connection's life: idle connections wait for the
  // next step as long as they like (ReadNextFrameHeader), while a transfer
  // under way must make progress.
  socket.SetTimeout(options_.timeout_s).IgnoreError();
  ConnectionState state;
  while (true) {
    FrameHeader request;
    absl::Status s = ReadNextFrameHeader(socket, &request);
    if (s.ok()) s = ServeRequest(socket, request, &state, true);
    if (!s.ok()) {
      if (s.code() != absl::StatusCode::kUnavailable) {
        LOG(WARNING) << "data plane: closing a connection: " << s;
      }
      return;
    }
  }
}

absl::Status DensePlaneServer::ServeRequest(Socket& socket,
                                            const FrameHeader& request,
                                            ConnectionState* state,
                                            bool overlap) {
  switch (request.op) {
    case FrameOp::kPullDense:
      return ServePull(socket, request, overlap ? nullptr : &state->pulled);
    case FrameOp::kPushDense:
      return ServePush(socket, request, &state->scratch,
                       overlap ? &state->applier : nullptr);
    case FrameOp::kPullRows:
      return rows_.ServePull(socket, request, &state->rows);
    case FrameOp::kPushRows:
      return rows_.ServePush(socket, request, &state->rows);
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "data plane: unknown op ", static_cast<int>(request.op)));
  }
}

absl::Status DensePlaneServer::ServePull(Socket& socket,
                                         const FrameHeader& request,
                                         std::vector<float>* copy) {
  std::string table;
  if (absl::Status s = ReadTable(socket, request, &table); !s.ok()) return s;
  core_->CountPull();
  std::vector<std::shared_ptr<Shard>> shards;
  absl::Status refused;
  if (absl::Status s =
          FindPullShards(table, request.count, store_, &shards, &refused);
      !s.ok()) {
    return s;
  }
  if (!refused.ok()) {
    return WriteErrorReply(socket, FrameOp::kPullDenseReply, refused);
  }
  // A sync pull reads the values after every step before its own.
  absl::StatusOr<std::optional<int64_t>> sync_step = SyncPullOf(request);
  if (!sync_step.ok()) {
    return WriteErrorReply(socket, FrameOp::kPullDenseReply,
                           sync_step.status());
  }
  core_->sync_steps()->ApplyBefore(*sync_step);
  return WritePullValues(socket, shards, copy);
}

absl::Status DensePlaneServer::ServePush(
    Socket& socket, const FrameHeader& request, std::vector<char>* scratch,
    std::unique_ptr<SerialExecutor>* applier) {
  std::string table;
  if (absl::Status s = ReadTable(socket, request, &table); !s.ok()) return s;
  core_->CountPush();
  // The declaration first: it says how many bytes follow, whatever else
  // is wrong with the request.
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  if (absl::Status s = ReadPushTable(table, request.count, &names, &sizes);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::optional<SyncPush>> tag = SyncPushOf(request);
  absl::Status refused = tag.status();
  const std::optional<SyncPush> sync = tag.ok() ? *tag : std::nullopt;
  std::vector<Incoming> incoming;
  if (refused.ok()) refused = MatchShards(store_, names, sizes, &incoming);
  const absl::Status io =
      ReceiveGradients(socket, names, sizes, incoming, scratch, &refused);
  auto release = [&] {
    for (Incoming& in : incoming) {
      if (in.grad != nullptr) in.shard->ReleaseBuffer(std::move(in.grad));
    }
  };
  if (!io.ok()) {
    // Cut off midway: nothing is applied.
    release();
    return io;
  }
  if (!refused.ok()) {
    release();
    return WriteErrorReply(socket, FrameOp::kPushDenseReply, refused);
  }
  auto job = std::make_shared<std::vector<Incoming>>(std::move(incoming));
  // Applies the push; `answer` is ApplyDensePush's.
  PushUpdate update = [this, job, sync](PushAnswer answer) {
    std::vector<DenseGradient> grads;
    grads.reserve(job->size());
    for (Incoming& in : *job) {
      grads.push_back({in.shard, absl::MakeConstSpan(
                                     in.grad.get(), in.shard->num_elements())});
    }
    ApplyDensePush(grads, sync, core_->sync_steps(), answer);
    for (Incoming& in : *job) in.shard->ReleaseBuffer(std::move(in.grad));
  };
  return AnswerPush(socket, request.count, std::move(update), applier);
}

}  // namespace tessera
