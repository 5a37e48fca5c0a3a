// RingReceiver behind a real gRPC server (or a data plane listener) on
// 127.0.0.1, fed by hand-made Exchange streams (or data plane
// connections: the same checks must give the same answers).
#include "worker/collective/ring_receiver.h"

#include <sys/uio.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/listener.h"
#include "common/data_plane/socket.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "worker/collective/ring_wire.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

class RingReceiverTest : public ::testing::TestWithParam<DataPlaneKind> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Listener>> listener = Listener::Start(
        "127.0.0.1", 0, [this](Socket& socket) { receiver_.ServeTcp(socket); });
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = *std::move(listener);
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
    receiver_.Stop();
    listener_.reset();
  }

  // Opens a stream (or connection) from rank 0 with a header for call
  // `generation` and returns how the receiver ended it.
  absl::Status SendHeader(uint64_t generation) {
    return GetParam() == DataPlaneKind::kTcp ? SendTcpHeader(generation)
                                             : SendGrpcHeader(generation);
  }

  absl::Status SendTcpHeader(uint64_t generation) {
    absl::StatusOr<Socket> socket =
        Socket::Connect("127.0.0.1", listener_->port(), 10);
    if (!socket.ok()) return socket.status();
    FrameHeader header;
    header.op = FrameOp::kRingHeader;
    header.a = static_cast<int64_t>(generation);
    header.b = 4;      // elements
    header.count = 2;  // ranks
    header.bytes = kRingHeaderPayloadBytes;
    char raw[kFrameHeaderBytes];
    EncodeFrameHeader(header, raw);
    int64_t sender_rank = 0;
    const iovec parts[2] = {{raw, sizeof(raw)},
                            {&sender_rank, sizeof(sender_rank)}};
    if (absl::Status s = socket->WriteAll(parts); !s.ok()) return s;
    FrameHeader reply;
    return ReadReplyHeader(*socket, FrameOp::kRingReply, &reply);
  }

  absl::Status SendGrpcHeader(uint64_t generation) {
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
    grpc::Status s = stream->Finish();
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        s.error_message());
  }

  // Rank 1 of 2; an empty token accepts every stream.
  RingReceiver receiver_{1, 2, "rank 0 (left)", RpcAuth()};
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Listener> listener_;  // before the receiver goes
};

INSTANTIATE_TEST_SUITE_P(
    Transports, RingReceiverTest,
    ::testing::Values(DataPlaneKind::kGrpc, DataPlaneKind::kTcp),
    [](const ::testing::TestParamInfo<DataPlaneKind>& info) {
      return std::string(DataPlaneName(info.param));
    });

// Calls count from 1; a stream of call 0 before any call has begun (or
// failed) once matched the "latest failed call" and was ended with OK.
TEST_P(RingReceiverTest, StreamOfGenerationZeroIsRefused) {
  absl::Status s = SendHeader(0);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("call 0"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0 (left)"));
}

// A stream of a call that ended with an error gets that error.
TEST_P(RingReceiverTest, LateStreamOfAFailedCallGetsItsError) {
  RingSchedule schedule(2, 1, 4);
  float data[4] = {0, 0, 0, 0};
  RingCall call(1, &schedule, data);
  receiver_.Begin(&call);
  receiver_.End(&call, absl::UnavailableError("right neighbour is gone"));
  absl::Status s = SendHeader(1);
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("right neighbour is gone"));
  // Call 0 still never existed.
  EXPECT_TRUE(absl::IsInvalidArgument(SendHeader(0)));
}

// A worker told to stop ends the step waiting for its left neighbour at
// once, not at the all-reduce deadline (#48: a stopped worker waited two
// minutes), and a Restart of the ring does not take the stop back.
TEST(RingReceiverShutDownTest, WaiterGetsTheStopBeforeItsDeadlineForGood) {
  RingReceiver receiver(1, 2, "rank 0 (left)", RpcAuth());
  const RingSchedule schedule(2, 1, 4);
  float data[4] = {0, 0, 0, 0};
  RingCall call(1, &schedule, data);
  receiver.Begin(&call);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::Status waited;
  absl::Time returned;
  std::thread waiter([&] {
    waited = receiver.WaitReceived(&call, -1, 0, deadline,
                                   /*stop_when_send_ends=*/false);
    returned = absl::Now();
  });
  receiver.ShutDown(absl::CancelledError("worker 1 is stopping (SIGTERM)"));
  waiter.join();
  EXPECT_TRUE(absl::IsCancelled(waited)) << waited;
  EXPECT_THAT(std::string(waited.message()), HasSubstr("stopping (SIGTERM)"));
  EXPECT_LT(returned, deadline);
  receiver.End(&call, waited);

  receiver.ClearAbort();  // what Restart and Reform do
  EXPECT_TRUE(absl::IsCancelled(receiver.aborted())) << receiver.aborted();
  RingCall next(2, &schedule, data);
  receiver.Begin(&next);
  absl::Status s = receiver.WaitReceived(&next, -1, 0, deadline, false);
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  receiver.End(&next, s);
}

}  // namespace
}  // namespace tessera
