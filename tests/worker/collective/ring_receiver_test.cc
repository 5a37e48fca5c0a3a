// RingReceiver behind a real gRPC server on 127.0.0.1, fed by hand-made
// Exchange streams.
#include "worker/collective/ring_receiver.h"

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc_channel.h"
#include "common/rpc_auth.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

class RingReceiverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&receiver_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(200));
  }

  // Opens a stream from rank 0 with a header for call `generation` and
  // returns how the receiver ended it.
  grpc::Status SendHeader(uint64_t generation) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    std::unique_ptr<grpc::ClientReaderWriter<CollectiveChunk, ExchangeResponse>>
        stream = Collective::NewStub(channel_)->Exchange(&context);
    CollectiveChunk header;
    header.set_generation(generation);
    header.set_sender_rank(0);
    header.set_num_ranks(2);
    header.set_num_elements(4);
    stream->Write(header);
    stream->WritesDone();
    return stream->Finish();
  }

  // Rank 1 of 2; an empty token accepts every stream.
  RingReceiver receiver_{1, 2, "rank 0 (left)", RpcAuth()};
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Calls count from 1; a stream of call 0 before any call has begun (or
// failed) once matched the "latest failed call" and was ended with OK.
TEST_F(RingReceiverTest, StreamOfGenerationZeroIsRefused) {
  grpc::Status s = SendHeader(0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("call 0"));
  EXPECT_THAT(s.error_message(), HasSubstr("rank 0 (left)"));
}

// A stream of a call that ended with an error gets that error.
TEST_F(RingReceiverTest, LateStreamOfAFailedCallGetsItsError) {
  RingSchedule schedule(2, 1, 4);
  float data[4] = {0, 0, 0, 0};
  RingCall call(1, &schedule, data);
  receiver_.Begin(&call);
  receiver_.End(&call, absl::UnavailableError("right neighbour is gone"));
  grpc::Status s = SendHeader(1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("right neighbour is gone"));
  // Call 0 still never existed.
  EXPECT_EQ(SendHeader(0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace tessera
