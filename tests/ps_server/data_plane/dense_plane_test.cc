// What only the TCP data plane has to show (the cases both planes share
// run in ps_service_dense_test and ps_service_sync_test): a push cut off
// midway applies nothing, a broken or silent connection reads as gRPC's
// UNAVAILABLE or DEADLINE_EXCEEDED, the job token is proven on it, and a
// server that announces no data plane is still reached over gRPC. Real
// sockets on loopback throughout.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/listener.h"
#include "common/data_plane/socket.h"
#include "ps_server/client/dense_plane_client.h"
#include "tests/ps_server/data_plane/dense_plane_test_util.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::InitialValues;
using ps_test::MakeShardDef;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const ShardDef& BigShard() {
  // 10000 floats, 40000 bytes.
  static const ShardDef* def = new ShardDef(MakeShardDef(
      "big", 0, {2000, 5}, 0, 2000, ps_test::GlorotInit(2000, 5, 7)));
  return *def;
}

void Create(PsClient& client, const ShardDef& def) {
  CreateShardsRequest request;
  *request.add_shards() = def;
  *request.mutable_optimizer() = ps_test::SgdConfig(0.5f);
  CreateShardsResponse response;
  ASSERT_TRUE(client.CreateShards(request, &response).ok());
}

std::vector<float> PullValues(PsClient& client, const ShardDef& def,
                              int64_t* version) {
  std::vector<float> out(ps_test::NumElements(def));
  std::vector<absl::Span<float>> spans = {absl::MakeSpan(out)};
  std::vector<int64_t> versions;
  absl::Status s = client.PullDense({def.name()}, spans, &versions);
  EXPECT_TRUE(s.ok()) << s;
  *version = versions.empty() ? -1 : versions[0];
  return out;
}

TEST(DensePlaneTest, CutOffPushAppliesNothing) {
  ps_test::TestPsServer server;
  ASSERT_TRUE(server.started());
  std::unique_ptr<PsClient> client = server.NewClient(DataPlaneKind::kTcp);
  Create(*client, BigShard());

  // Declare 40000 gradient bytes, send 4096 of them, hang up.
  absl::StatusOr<Socket> socket =
      Socket::Connect("127.0.0.1", server.data_plane_port(), 5);
  ASSERT_TRUE(socket.ok());
  ASSERT_TRUE(OfferDataPlaneHandshake(*socket, "").ok());
  ASSERT_TRUE(
      dense_plane_test::WriteCutOffPush(*socket, BigShard().name(), 40000, 4096)
          .ok());
  socket->Close();

  // The server has seen the hang-up once another push was served after
  // it on a connection of its own; give it a moment either way.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int64_t version = -1;
  EXPECT_THAT(PullValues(*client, BigShard(), &version),
              ElementsAreArray(InitialValues(BigShard())));
  EXPECT_EQ(version, 0);

  // A whole push over the same plane is applied.
  std::vector<float> grad(10000, 2.0f);
  std::vector<absl::Span<const float>> grads = {absl::MakeConstSpan(grad)};
  PushResponse response;
  ASSERT_TRUE(
      client->PushDense({BigShard().name()}, grads, {}, &response).ok());
  ASSERT_EQ(response.applied_size(), 1);
  EXPECT_EQ(response.applied(0).version(), 1);
  std::vector<float> expected = InitialValues(BigShard());
  for (float& v : expected) v -= 1.0f;
  EXPECT_THAT(PullValues(*client, BigShard(), &version),
              ElementsAreArray(expected));
  EXPECT_EQ(version, 1);
}

// A data plane server stand-in that does `misbehave` after the handshake
// and the first request header.
struct FakeServer {
  explicit FakeServer(std::function<void(Socket&)> misbehave) {
    absl::StatusOr<std::unique_ptr<Listener>> started =
        Listener::Start("127.0.0.1", 0, [misbehave](Socket& socket) {
          if (!AcceptDataPlaneHandshake(socket, "").ok()) return;
          FrameHeader header;
          if (!ReadFrameHeader(socket, &header).ok()) return;
          misbehave(socket);
        });
    EXPECT_TRUE(started.ok());
    listener = *std::move(started);
  }
  DensePlaneClient Client(double timeout_s) const {
    DensePlaneClientOptions options;
    options.host = "127.0.0.1";
    const int port = listener->port();
    options.resolve_port = [port]() -> absl::StatusOr<int> { return port; };
    options.timeout_s = timeout_s;
    options.peer = "ps 0 (fake)";
    return DensePlaneClient(options);
  }
  std::unique_ptr<Listener> listener;
};

TEST(DensePlaneTest, BrokenConnectionIsUnavailable) {
  FakeServer server([](Socket& socket) { socket.Close(); });
  DensePlaneClient client = server.Client(5);
  std::vector<float> out(4);
  std::vector<absl::Span<float>> spans = {absl::MakeSpan(out)};
  absl::Status s = client.PullDense({"w/part_0"}, spans, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps 0 (fake) PullDense"));

  std::vector<float> grad(4, 1.0f);
  std::vector<absl::Span<const float>> grads = {absl::MakeConstSpan(grad)};
  PushResponse response;
  s = client.PushDense({"w/part_0"}, grads, {}, &response, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST(DensePlaneTest, ServerThatStopsMidReplyIsUnavailable) {
  // A reply that promises 4 floats and breaks off after one.
  FakeServer server([](Socket& socket) {
    FrameHeader reply;
    reply.op = FrameOp::kPullDenseReply;
    reply.count = 1;
    reply.bytes = 16 + 16;
    char head[kFrameHeaderBytes];
    EncodeFrameHeader(reply, head);
    const int64_t part[2] = {3, 16};
    const float one = 1.0f;
    socket.WriteFull(head, sizeof(head)).IgnoreError();
    socket.WriteFull(part, sizeof(part)).IgnoreError();
    socket.WriteFull(&one, sizeof(one)).IgnoreError();
  });
  DensePlaneClient client = server.Client(5);
  std::vector<float> out(4);
  std::vector<absl::Span<float>> spans = {absl::MakeSpan(out)};
  absl::Status s = client.PullDense({"w/part_0"}, spans, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST(DensePlaneTest, SilentServerIsDeadlineExceeded) {
  auto release = std::make_shared<absl::Notification>();
  FakeServer server([release](Socket&) { release->WaitForNotification(); });
  DensePlaneClient client = server.Client(0.3);
  std::vector<float> out(4);
  std::vector<absl::Span<float>> spans = {absl::MakeSpan(out)};
  absl::Status s = client.PullDense({"w/part_0"}, spans, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  release->Notify();
}

TEST(DensePlaneTest, JobTokenIsProvenOnThePlane) {
  ps_test::TestPsServer server(RpcAuth("job-token-1"));
  ASSERT_TRUE(server.started());
  std::unique_ptr<PsClient> client =
      server.NewClient(DataPlaneKind::kTcp, "job-token-1");
  Create(*client, BigShard());
  int64_t version = -1;
  EXPECT_THAT(PullValues(*client, BigShard(), &version),
              ElementsAreArray(InitialValues(BigShard())));

  // Straight to the plane without the token: refused.
  absl::StatusOr<Socket> socket =
      Socket::Connect("127.0.0.1", server.data_plane_port(), 5);
  ASSERT_TRUE(socket.ok());
  EXPECT_EQ(OfferDataPlaneHandshake(*socket, "").code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(DensePlaneTest, ServerWithoutDataPlaneIsReachedOverGrpc) {
  ps_test::TestPsServer server;
  ASSERT_TRUE(server.started());
  server.core().set_data_plane_port(0);  // as an older server announces
  std::unique_ptr<PsClient> client = server.NewClient(DataPlaneKind::kTcp);
  Create(*client, BigShard());
  std::vector<float> grad(10000, 2.0f);
  std::vector<absl::Span<const float>> grads = {absl::MakeConstSpan(grad)};
  PushResponse response;
  ASSERT_TRUE(
      client->PushDense({BigShard().name()}, grads, {}, &response).ok());
  int64_t version = -1;
  PullValues(*client, BigShard(), &version);
  EXPECT_EQ(version, 1);
}

}  // namespace
}  // namespace tessera
