// The worker's two services (Worker and Collective) refuse calls without
// the job's token, over real gRPC servers on 127.0.0.1.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_spec.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/transport_limits.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/collective/ring_allreduce.h"
#include "worker/collective/ring_receiver.h"
#include "worker/training_worker.h"
#include "worker/worker_service.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "worker-auth-test-token";

std::unique_ptr<grpc::Server> Serve(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

std::shared_ptr<grpc::Channel> BareChannel(const std::string& address) {
  return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
}

std::shared_ptr<grpc::Channel> ChannelWithToken(const std::string& address,
                                                const std::string& token) {
  ChannelSecurity security;
  security.job_token = token;
  return MakeChannel(address, security);
}

// A WorkerService over an unconfigured CPU worker whose parameter servers
// are never called.
class WorkerAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ClusterSpec> cluster =
        ClusterSpec::FromParts({{"chief", {"127.0.0.1:1"}},
                                {"worker", {"127.0.0.1:2"}},
                                {"ps", {"127.0.0.1:3"}}},
                               TaskId{"worker", 0});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    worker_ = std::make_unique<TrainingWorker>(
        *cluster, std::make_unique<CpuBackend>(), PsClientOptions{});
    service_ =
        std::make_unique<WorkerService>(worker_.get(), 0, RpcAuth(kToken));
    int port = 0;
    server_ = Serve(service_.get(), &port);
    ASSERT_NE(server_, nullptr);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(200));
    }
    unsetenv(kJobTokenEnvVar);
  }

  // Calls every method of the Worker service through `channel`; the
  // statuses in the order Configure, RunStep, Evaluate, Health, Shutdown.
  std::vector<grpc::Status> CallAll(
      const std::shared_ptr<grpc::Channel>& channel) {
    std::unique_ptr<Worker::Stub> stub = Worker::NewStub(channel);
    std::vector<grpc::Status> out;
    {
      grpc::ClientContext context;
      SetDeadline(&context, 10);
      ConfigureResponse response;
      out.push_back(stub->Configure(&context, WorkerConfig(), &response));
    }
    {
      grpc::ClientContext context;
      SetDeadline(&context, 10);
      StepResponse response;
      out.push_back(stub->RunStep(&context, StepRequest(), &response));
    }
    {
      grpc::ClientContext context;
      SetDeadline(&context, 10);
      EvaluateResponse response;
      out.push_back(stub->Evaluate(&context, EvaluateRequest(), &response));
    }
    {
      grpc::ClientContext context;
      SetDeadline(&context, 10);
      HealthResponse response;
      out.push_back(stub->Health(&context, HealthRequest(), &response));
    }
    {
      grpc::ClientContext context;
      SetDeadline(&context, 10);
      ShutdownResponse response;
      out.push_back(stub->Shutdown(&context, ShutdownRequest(), &response));
    }
    return out;
  }

  std::unique_ptr<TrainingWorker> worker_;
  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

const char* const kMethods[] = {"Worker.Configure", "Worker.RunStep",
                                "Worker.Evaluate", "Worker.Health",
                                "Worker.Shutdown"};

TEST_F(WorkerAuthTest, EveryMethodRefusesACallWithoutTheToken) {
  std::vector<grpc::Status> status = CallAll(BareChannel(address_));
  ASSERT_EQ(status.size(), 5u);
  for (size_t i = 0; i < status.size(); ++i) {
    EXPECT_EQ(status[i].error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << kMethods[i];
    EXPECT_THAT(status[i].error_message(), HasSubstr(kMethods[i]));
    EXPECT_THAT(status[i].error_message(), HasSubstr("no job token"));
  }
  EXPECT_FALSE(service_->shutdown_requested().HasBeenNotified());
}

TEST_F(WorkerAuthTest, EveryMethodRefusesAWrongToken) {
  std::vector<grpc::Status> status =
      CallAll(ChannelWithToken(address_, "worker-auth-test-tokeN"));
  for (size_t i = 0; i < status.size(); ++i) {
    EXPECT_EQ(status[i].error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << kMethods[i];
    EXPECT_THAT(status[i].error_message(), HasSubstr("wrong job token"));
  }
  EXPECT_FALSE(service_->shutdown_requested().HasBeenNotified());
}

TEST_F(WorkerAuthTest, TheRightTokenFromTheEnvironmentGetsThrough) {
  setenv(kJobTokenEnvVar, kToken, 1);
  // As tessera_worker's StartProcess reads it: no --job_token_file, so
  // the environment's token.
  absl::StatusOr<std::string> token = LoadJobToken("");
  ASSERT_TRUE(token.ok()) << token.status();
  std::vector<grpc::Status> status =
      CallAll(MakeChannel(address_, ChannelSecurity{.job_token = *token}));
  // Configure, RunStep and Evaluate reach the worker, which answers for
  // itself (an empty config; not configured yet); Health and Shutdown
  // succeed.
  EXPECT_FALSE(status[0].ok());
  EXPECT_NE(status[0].error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << status[0].error_message();
  EXPECT_EQ(status[1].error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << status[1].error_message();
  EXPECT_EQ(status[2].error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << status[2].error_message();
  EXPECT_TRUE(status[3].ok()) << status[3].error_message();
  EXPECT_TRUE(status[4].ok()) << status[4].error_message();
  EXPECT_TRUE(service_->shutdown_requested().HasBeenNotified());
}

// RunSteps, a server stream, checks the token as the unary calls do, and
// ends with the first step's refusal, having streamed no response.
TEST_F(WorkerAuthTest, RunStepsChecksTheTokenAndReportsTheFirstFailure) {
  StepsRequest request;
  request.add_steps()->set_step(7);
  request.add_steps()->set_step(8);
  {
    grpc::ClientContext context;
    SetDeadline(&context, 10);
    std::unique_ptr<grpc::ClientReader<StepResponse>> reader =
        Worker::NewStub(BareChannel(address_))->RunSteps(&context, request);
    StepResponse response;
    EXPECT_FALSE(reader->Read(&response));
    grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(s.error_message(), HasSubstr("Worker.RunSteps"));
  }
  grpc::ClientContext context;
  SetDeadline(&context, 10);
  std::unique_ptr<grpc::ClientReader<StepResponse>> reader =
      Worker::NewStub(ChannelWithToken(address_, kToken))
          ->RunSteps(&context, request);
  StepResponse response;
  EXPECT_FALSE(reader->Read(&response));  // step 7 did not run
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("not configured"));
}

TEST_F(WorkerAuthTest, OversizeStepRequestIsRefusedWithResourceExhausted) {
  grpc::ChannelArguments unlimited;
  unlimited.SetMaxSendMessageSize(-1);
  std::shared_ptr<grpc::Channel> raw = grpc::CreateCustomChannel(
      address_, grpc::InsecureChannelCredentials(), unlimited);
  StepRequest request;
  request.set_example_ids(std::string(kMaxMessageBytes + 8, '\0'));
  grpc::ClientContext context;
  SetDeadline(&context, 10);
  context.AddMetadata(kJobTokenMetadataKey, kToken);
  StepResponse response;
  grpc::Status s = Worker::NewStub(raw)->RunStep(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
}

TEST(CollectiveAuthTest, ExchangeWithoutTheTokenIsRefusedUnread) {
  RingReceiver receiver(1, 2, "rank 0", RpcAuth(kToken));
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&receiver, &port);
  ASSERT_NE(server, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  for (const std::shared_ptr<grpc::Channel>& channel :
       {BareChannel(address), ChannelWithToken(address, "wrong")}) {
    grpc::ClientContext context;
    SetDeadline(&context, 10);
    std::unique_ptr<grpc::ClientReaderWriter<CollectiveChunk, ExchangeResponse>>
        stream = Collective::NewStub(channel)->Exchange(&context);
    CollectiveChunk header;
    header.set_generation(1);
    header.set_sender_rank(0);
    header.set_num_ranks(2);
    stream->Write(header);
    stream->WritesDone();
    grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(s.error_message(), HasSubstr("Collective.Exchange"));
  }
  server->Shutdown(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(200));
}

// Two ranks, each with its own server; each rank's receiver checks, and
// its channel to the right neighbour carries, the token of its options,
// as in tessera_worker.
class TokenRing {
 public:
  TokenRing(const char* rank0_token, const char* rank1_token) {
    const char* tokens[] = {rank0_token, rank1_token};
    std::vector<std::string> peers;
    for (int r = 0; r < 2; ++r) {
      RingAllReduceOptions options;
      options.security.job_token = tokens[r];
      auto ring = RingAllReduce::Create(r, 2, options);
      EXPECT_TRUE(ring.ok()) << ring.status();
      ranks_.push_back(*std::move(ring));
      grpc::ServerBuilder builder;
      int port = 0;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                               &port);
      ConfigureServerBuilder(&builder);
      ranks_.back()->RegisterService(&builder);
      servers_.push_back(builder.BuildAndStart());
      peers.push_back(absl::StrCat("127.0.0.1:", port));
    }
    for (auto& rank : ranks_) EXPECT_TRUE(rank->SetPeers(peers).ok());
  }
  ~TokenRing() {
    for (auto& server : servers_) {
      server->Shutdown(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(200));
    }
  }

  // One all-reduce of {1, 2, 3} and {10, 20, 30}; each rank's status.
  std::vector<absl::Status> Run(std::vector<std::vector<float>>* data) {
    *data = {{1, 2, 3}, {10, 20, 30}};
    std::vector<absl::Status> out(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        out[r] = ranks_[r]->AllReduce(absl::MakeSpan((*data)[r]));
      });
    }
    for (std::thread& t : threads) t.join();
    return out;
  }

 private:
  std::vector<std::unique_ptr<RingAllReduce>> ranks_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
};

TEST(CollectiveAuthTest, RingWithTheJobTokenSums) {
  TokenRing ring(kToken, kToken);
  std::vector<std::vector<float>> data;
  std::vector<absl::Status> status = ring.Run(&data);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_THAT(data[r], ::testing::ElementsAre(11, 22, 33));
  }
}

TEST(CollectiveAuthTest, RingWithAnotherJobsTokenFails) {
  TokenRing ring(kToken, "another-jobs-token");
  std::vector<std::vector<float>> data;
  std::vector<absl::Status> status = ring.Run(&data);
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(status[r].ok()) << "rank " << r;
  }
  EXPECT_TRUE(absl::StrContains(status[0].ToString(), "wrong job token") ||
              absl::StrContains(status[1].ToString(), "wrong job token"))
      << status[0] << " / " << status[1];
}

}  // namespace
}  // namespace tessera
