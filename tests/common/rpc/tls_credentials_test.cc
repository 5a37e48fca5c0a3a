// Mutual TLS between Tessera processes: the flags, and real calls over
// 127.0.0.1 with certificates made by `openssl` at test time (a CA, a
// server certificate for localhost/127.0.0.1/tessera-ps.test, a client
// certificate, and a second CA with a client certificate of its own).
#include "common/rpc/tls_credentials.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/process/process_start.h"
#include "common/process/security_flags.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/common/rpc/rpc_test_service.h"
#include "tests/shell_command.h"
#include "tests/skip_unless_required.h"
#include "tests/tls_test_certs.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "tls-test-token";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TlsTest : public ::testing::Test {
 protected:
  // One set of certificates for the whole suite (tests/tls_test_certs.h).
  static void SetUpTestSuite() { certs_ = new TestCertificates("tls_test"); }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  void SetUp() override {
    if (certs_->error().has_value()) {
      TESSERA_SKIP_UNLESS_REQUIRED(kRequireTls)
          << "openssl could not make test certificates "
             "(deploy/install.sh installs it): "
          << *certs_->error();
    }
  }
  void TearDown() override {
    FLAGS_tls_cert = "";
    FLAGS_tls_key = "";
    FLAGS_tls_ca = "";
    FLAGS_tls_target_name_override = "";
    FLAGS_listen_host = "[::]";
  }

  static std::string Path(const std::string& file) {
    return certs_->Path(file);
  }
  static TlsFiles Files(const std::string& name, const std::string& ca) {
    return certs_->Files(name, ca);
  }
  static ChannelSecurity ClientSecurity(std::optional<TlsFiles> tls,
                                        std::string target_override = "") {
    ChannelSecurity security;
    security.job_token = kToken;
    security.tls = std::move(tls);
    security.tls_target_name_override = std::move(target_override);
    return security;
  }

  static TestCertificates* certs_;
};

TestCertificates* TlsTest::certs_ = nullptr;

TEST(TlsFlagsTest, NoFlagsMeansPlaintext) {
  absl::StatusOr<std::optional<TlsFiles>> tls = TlsFilesFromFlags();
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_FALSE(tls->has_value());
}

TEST(TlsFlagsTest, SomeButNotAllFlagsNameTheMissingOnes) {
  FLAGS_tls_cert = "/some/cert.pem";
  absl::StatusOr<std::optional<TlsFiles>> tls = TlsFilesFromFlags();
  EXPECT_THAT(tls.status().message(), HasSubstr("missing --tls_key, --tls_ca"));
  FLAGS_tls_key = "/some/key.pem";
  tls = TlsFilesFromFlags();
  EXPECT_THAT(tls.status().message(), HasSubstr("missing --tls_ca"));
  EXPECT_THAT(tls.status().message(),
              ::testing::Not(HasSubstr("missing --tls_key")));
  FLAGS_tls_cert = "";
  FLAGS_tls_key = "";
}

TEST_F(TlsTest, UnreadableOrWrongFilesAreNamed) {
  FLAGS_tls_cert = Path("server.pem");
  FLAGS_tls_key = Path("server.key");
  FLAGS_tls_ca = "/nonexistent/ca.pem";
  EXPECT_THAT(TlsFilesFromFlags().status().message(),
              HasSubstr("--tls_ca=/nonexistent/ca.pem: cannot be read"));
  // A key where the CA belongs, and a certificate where the key belongs.
  FLAGS_tls_ca = Path("ca.key");
  EXPECT_THAT(TlsFilesFromFlags().status().message(),
              HasSubstr("ca.key: holds no PEM CERTIFICATE"));
  FLAGS_tls_ca = Path("ca.pem");
  FLAGS_tls_key = Path("server.pem");
  EXPECT_THAT(TlsFilesFromFlags().status().message(),
              HasSubstr("--tls_key=" + Path("server.pem") +
                        ": holds no PEM PRIVATE KEY"));
  FLAGS_tls_key = Path("server.key");
  absl::StatusOr<std::optional<TlsFiles>> tls = TlsFilesFromFlags();
  ASSERT_TRUE(tls.ok()) << tls.status();
  ASSERT_TRUE(tls->has_value());
  EXPECT_THAT((*tls)->private_key, HasSubstr("PRIVATE KEY"));
}

TEST_F(TlsTest, KeyOfAnotherCertificateIsRefusedByName) {
  FLAGS_tls_cert = Path("server.pem");
  FLAGS_tls_key = Path("client.key");
  FLAGS_tls_ca = Path("ca.pem");
  const absl::Status s = TlsFilesFromFlags().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--tls_key=" + Path("client.key") +
                                     " is not the private key of --tls_cert=" +
                                     Path("server.pem")));
}

TEST_F(TlsTest, MutualTlsCallSucceedsAndStillNeedsTheToken) {
  TokenCheckingWorker service{RpcAuth(kToken)};
  TestServer server(&service, MakeServerCredentials(Files("server", "ca")));
  ASSERT_TRUE(server.ok());
  HealthResponse response;
  grpc::Status s = CallHealth(
      MakeChannel(server.address(), ClientSecurity(Files("client", "ca"))), 5,
      &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.task_type(), "worker");
  // A certificate does not replace the token.
  ChannelSecurity no_token = ClientSecurity(Files("client", "ca"));
  no_token.job_token.clear();
  EXPECT_EQ(CallHealth(MakeChannel(server.address(), no_token)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(TlsTest, ClientWithoutCertificateIsRefused) {
  TokenCheckingWorker service{RpcAuth(kToken)};
  TestServer server(&service, MakeServerCredentials(Files("server", "ca")));
  ASSERT_TRUE(server.ok());
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadText(Path("ca.pem"));
  grpc::ChannelArguments args = ChannelArgs();
  grpc::Status s = CallHealth(grpc::CreateCustomChannel(
      server.address(), grpc::SslCredentials(options), args));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, ClientCertificateOfAnotherCaIsRefused) {
  TokenCheckingWorker service{RpcAuth(kToken)};
  TestServer server(&service, MakeServerCredentials(Files("server", "ca")));
  ASSERT_TRUE(server.ok());
  TlsFiles rogue = Files("rogue", "ca");  // trusts the server's CA
  grpc::Status s =
      CallHealth(MakeChannel(server.address(), ClientSecurity(rogue)));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, PlaintextAndTlsDoNotMix) {
  TokenCheckingWorker service{RpcAuth(kToken)};
  TestServer tls_server(&service, MakeServerCredentials(Files("server", "ca")));
  TestServer plain_server(&service, grpc::InsecureServerCredentials());
  ASSERT_TRUE(tls_server.ok() && plain_server.ok());
  grpc::Status s = CallHealth(
      MakeChannel(tls_server.address(), ClientSecurity(std::nullopt)));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  s = CallHealth(MakeChannel(plain_server.address(),
                             ClientSecurity(Files("client", "ca"))));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, TargetNameOverrideChoosesTheNameToVerify) {
  TokenCheckingWorker service{RpcAuth(kToken)};
  TestServer server(&service, MakeServerCredentials(Files("server", "ca")));
  ASSERT_TRUE(server.ok());
  grpc::Status s = CallHealth(
      MakeChannel(server.address(),
                  ClientSecurity(Files("client", "ca"), "tessera-ps.test")));
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = CallHealth(
      MakeChannel(server.address(),
                  ClientSecurity(Files("client", "ca"), "elsewhere.test")));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, FlagsTurnOnTlsInStartServerAndMakeChannel) {
  FLAGS_tls_cert = Path("server.pem");
  FLAGS_tls_key = Path("server.key");
  FLAGS_tls_ca = Path("ca.pem");
  // The server's certificate serves as the client's too here (it allows
  // clientAuth); the token comes from the environment.
  setenv(kJobTokenEnvVar, kToken, 1);
  absl::StatusOr<ChannelSecurity> security = ChannelSecurityFromFlags();
  unsetenv(kJobTokenEnvVar);
  ASSERT_TRUE(security.ok()) << security.status();
  ASSERT_TRUE(security->tls.has_value());
  TokenCheckingWorker service{RpcAuth(kToken)};
  int port = 0;
  std::unique_ptr<grpc::Server> server = StartServer(
      "127.0.0.1:0", &service,
      {.listen_host = "127.0.0.1", .tls = security->tls}, nullptr, &port);
  ASSERT_NE(server, nullptr);
  ASSERT_NE(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  grpc::Status s = CallHealth(MakeChannel(address, *security));
  EXPECT_TRUE(s.ok()) << s.error_message();
  // Plaintext is refused.
  EXPECT_EQ(CallHealth(MakeChannel(address, ClientSecurity(std::nullopt)))
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  server->Shutdown(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(200));
}

TEST_F(TlsTest, UnreadableTlsFilesAreAnErrorNamingTheFlag) {
  FLAGS_tls_cert = Path("server.pem");
  FLAGS_tls_key = "/nonexistent/server.key";
  FLAGS_tls_ca = Path("ca.pem");
  absl::StatusOr<ChannelSecurity> security = ChannelSecurityFromFlags();
  ASSERT_FALSE(security.ok());
  EXPECT_THAT(security.status().message(),
              HasSubstr("--tls_key=/nonexistent/server.key"));
}

// PEM files were read whole, whatever their size: /dev/zero given for a
// certificate read until memory ran out.
TEST(TlsFlagsTest, EndlessPemFileIsRefusedAtTheCap) {
  FLAGS_tls_cert = "/dev/zero";
  FLAGS_tls_key = "/dev/zero";
  FLAGS_tls_ca = "/dev/zero";
  absl::StatusOr<std::optional<TlsFiles>> tls = TlsFilesFromFlags();
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tls.status().message(),
              HasSubstr("--tls_cert=/dev/zero is larger than 1048576 bytes"));
  FLAGS_tls_cert = "";
  FLAGS_tls_key = "";
  FLAGS_tls_ca = "";
}

}  // namespace
}  // namespace tessera
