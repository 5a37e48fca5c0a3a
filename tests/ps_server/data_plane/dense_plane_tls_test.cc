// The TCP data plane over TLS (issue #18): dense pulls and pushes as on the
// plain plane, with the plain plane's guarantees (a cut-off push applies
// nothing, a broken connection is UNAVAILABLE, the token is still proven,
// inside the session), and gRPC's trust model: a server certificate the
// CA did not sign or that names another host, and a client certificate of
// another CA, are refused with OpenSSL's reason. A client without TLS is
// refused at once, not left waiting. Real sockets on loopback, with
// certificates made by `openssl` (tests/tls_test_certs.h).

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
#include "common/data_plane/tls.h"
#include "ps_server/client/dense_plane_client.h"
#include "tests/ps_server/data_plane/dense_plane_test_util.h"
#include "tests/ps_server/ps_test_util.h"
#include "tests/skip_unless_required.h"
#include "tests/tls_test_certs.h"

namespace tessera {
namespace {

using ps_test::InitialValues;
using ps_test::MakeShardDef;
using ::testing::HasSubstr;

constexpr char kToken[] = "tls-plane-token";

const ShardDef& BigShard() {
  // 1M floats, 4 MiB: many TLS records each way.
  static const ShardDef* def = new ShardDef(MakeShardDef(
      "big", 0, {1000, 1000}, 0, 1000, ps_test::GlorotInit(1000, 1000, 7)));
  return *def;
}

class DensePlaneTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = new TestCertificates("plane_tls"); }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }
  void SetUp() override {
    if (certs_->error()) {
      TESSERA_SKIP_UNLESS_REQUIRED(kRequireTls)
          << "openssl could not make test certificates: " << *certs_->error();
    }
  }

  static TlsFiles ServerFiles() { return certs_->Files("server", "ca"); }
  static TlsFiles ClientFiles() { return certs_->Files("client", "ca"); }

  static void Create(PsClient& client) {
    CreateShardsRequest request;
    *request.add_shards() = BigShard();
    *request.mutable_optimizer() = ps_test::SgdConfig(0.5f);
    CreateShardsResponse response;
    absl::Status s = client.CreateShards(request, &response);
    ASSERT_TRUE(s.ok()) << s;
  }

  static absl::Status Pull(PsClient& client, std::vector<float>* out,
                           int64_t* version) {
    out->assign(ps_test::NumElements(BigShard()), 0.0f);
    std::vector<absl::Span<float>> spans = {absl::MakeSpan(*out)};
    std::vector<int64_t> versions;
    absl::Status s = client.PullDense({BigShard().name()}, spans, &versions);
    *version = versions.empty() ? -1 : versions[0];
    return s;
  }

  // A raw connection to the plane with the client's TLS, token unproven.
  static absl::StatusOr<Socket> TlsConnect(int port) {
    absl::StatusOr<Socket> socket = Socket::Connect("127.0.0.1", port, 5);
    if (!socket.ok()) return socket.status();
    absl::StatusOr<std::shared_ptr<const DataPlaneTls>> tls =
        DataPlaneTls::Create(ClientFiles(), DataPlaneTls::Role::kClient);
    if (!tls.ok()) return tls.status();
    if (absl::Status s = (*tls)->Connect(*socket, "127.0.0.1"); !s.ok()) {
      return s;
    }
    return socket;
  }

  static TestCertificates* certs_;
};

TestCertificates* DensePlaneTlsTest::certs_ = nullptr;

TEST_F(DensePlaneTlsTest, PullAndPushOverTls) {
  ps_test::TestPsServer server(RpcAuth(kToken), ServerFiles());
  ASSERT_TRUE(server.started());
  std::unique_ptr<PsClient> client = server.NewTlsClient(kToken, ClientFiles());
  Create(*client);

  std::vector<float> values;
  int64_t version = -1;
  ASSERT_TRUE(Pull(*client, &values, &version).ok());
  EXPECT_TRUE(values == InitialValues(BigShard()));
  EXPECT_EQ(version, 0);

  std::vector<float> grad(ps_test::NumElements(BigShard()), 2.0f);
  std::vector<absl::Span<const float>> grads = {absl::MakeConstSpan(grad)};
  for (int i = 0; i < 2; ++i) {  // the second on the pooled connection
    PushResponse response;
    absl::Status s =
        client->PushDense({BigShard().name()}, grads, {}, &response);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(response.applied_size(), 1);
    EXPECT_EQ(response.applied(0).version(), i + 1);
  }
  // Two SGD steps of 0.5 * 2.
  std::vector<float> expected = InitialValues(BigShard());
  for (float& v : expected) v = v - 1.0f - 1.0f;
  ASSERT_TRUE(Pull(*client, &values, &version).ok());
  EXPECT_TRUE(values == expected);
  EXPECT_EQ(version, 2);

  // Its bytes really travel in TLS records.
  absl::StatusOr<Socket> socket = TlsConnect(server.data_plane_port());
  ASSERT_TRUE(socket.ok()) << socket.status();
  EXPECT_THAT(DescribeTls(*socket), HasSubstr("TLSv1."));
  std::cout << "data plane TLS here: " << DescribeTls(*socket) << "\n";
}

TEST_F(DensePlaneTlsTest, ServerNameOverrideIsChecked) {
  ps_test::TestPsServer server(RpcAuth(kToken), ServerFiles());
  ASSERT_TRUE(server.started());
  Create(*server.NewTlsClient(kToken, ClientFiles()));
  std::vector<float> values;
  int64_t version = -1;
  // A name the certificate carries.
  absl::Status s =
      Pull(*server.NewTlsClient(kToken, ClientFiles(), "tessera-ps.test"),
           &values, &version);
  EXPECT_TRUE(s.ok()) << s;
  // One it does not.
  s = Pull(*server.NewTlsClient(kToken, ClientFiles(), "other-ps.test"),
           &values, &version);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("certificate verify failed"));
  EXPECT_THAT(s.message(), HasSubstr("hostname mismatch"));
}

TEST_F(DensePlaneTlsTest, ServerNotSignedByTheClientsCaIsRefused) {
  ps_test::TestPsServer server(RpcAuth(kToken), ServerFiles());
  ASSERT_TRUE(server.started());
  Create(*server.NewTlsClient(kToken, ClientFiles()));
  // The client trusts another CA only.
  std::unique_ptr<PsClient> client =
      server.NewTlsClient(kToken, certs_->Files("client", "other_ca"));
  std::vector<float> values;
  int64_t version = -1;
  absl::Status s = Pull(*client, &values, &version);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps 0 ("));
  EXPECT_THAT(s.message(), HasSubstr("certificate verify failed"));
}

TEST_F(DensePlaneTlsTest, ClientCertificateOfAnotherCaIsRefused) {
  ps_test::TestPsServer server(RpcAuth(kToken), ServerFiles());
  ASSERT_TRUE(server.started());
  Create(*server.NewTlsClient(kToken, ClientFiles()));
  // Trusts the server, but shows a certificate the job's CA did not sign.
  std::unique_ptr<PsClient> client =
      server.NewTlsClient(kToken, certs_->Files("rogue", "ca"));
  std::vector<float> values;
  int64_t version = -1;
  absl::Status s = Pull(*client, &values, &version);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // TLS 1.3 finishes the client's side before the server has checked its
  // certificate: the refusal arrives as an alert on the first read.
  EXPECT_THAT(s.message(), HasSubstr("alert"));
  EXPECT_THAT(s.message(), HasSubstr("TLS"));
}

TEST_F(DensePlaneTlsTest, TokenIsStillProvenInsideTls) {
  ps_test::TestPsServer server(RpcAuth(kToken), ServerFiles());
  ASSERT_TRUE(server.started());
  Create(*server.NewTlsClient(kToken, ClientFiles()));

  absl::StatusOr<Socket> socket = TlsConnect(server.data_plane_port());
  ASSERT_TRUE(socket.ok()) << socket.status();
  EXPECT_EQ(OfferDataPlaneHandshake(*socket, "").code(),
            absl::StatusCode::kUnauthenticated);
  socket = TlsConnect(server.data_plane_port());
  ASSERT_TRUE(socket.ok()) << socket.status();
  EXPECT_EQ(OfferDataPlaneHandshake(*socket, "wrong-token").code(),
            absl::StatusCode::kUnauthenticated);
  socket = TlsConnect(server.data_plane_port());
  ASSERT_TRUE(socket.ok()) << socket.status();
  EXPECT_TRUE(OfferDataPlaneHandshake(*socket, kToken).ok());

  // Through PsClient: a TLS client with the wrong token is refused too.
  std::vector<float> values;
  int64_t version = -1;
  absl::Status s = Pull(*server.NewTlsClient("wrong-token", ClientFiles()),
                        &values, &version);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
}

TEST_F(DensePlaneTlsTest, PlainClientIsRefusedAtOnce) {
  ps_test::TestPsServer server(RpcAuth(kToken), ServerFiles());
  ASSERT_TRUE(server.started());
  const auto start = std::chrono::steady_clock::now();
  // A socket timeout far beyond the bound below: no waiting on it.
  absl::StatusOr<Socket> socket =
      Socket::Connect("127.0.0.1", server.data_plane_port(), 60);
  ASSERT_TRUE(socket.ok());
  absl::Status s = OfferDataPlaneHandshake(*socket, kToken);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("requires TLS"));

  // PsClient without TLS, against the TLS plane.
  std::unique_ptr<PsClient> client =
      server.NewClient(DataPlaneKind::kTcp, kToken);
  Create(*client);  // over gRPC
  std::vector<float> values;
  int64_t version = -1;
  s = Pull(*client, &values, &version);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("requires TLS"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(DensePlaneTlsTest, TlsClientToPlainServerIsRefusedAtOnce) {
  ps_test::TestPsServer server{RpcAuth(kToken)};
  ASSERT_TRUE(server.started());
  std::unique_ptr<PsClient> client = server.NewTlsClient(kToken, ClientFiles());
  Create(*client);
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> values;
  int64_t version = -1;
  absl::Status s = Pull(*client, &values, &version);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("speaks no TLS"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(DensePlaneTlsTest, CutOffPushAppliesNothing) {
  ps_test::TestPsServer server(RpcAuth(kToken), ServerFiles());
  ASSERT_TRUE(server.started());
  std::unique_ptr<PsClient> client = server.NewTlsClient(kToken, ClientFiles());
  Create(*client);

  // Declare the whole gradient, send 64 KiB of it, hang up.
  absl::StatusOr<Socket> socket = TlsConnect(server.data_plane_port());
  ASSERT_TRUE(socket.ok()) << socket.status();
  ASSERT_TRUE(OfferDataPlaneHandshake(*socket, kToken).ok());
  const int64_t bytes = ps_test::NumElements(BigShard()) * sizeof(float);
  ASSERT_TRUE(dense_plane_test::WriteCutOffPush(*socket, BigShard().name(),
                                                bytes, 65536)
                  .ok());
  socket->Close();

  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<float> values;
  int64_t version = -1;
  ASSERT_TRUE(Pull(*client, &values, &version).ok());
  EXPECT_TRUE(values == InitialValues(BigShard()));
  EXPECT_EQ(version, 0);
}

// A TLS data plane stand-in that does `misbehave` after the handshakes
// and the first request header.
struct FakeTlsServer {
  FakeTlsServer(const TlsFiles& files, std::function<void(Socket&)> misbehave) {
    absl::StatusOr<std::shared_ptr<const DataPlaneTls>> tls =
        DataPlaneTls::Create(files, DataPlaneTls::Role::kServer);
    EXPECT_TRUE(tls.ok()) << tls.status();
    absl::StatusOr<std::unique_ptr<Listener>> started = Listener::Start(
        "127.0.0.1", 0,
        [misbehave](Socket& socket) {
          if (!AcceptDataPlaneHandshake(socket, "").ok()) return;
          FrameHeader header;
          if (!ReadFrameHeader(socket, &header).ok()) return;
          misbehave(socket);
        },
        *tls);
    EXPECT_TRUE(started.ok());
    listener = *std::move(started);
  }
  DensePlaneClient Client(const TlsFiles& files, double timeout_s) const {
    DensePlaneClientOptions options;
    options.host = "127.0.0.1";
    const int port = listener->port();
    options.resolve_port = [port]() -> absl::StatusOr<int> { return port; };
    options.timeout_s = timeout_s;
    options.peer = "ps 0 (fake)";
    options.tls = *DataPlaneTls::Create(files, DataPlaneTls::Role::kClient);
    return DensePlaneClient(options);
  }
  std::unique_ptr<Listener> listener;
};

TEST_F(DensePlaneTlsTest, BrokenConnectionIsUnavailable) {
  FakeTlsServer server(ServerFiles(), [](Socket& socket) { socket.Close(); });
  DensePlaneClient client = server.Client(ClientFiles(), 5);
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

TEST_F(DensePlaneTlsTest, SilentServerIsDeadlineExceeded) {
  auto release = std::make_shared<absl::Notification>();
  FakeTlsServer server(ServerFiles(),
                       [release](Socket&) { release->WaitForNotification(); });
  DensePlaneClient client = server.Client(ClientFiles(), 0.3);
  std::vector<float> out(4);
  std::vector<absl::Span<float>> spans = {absl::MakeSpan(out)};
  absl::Status s = client.PullDense({"w/part_0"}, spans, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  release->Notify();
}

TEST_F(DensePlaneTlsTest, FilesOpenSslCannotUseAreInvalidArgument) {
  TlsFiles files = ClientFiles();
  files.private_key = certs_->Files("rogue", "ca").private_key;
  absl::StatusOr<std::shared_ptr<const DataPlaneTls>> tls =
      DataPlaneTls::Create(files, DataPlaneTls::Role::kClient);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tls.status().message(), HasSubstr("private key"));
  files = ClientFiles();
  files.ca = "not a certificate";
  tls = DataPlaneTls::Create(files, DataPlaneTls::Role::kServer);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tls.status().message(), HasSubstr("CA"));
}

}  // namespace
}  // namespace tessera
