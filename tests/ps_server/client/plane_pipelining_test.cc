// A worker's calls to one parameter server are pipelined on its one
// data-plane connection (#46, plane_channel.h): a server that dies with
// requests queued fails every queued call UNAVAILABLE naming the server,
// and the next call connects afresh; a malformed reply fails them all
// rather than reading out of step; a big pull and a big push at once, and
// a split pull left unfinished while the same thread pushes, do not
// deadlock (the socket buffers fill both ways), on plain TCP and on TLS
// with the token.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/listener.h"
#include "ps_server/client/dense_plane_client.h"
#include "ps_server/client/ps_client.h"
#include "ps_server/wire/dense_wire.h"
#include "tests/ps_server/ps_test_util.h"
#include "tests/skip_unless_required.h"
#include "tests/tls_test_certs.h"

namespace tessera {
namespace plane_pipelining_test {

using ::testing::HasSubstr;

constexpr int64_t kFloats = 8;  // per shard on the fake plane
constexpr char kPeer[] = "ps 9 (fake)";

// A data plane that answers PullDense with kFloats floats of 1.5 per
// shard, except on its first connection: there it reads `requests`
// requests and then hangs up, answers with a header that is not one, or
// answers the first with an error reply that leaves the stream out of step
// (a negative length; a message longer than kMaxFrameTableBytes; a message
// cut off by a hang-up) and the rest as usual.
class FakePlane {
 public:
  enum class First { kHangUp, kGarbage, kNegativeError, kLongError, kCutError };

  FakePlane(First first, int requests) : first_(first), requests_(requests) {
    absl::StatusOr<std::unique_ptr<Listener>> started = Listener::Start(
        "127.0.0.1", 0, [this](Socket& socket) { Serve(socket); });
    if (started.ok()) listener_ = *std::move(started);
  }

  int port() const { return listener_ == nullptr ? 0 : listener_->port(); }
  int64_t connections() const { return listener_->accepted(); }

 private:
  static absl::Status ReadRequest(Socket& socket, FrameHeader* header) {
    if (absl::Status s = ReadNextFrameHeader(socket, header); !s.ok()) {
      return s;
    }
    std::string payload(header->bytes, '\0');
    return socket.ReadFull(payload.data(), payload.size());
  }

  static absl::Status WritePullReply(Socket& socket, uint32_t count) {
    FrameHeader reply;
    reply.op = FrameOp::kPullDenseReply;
    reply.count = count;
    char head[kFrameHeaderBytes];
    EncodeFrameHeader(reply, head);
    if (absl::Status s = socket.WriteFull(head, sizeof(head)); !s.ok()) {
      return s;
    }
    const std::vector<float> values(kFloats, 1.5f);
    for (uint32_t i = 0; i < count; ++i) {
      char part[kDensePartHeaderBytes];
      EncodeDensePartHeader(1, kFloats * sizeof(float), part);
      if (absl::Status s = socket.WriteFull(part, sizeof(part)); !s.ok()) {
        return s;
      }
      if (absl::Status s =
              socket.WriteFull(values.data(), kFloats * sizeof(float));
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  // An error reply of the right op whose length is `bytes`, followed by
  // `sent` bytes of message.
  static absl::Status WriteBadError(Socket& socket, int64_t bytes,
                                    int64_t sent) {
    FrameHeader reply;
    reply.op = FrameOp::kPullDenseReply;
    reply.code = static_cast<int32_t>(absl::StatusCode::kNotFound);
    reply.bytes = bytes;
    char head[kFrameHeaderBytes];
    EncodeFrameHeader(reply, head);
    if (absl::Status s = socket.WriteFull(head, sizeof(head)); !s.ok()) {
      return s;
    }
    const std::string message(sent, 'm');
    return socket.WriteFull(message.data(), message.size());
  }

  // The first connection's misbehaviour, after its requests were read.
  absl::Status Misbehave(Socket& socket, uint32_t count) {
    switch (first_) {
      case First::kHangUp:
        return absl::OkStatus();
      case First::kGarbage: {
        const char junk[kFrameHeaderBytes] = "this is not a frame header";
        return socket.WriteFull(junk, sizeof(junk));
      }
      case First::kCutError:
        return WriteBadError(socket, 100, 10);
      case First::kNegativeError:
      case First::kLongError: {
        absl::Status s =
            first_ == First::kNegativeError
                ? WriteBadError(socket, -1, 0)
                : WriteBadError(socket, kMaxFrameTableBytes + 1, 64);
        // The rest in step, as a client that trusted the length would
        // expect them.
        for (int i = 1; i < requests_ && s.ok(); ++i) {
          s = WritePullReply(socket, count);
        }
        return s;
      }
    }
    return absl::OkStatus();
  }

  void Serve(Socket& socket) {
    const bool first = served_.fetch_add(1) == 0;
    if (!AcceptDataPlaneHandshake(socket, "").ok()) return;
    FrameHeader request;
    if (first) {
      for (int i = 0; i < requests_; ++i) {
        if (!ReadRequest(socket, &request).ok()) return;
      }
      if (!Misbehave(socket, request.count).ok()) return;
      if (first_ == First::kHangUp || first_ == First::kCutError) return;
      char byte;
      (void)socket.ReadFull(&byte, 1);  // until the client hangs up
      return;
    }
    while (ReadRequest(socket, &request).ok()) {
      if (!WritePullReply(socket, request.count).ok()) return;
    }
  }

  const First first_;
  const int requests_;
  std::atomic<int> served_{0};
  std::unique_ptr<Listener> listener_;
};

class FakePlaneTest : public ::testing::Test {
 protected:
  std::unique_ptr<DensePlaneClient> Client(const FakePlane& plane) {
    DensePlaneClientOptions options;
    options.host = "127.0.0.1";
    options.peer = kPeer;
    options.timeout_s = 20;
    options.resolve_port = [this,
                            port = plane.port()]() -> absl::StatusOr<int> {
      ++resolves_;
      return port;
    };
    return std::make_unique<DensePlaneClient>(options);
  }

  static absl::Status Pull(DensePlaneClient& client, std::vector<float>* out) {
    out->assign(kFloats, 0.0f);
    const std::vector<std::string> names = {"w"};
    const std::vector<absl::Span<float>> spans = {absl::MakeSpan(*out)};
    return client.PullDense(names, spans, nullptr);
  }

  // `threads` pulls at once; their statuses.
  static std::vector<absl::Status> PullsAtOnce(DensePlaneClient& client,
                                               int threads) {
    std::vector<absl::Status> results(threads);
    std::vector<std::thread> pulls;
    for (int t = 0; t < threads; ++t) {
      pulls.emplace_back([&client, &results, t] {
        std::vector<float> out;
        results[t] = Pull(client, &out);
      });
    }
    for (std::thread& t : pulls) t.join();
    return results;
  }

  // kThreads pulls queued on the first connection, which answers as
  // `first` says; the next pull connects afresh.
  void ExpectQueuedCallsFailThenReconnect(FakePlane::First first);

  std::atomic<int> resolves_{0};
};

TEST_F(FakePlaneTest, AServerThatDiesFailsEveryQueuedCallAndTheNextReconnects) {
  constexpr int kThreads = 4;
  // It hangs up once all four requests are queued on the connection.
  FakePlane plane(FakePlane::First::kHangUp, kThreads);
  ASSERT_GT(plane.port(), 0);
  std::unique_ptr<DensePlaneClient> client = Client(plane);
  for (const absl::Status& s : PullsAtOnce(*client, kThreads)) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr("ps 9 (fake) PullDense: ")) << s;
  }
  std::vector<float> out;
  absl::Status s = Pull(*client, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, std::vector<float>(kFloats, 1.5f));
  EXPECT_EQ(plane.connections(), 2);
  EXPECT_EQ(resolves_.load(), 2);  // the port asked again
}

void FakePlaneTest::ExpectQueuedCallsFailThenReconnect(FakePlane::First first) {
  constexpr int kThreads = 3;
  FakePlane plane(first, kThreads);
  ASSERT_GT(plane.port(), 0);
  std::unique_ptr<DensePlaneClient> client = Client(plane);
  int broke = 0;
  for (const absl::Status& s : PullsAtOnce(*client, kThreads)) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr("ps 9 (fake) PullDense: ")) << s;
    if (s.code() == absl::StatusCode::kUnavailable &&
        absl::StrContains(s.message(), "the connection broke")) {
      ++broke;
    }
  }
  // The one whose reply it was gets the reason itself, the others the
  // broken connection.
  EXPECT_EQ(broke, kThreads - 1);
  std::vector<float> out;
  absl::Status s = Pull(*client, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, std::vector<float>(kFloats, 1.5f));
  EXPECT_EQ(plane.connections(), 2);
}

TEST_F(FakePlaneTest, AMalformedReplyFailsEveryQueuedCallNotReadOutOfStep) {
  ExpectQueuedCallsFailThenReconnect(FakePlane::First::kGarbage);
}

// Error replies whose code and op are right but whose message was not
// read whole: the stream is out of step all the same (#46).
TEST_F(FakePlaneTest, AnErrorReplyWithANegativeLengthBreaksTheConnection) {
  ExpectQueuedCallsFailThenReconnect(FakePlane::First::kNegativeError);
}

TEST_F(FakePlaneTest, AnErrorReplyTooLongToReadBreaksTheConnection) {
  ExpectQueuedCallsFailThenReconnect(FakePlane::First::kLongError);
}

TEST_F(FakePlaneTest, AnErrorReplyCutOffBreaksTheConnection) {
  ExpectQueuedCallsFailThenReconnect(FakePlane::First::kCutError);
}

// 4M floats, 16 MiB: more than the socket buffers of both ends hold.
const ShardDef& MuxBigShard() {
  static const ShardDef* def = new ShardDef(ps_test::MakeShardDef(
      "big", 0, {2048, 2048}, 0, 2048, ps_test::ConstantInit(1.0f)));
  return *def;
}

const ShardDef& MuxRowTable() {
  static const ShardDef* def = new ShardDef(ps_test::MakeShardDef(
      "emb", 0, {100, 4}, 0, 100, ps_test::ConstantInit(3.0f)));
  return *def;
}

absl::Status CreateMuxShards(PsClient& client) {
  CreateShardsRequest request;
  *request.add_shards() = MuxBigShard();
  *request.add_shards() = MuxRowTable();
  *request.mutable_optimizer() = ps_test::SgdConfig(1.0f);
  CreateShardsResponse response;
  return client.CreateShards(request, &response);
}

// The gradients are 0, so every pull reads the initial values.
absl::Status BigPull(PsClient& client) {
  std::vector<float> values(ps_test::NumElements(MuxBigShard()), -1.0f);
  const std::vector<absl::Span<float>> out = {absl::MakeSpan(values)};
  if (absl::Status s = client.PullDense({MuxBigShard().name()}, out, nullptr);
      !s.ok()) {
    return s;
  }
  return values == std::vector<float>(values.size(), 1.0f)
             ? absl::OkStatus()
             : absl::InternalError("wrong values pulled");
}

absl::Status BigPush(PsClient& client) {
  const std::vector<float> grad(ps_test::NumElements(MuxBigShard()), 0.0f);
  const std::vector<absl::Span<const float>> grads = {grad};
  PushResponse response;
  return client.PushDense({MuxBigShard().name()}, grads, {}, &response);
}

absl::Status RowsRoundTrip(PsClient& client, int64_t id) {
  const std::vector<int64_t> ids = {id, 99 - id};
  std::vector<float> rows(ids.size() * 4, -1.0f);
  if (absl::Status s =
          client.PullRows(MuxRowTable().name(), ids, 4, absl::MakeSpan(rows));
      !s.ok()) {
    return s;
  }
  if (rows != std::vector<float>(rows.size(), 3.0f)) {
    return absl::InternalError("wrong rows pulled");
  }
  const std::vector<float> grads(rows.size(), 0.0f);
  PushResponse response;
  return client.PushRows(MuxRowTable().name(), ids, 4, grads, &response);
}

// First, on the fresh connection (its receive buffer not yet grown by
// reading), one thread leaves a big pull unfinished while it pushes: the
// pull's reply must be read before the push can get through. Then a big
// pull, a big push and row calls from their own threads at once.
void BigCallsAtOnce(PsClient& client) {
  std::vector<float> values(ps_test::NumElements(MuxBigShard()), -1.0f);
  const std::vector<absl::Span<float>> out = {absl::MakeSpan(values)};
  // Outlives Finish: the split call's reader keeps the Span.
  const std::vector<std::string> names = {MuxBigShard().name()};
  std::unique_ptr<PsClient::Pending> pull =
      client.BeginPullDense(names, out, nullptr);
  absl::Status s = BigPush(client);
  EXPECT_TRUE(s.ok()) << s;
  s = pull->Finish();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(values, std::vector<float>(values.size(), 1.0f));

  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    for (int i = 0; i < 3 && results[0].ok(); ++i) results[0] = BigPull(client);
  });
  threads.emplace_back([&] {
    for (int i = 0; i < 3 && results[1].ok(); ++i) results[1] = BigPush(client);
  });
  threads.emplace_back([&] {
    for (int i = 0; i < 20 && results[2].ok(); ++i) {
      results[2] = RowsRoundTrip(client, i);
    }
  });
  for (std::thread& t : threads) t.join();
  for (const absl::Status& r : results) EXPECT_TRUE(r.ok()) << r;
}

TEST(PlanePipeliningTest, BigPullAndBigPushAtOnceOnOneConnection) {
  ps_test::TestPsServer server;
  ASSERT_TRUE(server.started());
  std::unique_ptr<PsClient> client = server.NewClient(DataPlaneKind::kTcp);
  absl::Status s = CreateMuxShards(*client);
  ASSERT_TRUE(s.ok()) << s;
  BigCallsAtOnce(*client);
  EXPECT_EQ(server.data_plane_connections(), 1);
}

TEST(PlanePipeliningTest, TlsWithTheTokenCarriesEveryCallOnOneConnection) {
  TestCertificates certs("plane_pipelining");
  if (certs.error()) {
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireTls)
        << "openssl could not make test certificates: " << *certs.error();
  }
  constexpr char kToken[] = "pipelining-token";
  ps_test::TestPsServer server(RpcAuth(kToken), certs.Files("server", "ca"));
  ASSERT_TRUE(server.started());
  std::unique_ptr<PsClient> client =
      server.NewTlsClient(kToken, certs.Files("client", "ca"));
  absl::Status s = CreateMuxShards(*client);
  ASSERT_TRUE(s.ok()) << s;
  BigCallsAtOnce(*client);
  EXPECT_EQ(server.data_plane_connections(), 1);
}

}  // namespace plane_pipelining_test
}  // namespace tessera
