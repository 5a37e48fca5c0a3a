// What only the TCP data plane's row calls have to show (the cases both
// planes share run in ps_service_rows_test and ps_service_hash_rows_test):
// several shards in one round trip, a shard named twice in a push, a push
// cut off midway applies nothing, a refused request leaves the connection
// usable, a malformed one closes it, a broken connection reads as gRPC's
// UNAVAILABLE, and the job token is proven. Real sockets on loopback.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/data_plane/frame.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/listener.h"
#include "common/data_plane/socket.h"
#include "ps_server/client/row_plane_client.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::GlorotInit;
using ps_test::InitialValues;
using ps_test::MakeShardDef;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int64_t kDim = 4;

// Rows [0, 100) and [100, 200) of a [200, 4] table.
ShardDef Part(int index) {
  return MakeShardDef("emb", index, {200, kDim}, 100 * index, 100,
                      GlorotInit(200, kDim, 3));
}

class RowPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    admin_ = server_.NewClient();
    CreateShardsRequest request;
    *request.add_shards() = Part(0);
    *request.add_shards() = Part(1);
    *request.mutable_optimizer() = ps_test::SgdConfig(0.5f);
    CreateShardsResponse response;
    ASSERT_TRUE(admin_->CreateShards(request, &response).ok());
  }

  RowPlaneClient Client(const std::string& token = "") {
    RowPlaneClientOptions options;
    options.host = "127.0.0.1";
    const int port = server_.data_plane_port();
    options.resolve_port = [port]() -> absl::StatusOr<int> { return port; };
    options.job_token = token;
    options.timeout_s = 10;
    options.peer = "ps 0 (test)";
    return RowPlaneClient(options);
  }

  // Shard `index`'s values, pulled whole over gRPC.
  std::vector<float> Values(int index) {
    std::vector<float> out(100 * kDim);
    std::vector<absl::Span<float>> spans = {absl::MakeSpan(out)};
    EXPECT_TRUE(admin_->PullDense({Part(index).name()}, spans, nullptr).ok());
    return out;
  }

  std::vector<float> Row(int index, int64_t id) {
    const std::vector<float> initial = InitialValues(Part(index));
    const int64_t local = id - 100 * index;
    return {initial.begin() + local * kDim,
            initial.begin() + (local + 1) * kDim};
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> admin_;
};

TEST_F(RowPlaneTest, SeveralShardsInOneRoundTrip) {
  RowPlaneClient client = Client();
  const std::string names[2] = {Part(0).name(), Part(1).name()};
  const std::vector<int64_t> ids0 = {5, 99, 5};
  const std::vector<int64_t> ids1 = {100};
  const RowsPart parts[2] = {{names[0], kDim, ids0}, {names[1], kDim, ids1}};
  std::vector<float> out0(3 * kDim, -1), out1(kDim, -1);
  const absl::Span<float> out[2] = {absl::MakeSpan(out0), absl::MakeSpan(out1)};
  ASSERT_TRUE(client.PullRows(parts, out).ok());
  std::vector<float> expected0;
  for (int64_t id : ids0) {
    const std::vector<float> row = Row(0, id);
    expected0.insert(expected0.end(), row.begin(), row.end());
  }
  EXPECT_THAT(out0, ElementsAreArray(expected0));
  EXPECT_THAT(out1, ElementsAreArray(Row(1, 100)));

  // Shard 0 named twice: one push of its rows, id 5's gradients summed.
  const std::vector<int64_t> again = {5};
  const RowsPart push[3] = {
      {names[0], kDim, ids0}, {names[1], kDim, ids1}, {names[0], kDim, again}};
  const std::vector<float> g0(3 * kDim, 1.0f), g1(kDim, 2.0f), g2(kDim, 4.0f);
  const absl::Span<const float> grads[3] = {g0, g1, g2};
  PushResponse response;
  absl::Status s = client.PushRows(push, grads, &response);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(response.applied_size(), 2);
  EXPECT_EQ(response.applied(0).name(), names[0]);
  EXPECT_EQ(response.applied(0).version(), 1);
  EXPECT_EQ(response.applied(1).version(), 1);

  std::vector<float> expected = InitialValues(Part(0));
  for (int64_t k = 0; k < kDim; ++k) {
    expected[5 * kDim + k] -= 0.5f * (1 + 1 + 4);
    expected[99 * kDim + k] -= 0.5f * 1;
  }
  EXPECT_THAT(Values(0), ElementsAreArray(expected));
}

TEST_F(RowPlaneTest, RefusalsKeepTheConnectionAndApplyNothing) {
  RowPlaneClient client = Client();
  const std::string name = Part(0).name();
  const std::string unknown = "nope/part_0";
  const std::vector<int64_t> ids = {1, 2};
  const std::vector<float> grads(2 * kDim, 1.0f);
  const absl::Span<const float> g[2] = {grads, grads};
  PushResponse response;
  // Every part is checked before any is applied: part 0 is fine.
  RowsPart parts[2] = {{name, kDim, ids}, {unknown, kDim, ids}};
  absl::Status s = client.PushRows(parts, g, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("nope/part_0"));
  EXPECT_THAT(s.message(), HasSubstr("ps 0 (test) PushRows"));

  const std::vector<int64_t> far = {1, 150};
  parts[1] = {name, kDim, far};
  s = client.PushRows(parts, g, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_THAT(s.message(), HasSubstr("id 150 "));

  std::vector<float> nan = grads;
  nan[5] = std::numeric_limits<float>::infinity();
  const absl::Span<const float> bad[2] = {grads, nan};
  parts[1] = {name, kDim, ids};
  s = client.PushRows(parts, bad, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("non-finite"));

  const std::vector<float> short_rows(2 * 3, 1.0f);
  const RowsPart wrong[1] = {{name, 3, ids}};
  const absl::Span<const float> w[1] = {short_rows};
  s = client.PushRows(wrong, w, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("wrong shape"));

  std::vector<float> out(2 * 3);
  const absl::Span<float> o[1] = {absl::MakeSpan(out)};
  s = client.PullRows(wrong, o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  EXPECT_THAT(Values(0), ElementsAreArray(InitialValues(Part(0))));
  // The same connection still serves.
  const RowsPart one[1] = {{name, kDim, ids}};
  const absl::Span<const float> gg[1] = {grads};
  s = client.PushRows(one, gg, &response);
  EXPECT_TRUE(s.ok()) << s;
}

// Opens a connection to the server's plane and proves no token.
Socket Connect(const ps_test::TestPsServer& server) {
  absl::StatusOr<Socket> socket =
      Socket::Connect("127.0.0.1", server.data_plane_port(), 5);
  EXPECT_TRUE(socket.ok());
  EXPECT_TRUE(OfferDataPlaneHandshake(*socket, "").ok());
  return *std::move(socket);
}

TEST_F(RowPlaneTest, CutOffPushAppliesNothing) {
  // Declare 10 rows of shard 0, send their ids and half the gradients.
  Socket socket = Connect(server_);
  std::string table;
  AppendString16(Part(0).name(), &table);
  AppendInt64(kDim, &table);
  AppendInt64(10, &table);
  FrameHeader header;
  header.op = FrameOp::kPushRows;
  header.count = 1;
  header.bytes = static_cast<int64_t>(table.size());
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(header, head);
  std::vector<int64_t> ids(10);
  for (int i = 0; i < 10; ++i) ids[i] = i;
  const std::vector<float> half(5 * kDim, 1.0f);
  const iovec parts[4] = {{head, sizeof(head)},
                          {table.data(), table.size()},
                          {ids.data(), ids.size() * 8},
                          {const_cast<float*>(half.data()), half.size() * 4}};
  ASSERT_TRUE(socket.WriteAll(parts).ok());
  socket.Close();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_THAT(Values(0), ElementsAreArray(InitialValues(Part(0))));

  // A whole push over the plane is applied, as version 1.
  RowPlaneClient client = Client();
  const std::string name = Part(0).name();
  const RowsPart one[1] = {{name, kDim, ids}};
  const std::vector<float> grads(10 * kDim, 1.0f);
  const absl::Span<const float> g[1] = {grads};
  PushResponse response;
  ASSERT_TRUE(client.PushRows(one, g, &response).ok());
  EXPECT_EQ(response.applied(0).version(), 1);
}

TEST_F(RowPlaneTest, MalformedTableClosesTheConnection) {
  Socket socket = Connect(server_);
  FrameHeader header;
  header.op = FrameOp::kPullRows;
  header.count = 1;
  header.bytes = 5;  // less than any shard's entry
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(header, head);
  const char junk[5] = {};
  const iovec parts[2] = {{head, sizeof(head)}, {const_cast<char*>(junk), 5}};
  ASSERT_TRUE(socket.WriteAll(parts).ok());
  char byte;
  EXPECT_EQ(socket.ReadFull(&byte, 1).code(), absl::StatusCode::kUnavailable);
}

TEST(RowPlaneFailureTest, BrokenConnectionIsUnavailable) {
  absl::StatusOr<std::unique_ptr<Listener>> listener =
      Listener::Start("127.0.0.1", 0, [](Socket& socket) {
        if (!AcceptDataPlaneHandshake(socket, "").ok()) return;
        FrameHeader header;
        (void)ReadFrameHeader(socket, &header);
        socket.Close();
      });
  ASSERT_TRUE(listener.ok());
  RowPlaneClientOptions options;
  options.host = "127.0.0.1";
  const int port = (*listener)->port();
  options.resolve_port = [port]() -> absl::StatusOr<int> { return port; };
  options.timeout_s = 5;
  options.peer = "ps 0 (fake)";
  RowPlaneClient client(options);
  const std::vector<int64_t> ids = {1};
  const RowsPart part[1] = {{"w/part_0", 2, ids}};
  std::vector<float> out(2);
  const absl::Span<float> o[1] = {absl::MakeSpan(out)};
  absl::Status s = client.PullRows(part, o);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps 0 (fake) PullRows"));
  const absl::Span<const float> g[1] = {out};
  PushResponse response;
  s = client.PushRows(part, g, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST(RowPlaneAuthTest, JobTokenIsProvenOnThePlane) {
  ps_test::TestPsServer server(RpcAuth("job-token-2"));
  ASSERT_TRUE(server.started());
  std::unique_ptr<PsClient> client =
      server.NewClient(DataPlaneKind::kTcp, "job-token-2");
  CreateShardsRequest request;
  *request.add_shards() = Part(0);
  *request.mutable_optimizer() = ps_test::SgdConfig(0.5f);
  CreateShardsResponse created;
  ASSERT_TRUE(client->CreateShards(request, &created).ok());
  std::vector<float> out(kDim);
  ASSERT_TRUE(
      client->PullRows(Part(0).name(), {7}, kDim, absl::MakeSpan(out)).ok());

  RowPlaneClientOptions options;
  options.host = "127.0.0.1";
  const int port = server.data_plane_port();
  options.resolve_port = [port]() -> absl::StatusOr<int> { return port; };
  options.job_token = "wrong";
  options.timeout_s = 5;
  RowPlaneClient stranger(options);
  const std::vector<int64_t> ids = {7};
  const std::string name = Part(0).name();
  const RowsPart part[1] = {{name, kDim, ids}};
  const absl::Span<float> o[1] = {absl::MakeSpan(out)};
  EXPECT_EQ(stranger.PullRows(part, o).code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace tessera
