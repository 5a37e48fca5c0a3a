// What the data plane's event pool (DataPlaneServing::kEventPool,
// common/data_plane/event_listener.h) has to show beyond the transport
// tests every plane passes (ps_service_*_test, dense_plane_*_test,
// row_plane_test, which run on it by default): many connections on a
// fixed pool of threads, a client that stalls or sends garbage holds up
// nobody else, and a connection refused for lack of descriptors is a
// clear error to its client on either serving, with the server still
// serving afterwards. Real sockets on loopback.

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/data_plane/descriptor_limit.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/socket.h"
#include "ps_server/client/dense_plane_client.h"
#include "ps_server/client/row_plane_client.h"
#include "ps_server/data_plane/dense_plane_server.h"
#include "ps_server/wire/dense_wire.h"
#include "tests/ps_server/data_plane/dense_plane_test_util.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::InitialValues;
using ps_test::MakeShardDef;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr char kToken[] = "event-plane-token";

const ShardDef& Dense() {
  static const ShardDef* def = new ShardDef(
      MakeShardDef("w", 0, {100, 4}, 0, 100, ps_test::GlorotInit(100, 4, 5)));
  return *def;
}

// This process's threads, from /proc/self/status.
int ThreadsNow() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) {
      int n = 0;
      if (absl::SimpleAtoi(line.substr(8), &n)) return n;
    }
  }
  return -1;
}

// A parameter server's data plane alone, on one shard, served as asked.
class PlaneServer {
 public:
  explicit PlaneServer(DataPlaneServing serving, int threads = 2,
                       double timeout_s = 60, const ShardDef& shard = Dense()) {
    CreateShardsRequest request;
    *request.add_shards() = shard;
    *request.mutable_optimizer() = ps_test::SgdConfig(0.5f);
    CreateShardsResponse response;
    EXPECT_TRUE(store_.Create(request, &response).ok());
    DensePlaneServerOptions options;
    options.host = "127.0.0.1";
    options.job_token = kToken;
    options.timeout_s = timeout_s;
    options.serving = serving;
    options.threads = threads;
    absl::StatusOr<std::unique_ptr<DensePlaneServer>> started =
        DensePlaneServer::Start(&core_, options);
    EXPECT_TRUE(started.ok()) << started.status();
    if (started.ok()) server_ = *std::move(started);
  }

  int port() const { return server_->port(); }
  DensePlaneServer& server() { return *server_; }

  std::unique_ptr<DensePlaneClient> Client(double timeout_s = 10) const {
    DensePlaneClientOptions options;
    options.host = "127.0.0.1";
    const int port = server_->port();
    options.resolve_port = [port]() -> absl::StatusOr<int> { return port; };
    options.job_token = kToken;
    options.timeout_s = timeout_s;
    options.peer = "ps 0 (test)";
    return std::make_unique<DensePlaneClient>(options);
  }

  // A raw connection that passed the handshake.
  absl::StatusOr<Socket> Connect() const {
    absl::StatusOr<Socket> socket = Socket::Connect("127.0.0.1", port(), 10);
    if (!socket.ok()) return socket.status();
    if (absl::Status s = OfferDataPlaneHandshake(*socket, kToken); !s.ok()) {
      return s;
    }
    return socket;
  }

 private:
  ShardStore store_;
  PsCore core_{&store_};
  std::unique_ptr<DensePlaneServer> server_;
};

absl::Status Pull(DensePlaneClient& client, std::vector<float>* out) {
  out->assign(ps_test::NumElements(Dense()), 0);
  std::vector<absl::Span<float>> spans = {absl::MakeSpan(*out)};
  std::vector<int64_t> versions;
  return client.PullDense({Dense().name()}, spans, &versions);
}

// Blocks until the server closes `socket`: OK when it did.
absl::Status WaitForClose(Socket& socket) {
  char byte;
  absl::Status s = socket.ReadFull(&byte, 1);
  if (s.code() == absl::StatusCode::kUnavailable) return absl::OkStatus();
  return s.ok() ? absl::InternalError("the server sent a byte") : s;
}

TEST(EventPlaneTest, SmallPerLargeBelowOneIsRefused) {
  ShardStore store;
  PsCore core(&store);
  DensePlaneServerOptions options;
  options.host = "127.0.0.1";
  options.rows_first = true;
  options.small_per_large = -3;
  absl::StatusOr<std::unique_ptr<DensePlaneServer>> started =
      DensePlaneServer::Start(&core, options);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(started.status().message()),
      ::testing::HasSubstr("small_per_large must be at least 1, not -3"));
}

TEST(EventPlaneTest, ManyConnectionsShareAFixedPool) {
  PlaneServer server(DataPlaneServing::kEventPool, 2);
  EXPECT_EQ(server.server().pool_threads(), 2);
  const int before = ThreadsNow();
  ASSERT_GT(before, 0);
  constexpr int kConnections = 300;
  std::vector<std::unique_ptr<DensePlaneClient>> clients;
  clients.reserve(kConnections);
  for (int i = 0; i < kConnections; ++i) clients.push_back(server.Client());
  std::vector<float> values;
  for (auto& client : clients) ASSERT_TRUE(Pull(*client, &values).ok());
  EXPECT_THAT(values, ElementsAreArray(InitialValues(Dense())));
  // Every connection is open and idle in its client's pool; a thread per
  // connection would have added 300.
  EXPECT_LE(ThreadsNow(), before + 2);
  // And all of them still answer, in any order.
  for (int i = kConnections - 1; i >= 0; i -= 7) {
    ASSERT_TRUE(Pull(*clients[i], &values).ok());
  }
}

TEST(EventPlaneTest, BackToBackRequestsAreNeverMissed) {
  // A client sends its next request the moment it reads a reply, while
  // the pool thread that answered is still handing the connection back:
  // the request must be served, not wait for bytes that never come.
  PlaneServer server(DataPlaneServing::kEventPool, 2);
  std::vector<std::unique_ptr<DensePlaneClient>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(server.Client());
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (auto& client : clients) {
    threads.emplace_back([&client, &failed] {
      std::vector<float> values;
      for (int i = 0; i < 2000; ++i) {
        if (!Pull(*client, &values).ok()) failed.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
}

TEST(EventPlaneTest, ClientSilentInTheHandshakeHoldsNoThread) {
  // One pool thread: a client that connects and never answers the
  // greeting must not take it.
  PlaneServer server(DataPlaneServing::kEventPool, 1);
  std::vector<Socket> silent;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<Socket> s = Socket::Connect("127.0.0.1", server.port(), 10);
    ASSERT_TRUE(s.ok());
    silent.push_back(*std::move(s));
  }
  std::unique_ptr<DensePlaneClient> client = server.Client();
  std::vector<float> values;
  EXPECT_TRUE(Pull(*client, &values).ok());
}

TEST(EventPlaneTest, ClientStalledMidRequestIsDroppedAndHoldsUpNobody) {
  // Two pool threads, a 1 s progress timeout: the stalled request holds
  // one thread until the timeout; the other serves everyone else.
  PlaneServer server(DataPlaneServing::kEventPool, 2, /*timeout_s=*/1);
  absl::StatusOr<Socket> stalled = server.Connect();
  ASSERT_TRUE(stalled.ok()) << stalled.status();
  // Declares 40,000 bytes of gradient and sends 100.
  ASSERT_TRUE(dense_plane_test::WriteCutOffPush(*stalled, Dense().name(),
                                                40 * 1000, 100)
                  .ok());
  std::unique_ptr<DensePlaneClient> client = server.Client();
  std::vector<float> values;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Pull(*client, &values).ok());
  // Nothing of the cut-off push was applied.
  EXPECT_THAT(values, ElementsAreArray(InitialValues(Dense())));
  // The server gives up on it after the timeout.
  stalled->SetTimeout(30).IgnoreError();
  EXPECT_TRUE(WaitForClose(*stalled).ok());
}

TEST(EventPlaneTest, ClientThatDoesNotReadItsRepliesHoldsUpNobody) {
  // A client pipelines pulls and never reads the replies: its socket
  // buffers fill, the server stops reading it (back-pressure) and its
  // thread waits on the write until the timeout; the other serves on.
  PlaneServer server(DataPlaneServing::kEventPool, 2, /*timeout_s=*/1);
  absl::StatusOr<Socket> greedy = server.Connect();
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  std::string table;
  AppendString16(Dense().name(), &table);
  FrameHeader header;
  header.op = FrameOp::kPullDense;
  header.count = 1;
  header.bytes = static_cast<int64_t>(table.size());
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(header, head);
  std::string request(head, sizeof(head));
  request += table;
  std::string many;
  for (int i = 0; i < 2000; ++i) many += request;  // 3.2 MB of replies
  greedy->SetTimeout(5).IgnoreError();
  // The kernel may refuse the last of it once the server stops reading.
  greedy->WriteFull(many.data(), many.size()).IgnoreError();
  std::unique_ptr<DensePlaneClient> client = server.Client();
  std::vector<float> values;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Pull(*client, &values).ok());
}

TEST(EventPlaneTest, ReaderThatStallsHoldsNoShardLock) {
  // A pull of a 16 MiB shard whose client reads its first bytes and then
  // stops: the pool thread sending it waits on the socket. It must not
  // wait holding the shard's lock (it copies out a piece and sends it
  // after), or a push to the shard, on a connection of its own, would
  // wait for the stalled reader's timeout.
  const ShardDef big =
      MakeShardDef("big", 0, {4096, 1024}, 0, 4096, ps_test::ConstantInit(1));
  PlaneServer server(DataPlaneServing::kEventPool, 2, /*timeout_s=*/60, big);
  absl::StatusOr<Socket> stalled = server.Connect();
  ASSERT_TRUE(stalled.ok()) << stalled.status();
  std::string table;
  AppendString16(big.name(), &table);
  FrameHeader header;
  header.op = FrameOp::kPullDense;
  header.count = 1;
  header.bytes = static_cast<int64_t>(table.size());
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(header, head);
  ASSERT_TRUE(stalled->WriteFull(head, sizeof(head)).ok());
  ASSERT_TRUE(stalled->WriteFull(table.data(), table.size()).ok());
  // The reply has started: its sender is under way, and stays so.
  char reply_head[kFrameHeaderBytes];
  ASSERT_TRUE(stalled->ReadFull(reply_head, sizeof(reply_head)).ok());

  // The client's own timeout bounds the wait if the lock is held.
  std::unique_ptr<DensePlaneClient> client = server.Client(/*timeout_s=*/10);
  const std::vector<float> grad(ps_test::NumElements(big), 0.5f);
  const std::vector<absl::Span<const float>> grads = {
      absl::MakeConstSpan(grad)};
  PushResponse response;
  ASSERT_TRUE(client
                  ->PushDense({big.name()}, grads, /*base_versions=*/{0},
                              &response, nullptr)
                  .ok());
  EXPECT_EQ(response.applied_size(), 1);

  // The stalled reader still gets its whole reply.
  FrameHeader reply;
  ASSERT_TRUE(DecodeFrameHeader(reply_head, &reply).ok());
  EXPECT_EQ(reply.op, FrameOp::kPullDenseReply);
  EXPECT_EQ(reply.bytes, static_cast<int64_t>(kDensePartHeaderBytes) +
                             ps_test::NumElements(big) *
                                 static_cast<int64_t>(sizeof(float)));
  std::vector<char> rest(reply.bytes);
  EXPECT_TRUE(stalled->ReadFull(rest.data(), rest.size()).ok());
}

TEST(EventPlaneTest, GarbageClosesOnlyThatConnection) {
  PlaneServer server(DataPlaneServing::kEventPool, 1);
  // Garbage instead of the handshake's answer: refused as a missing
  // token.
  absl::StatusOr<Socket> raw = Socket::Connect("127.0.0.1", server.port(), 10);
  ASSERT_TRUE(raw.ok());
  char hello[40];
  ASSERT_TRUE(raw->ReadFull(hello, sizeof(hello)).ok());
  std::string junk(64, '\x5a');
  ASSERT_TRUE(raw->WriteFull(junk.data(), junk.size()).ok());
  char code[4];
  ASSERT_TRUE(raw->ReadFull(code, sizeof(code)).ok());
  int32_t refused = 0;
  std::memcpy(&refused, code, 4);
  EXPECT_EQ(refused, static_cast<int32_t>(absl::StatusCode::kUnauthenticated));

  // Garbage instead of a frame after a good handshake: closed.
  absl::StatusOr<Socket> garbage = server.Connect();
  ASSERT_TRUE(garbage.ok()) << garbage.status();
  std::string noise(4096, '\x17');
  ASSERT_TRUE(garbage->WriteFull(noise.data(), noise.size()).ok());
  EXPECT_TRUE(WaitForClose(*garbage).ok());

  // Everyone else is served.
  std::unique_ptr<DensePlaneClient> client = server.Client();
  std::vector<float> values;
  EXPECT_TRUE(Pull(*client, &values).ok());
}

// A frame whose count claims more shards than its table can name (a
// buggy or hostile peer past the handshake) closes that connection; the
// server sizes nothing by the count and goes on serving.
TEST(EventPlaneTest, ACountTheTableCannotHoldClosesOnlyThatConnection) {
  PlaneServer server(DataPlaneServing::kEventPool, 1);
  for (FrameOp op : {FrameOp::kPullDense, FrameOp::kPushDense}) {
    absl::StatusOr<Socket> bad = server.Connect();
    ASSERT_TRUE(bad.ok()) << bad.status();
    std::string table;
    AppendString16("w", &table);
    FrameHeader header;
    header.op = op;
    header.count = 0xfffffff0u;
    header.bytes = static_cast<int64_t>(table.size());
    char head[kFrameHeaderBytes];
    EncodeFrameHeader(header, head);
    ASSERT_TRUE(bad->WriteFull(head, sizeof(head)).ok());
    ASSERT_TRUE(bad->WriteFull(table.data(), table.size()).ok());
    EXPECT_TRUE(WaitForClose(*bad).ok()) << static_cast<int>(op);
  }
  std::unique_ptr<DensePlaneClient> client = server.Client();
  std::vector<float> values;
  EXPECT_TRUE(Pull(*client, &values).ok());
}

TEST(EventPlaneTest, WrongTokenIsRefused) {
  PlaneServer server(DataPlaneServing::kEventPool, 1);
  absl::StatusOr<Socket> socket =
      Socket::Connect("127.0.0.1", server.port(), 10);
  ASSERT_TRUE(socket.ok());
  absl::Status s = OfferDataPlaneHandshake(*socket, "another-token");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
}

// Lowers this process's soft RLIMIT_NOFILE, fills it with descriptors of
// its own, and gives back `free` of them; the destructor undoes it all.
class DescriptorSqueeze {
 public:
  explicit DescriptorSqueeze(int free) {
    getrlimit(RLIMIT_NOFILE, &saved_);
    // Every descriptor open now, plus a margin to fill.
    int highest = 0;
    for (int fd = 0; fd < 4096; ++fd) {
      if (fcntl(fd, F_GETFD) >= 0) highest = fd;
    }
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(highest + 64);
    setrlimit(RLIMIT_NOFILE, &lowered);
    while (true) {
      const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      filler_.push_back(fd);
    }
    for (int i = 0; i < free && !filler_.empty(); ++i) {
      close(filler_.back());
      filler_.pop_back();
    }
  }
  ~DescriptorSqueeze() {
    for (int fd : filler_) close(fd);
    setrlimit(RLIMIT_NOFILE, &saved_);
  }
  bool filled() const { return !filler_.empty(); }

 private:
  rlimit saved_{};
  std::vector<int> filler_;
};

class DescriptorExhaustionTest
    : public ::testing::TestWithParam<DataPlaneServing> {};

TEST_P(DescriptorExhaustionTest, RefusedConnectionIsAClearErrorNotAStall) {
  PlaneServer server(GetParam(), 2);
  absl::Status refused;
  {
    // One descriptor free: the client's socket takes it, so the server
    // has none for its end of the connection.
    DescriptorSqueeze squeeze(1);
    ASSERT_TRUE(squeeze.filled());
    absl::StatusOr<Socket> socket =
        Socket::Connect("127.0.0.1", server.port(), 10);
    ASSERT_TRUE(socket.ok()) << socket.status();
    refused = OfferDataPlaneHandshake(*socket, kToken);
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("no descriptor left"));
  EXPECT_THAT(refused.message(), HasSubstr("RLIMIT_NOFILE"));
  // With descriptors back, the server takes connections again.
  std::unique_ptr<DensePlaneClient> client = server.Client();
  std::vector<float> values;
  EXPECT_TRUE(Pull(*client, &values).ok());
}

INSTANTIATE_TEST_SUITE_P(
    Servings, DescriptorExhaustionTest,
    ::testing::Values(DataPlaneServing::kEventPool,
                      DataPlaneServing::kThreadPerConnection),
    [](const ::testing::TestParamInfo<DataPlaneServing>& info) {
      return info.param == DataPlaneServing::kEventPool
                 ? std::string("events")
                 : std::string("threads");
    });

TEST(DescriptorLimitTest, RaisesTheSoftLimitToTheHardOne) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max < 256) GTEST_SKIP() << "hard limit too low to lower";
  rlimit lowered = saved;
  lowered.rlim_cur = 128;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  absl::StatusOr<DescriptorLimit> limit = RaiseDescriptorLimit();
  rlimit now{};
  getrlimit(RLIMIT_NOFILE, &now);
  setrlimit(RLIMIT_NOFILE, &saved);
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->soft_before, 128u);
  EXPECT_EQ(now.rlim_cur, saved.rlim_max);
  EXPECT_THAT(DescribeDescriptorLimit(*limit), HasSubstr("128 -> "));
}

}  // namespace
}  // namespace tessera
