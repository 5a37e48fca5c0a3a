// The job token on the wire, gRPC's retry policy and the message size caps,
// through MakeChannel against a real gRPC server on 127.0.0.1.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "common/process/security_flags.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/transport_limits.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/common/rpc/rpc_test_service.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "job-token-for-tests";

class RpcSecurityTest : public ::testing::Test {
 protected:
  RpcSecurityTest()
      : service_(RpcAuth(kToken)),
        server_(&service_, grpc::InsecureServerCredentials()) {}

  void SetUp() override { ASSERT_TRUE(server_.ok()); }
  void TearDown() override {
    FLAGS_job_token_file = "";
    FLAGS_tls_target_name_override = "";
    unsetenv(kJobTokenEnvVar);
  }

  // A channel that attaches nothing: what another user's process has.
  std::shared_ptr<grpc::Channel> BareChannel() {
    return grpc::CreateChannel(server_.address(),
                               grpc::InsecureChannelCredentials());
  }
  std::shared_ptr<grpc::Channel> ChannelWithToken(const std::string& token) {
    ChannelSecurity security;
    security.job_token = token;
    return MakeChannel(server_.address(), security);
  }
  grpc::Status RunStep(const std::shared_ptr<grpc::Channel>& channel) {
    grpc::ClientContext context;
    SetDeadline(&context, 10);
    StepResponse response;
    return Worker::NewStub(channel)->RunStep(&context, StepRequest(),
                                             &response);
  }
  // `add_token` puts the token on the call by hand, for a bare channel.
  grpc::Status Shutdown(const std::shared_ptr<grpc::Channel>& channel,
                        size_t reason_bytes, bool add_token = false) {
    grpc::ClientContext context;
    SetDeadline(&context, 10);
    if (add_token) context.AddMetadata(kJobTokenMetadataKey, kToken);
    ShutdownRequest request;
    request.set_reason(std::string(reason_bytes, 'x'));
    ShutdownResponse response;
    return Worker::NewStub(channel)->Shutdown(&context, request, &response);
  }

  TokenCheckingWorker service_;
  TestServer server_;
};

TEST_F(RpcSecurityTest, CallWithoutTokenIsUnauthenticated) {
  grpc::Status s = CallHealth(BareChannel());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("Worker.Health"));
  EXPECT_THAT(s.error_message(), HasSubstr("carries no job token"));
  EXPECT_EQ(Shutdown(BareChannel(), 1).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(service_.shutdowns(), 0);
}

TEST_F(RpcSecurityTest, WrongTokenIsUnauthenticatedAndNotEchoed) {
  for (const char* wrong :
       {"job-token-for-test", "job-token-for-testsX", "JOB-TOKEN-FOR-TESTS"}) {
    grpc::Status s = CallHealth(ChannelWithToken(wrong));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong;
    EXPECT_THAT(s.error_message(), HasSubstr("wrong job token"));
    EXPECT_THAT(s.error_message(), ::testing::Not(HasSubstr(wrong)));
  }
  EXPECT_EQ(RunStep(ChannelWithToken("nope")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(service_.run_steps(), 0);
}

TEST_F(RpcSecurityTest, MakeChannelSendsTheTokenFromTheEnvironment) {
  setenv(kJobTokenEnvVar, kToken, 1);
  absl::StatusOr<ChannelSecurity> security = ChannelSecurityFromFlags();
  ASSERT_TRUE(security.ok()) << security.status();
  std::shared_ptr<grpc::Channel> channel =
      MakeChannel(server_.address(), *security);
  HealthResponse response;
  grpc::Status s = CallHealth(channel, 5, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.task_type(), "worker");
  // Every call on the channel carries it, not just the first.
  EXPECT_TRUE(RunStep(channel).ok());
  EXPECT_TRUE(CallHealth(channel).ok());
  EXPECT_EQ(service_.run_steps(), 1);
}

TEST_F(RpcSecurityTest, MakeChannelSendsTheTokenFromTheFile) {
  const std::string path =
      ::testing::TempDir() + "/rpc_security_token_" + std::to_string(getpid());
  std::ofstream(path) << kToken << "\n";
  FLAGS_job_token_file = path;
  setenv(kJobTokenEnvVar, "the-file-wins", 1);
  absl::StatusOr<ChannelSecurity> security = ChannelSecurityFromFlags();
  ASSERT_TRUE(security.ok()) << security.status();
  grpc::Status s = CallHealth(MakeChannel(server_.address(), *security));
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(RpcSecurityTest, UnreadableTokenFileIsAnErrorNamingIt) {
  FLAGS_job_token_file = "/nonexistent/tessera-token";
  absl::StatusOr<ChannelSecurity> security = ChannelSecurityFromFlags();
  ASSERT_FALSE(security.ok());
  EXPECT_THAT(security.status().message(),
              HasSubstr("/nonexistent/tessera-token"));
  absl::StatusOr<RpcAuth> auth = RpcAuthFromFlags();
  ASSERT_FALSE(auth.ok());
  EXPECT_THAT(auth.status().message(), HasSubstr("/nonexistent/tessera-token"));
}

TEST_F(RpcSecurityTest, ChannelWithoutTheTokenIsRefused) {
  grpc::Status s =
      CallHealth(MakeChannel(server_.address(), ChannelSecurity()));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(RpcSecurityTest, ServerWithoutTokenAcceptsAnyCall) {
  TokenCheckingWorker open(RpcAuth{});
  TestServer server(&open, grpc::InsecureServerCredentials());
  ASSERT_TRUE(server.ok());
  EXPECT_TRUE(
      CallHealth(grpc::CreateChannel(server.address(),
                                     grpc::InsecureChannelCredentials()))
          .ok());
}

TEST_F(RpcSecurityTest, TargetNameOverrideWithoutTlsIsAnError) {
  FLAGS_tls_target_name_override = "ps0.example";
  absl::StatusOr<ChannelSecurity> security = ChannelSecurityFromFlags();
  ASSERT_FALSE(security.ok());
  EXPECT_THAT(security.status().message(),
              HasSubstr("--tls_target_name_override needs TLS"));
}

class RetryTest : public ::testing::Test {
 protected:
  RetryTest() : server_(&service_, grpc::InsecureServerCredentials()) {}
  void SetUp() override { ASSERT_TRUE(server_.ok()); }

  grpc::Status Health() {
    grpc::ClientContext context;
    SetDeadline(&context, 10);
    HealthResponse response;
    return Coordinator::NewStub(
               MakeChannel(server_.address(), ChannelSecurity()))
        ->Health(&context, HealthRequest(), &response);
  }

  FlakyCoordinator service_;
  TestServer server_;
};

TEST_F(RetryTest, UnavailableIsRetried) {
  service_.FailHealth(2, grpc::StatusCode::UNAVAILABLE);
  grpc::Status s = Health();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(service_.healths(), 3);
}

TEST_F(RetryTest, RetriesStopAfterMaxAttempts) {
  service_.FailHealth(100, grpc::StatusCode::UNAVAILABLE);
  grpc::Status s = Health();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(service_.healths(), kRpcMaxAttempts);
}

TEST_F(RetryTest, OtherErrorsAreAnswersNotRetried) {
  service_.FailHealth(1, grpc::StatusCode::INTERNAL);
  EXPECT_EQ(Health().error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(service_.healths(), 1);
  service_.FailHealth(1, grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Health().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(service_.healths(), 2);
}

TEST_F(RpcSecurityTest, WorkerMethodsAreNotRetried) {
  // The coordinator handles a worker's failure itself (see ChannelArgs).
  service_.FailRunSteps(1, grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(RunStep(ChannelWithToken(kToken)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(service_.run_steps(), 1);
}

TEST_F(RpcSecurityTest, OversizeMessageIsRefusedWithResourceExhausted) {
  const size_t too_big = static_cast<size_t>(kMaxMessageBytes) + 1;
  // A client without Tessera's limits: the server refuses the message.
  grpc::ChannelArguments unlimited;
  unlimited.SetMaxSendMessageSize(-1);
  std::shared_ptr<grpc::Channel> raw = grpc::CreateCustomChannel(
      server_.address(), grpc::InsecureChannelCredentials(), unlimited);
  ASSERT_TRUE(Shutdown(raw, 10, /*add_token=*/true).ok());
  ASSERT_EQ(service_.shutdowns(), 1);
  grpc::Status s = Shutdown(raw, too_big, /*add_token=*/true);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  // MakeChannel's own cap refuses it before it leaves.
  s = Shutdown(ChannelWithToken(kToken), too_big);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  EXPECT_EQ(service_.shutdowns(), 1);
  // The largest chunk plus its header fits.
  EXPECT_TRUE(Shutdown(ChannelWithToken(kToken), kMaxChunkBytes + 1024).ok());
  EXPECT_EQ(service_.shutdowns(), 2);
}

}  // namespace
}  // namespace tessera
