// The event pool's order of service (common/data_plane/event_listener.h):
// a small request found ready is served before a large one that became
// ready before it. The order itself is ReadyQueues' (ready_queues_test.cc);
// this checks that the pool follows it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/data_plane/event_listener.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/socket.h"

namespace tessera {
namespace event_listener_order_test {

// Requests carry no payload; `a` names the request. kPullRows is small,
// every other op large; a request with flags = kBlock holds its pool
// thread until `release`.
constexpr uint16_t kBlock = 1;

struct Served {
  absl::Mutex mu;
  std::vector<int64_t> order ABSL_GUARDED_BY(mu);
  absl::Notification blocking;
  absl::Notification release;
};

class RecordingConnection : public PooledConnection {
 public:
  explicit RecordingConnection(Served* served) : served_(served) {}

  bool ServeOne(Socket& socket, const char* head) override {
    FrameHeader request;
    if (!DecodeFrameHeader(head, &request).ok()) return false;
    {
      absl::MutexLock lock(&served_->mu);
      served_->order.push_back(request.a);
    }
    if (request.flags == kBlock) {
      served_->blocking.Notify();
      served_->release.WaitForNotification();
    }
    FrameHeader reply;
    reply.op = FrameOp::kPushDenseReply;
    reply.a = request.a;
    char raw[kFrameHeaderBytes];
    EncodeFrameHeader(reply, raw);
    return socket.WriteFull(raw, sizeof(raw)).ok();
  }

  bool Small(const char* head) override {
    FrameHeader request;
    return DecodeFrameHeader(head, &request).ok() &&
           request.op == FrameOp::kPullRows;
  }

 private:
  Served* const served_;
};

Socket Connected(int port) {
  absl::StatusOr<Socket> socket = Socket::Connect("127.0.0.1", port, 10);
  EXPECT_TRUE(socket.ok()) << socket.status();
  EXPECT_TRUE(OfferDataPlaneHandshake(*socket, "").ok());
  return *std::move(socket);
}

void Send(Socket& socket, FrameOp op, int64_t name, uint16_t flags = 0) {
  FrameHeader request;
  request.op = op;
  request.flags = flags;
  request.a = name;
  char raw[kFrameHeaderBytes];
  EncodeFrameHeader(request, raw);
  ASSERT_TRUE(socket.WriteFull(raw, sizeof(raw)).ok());
}

int64_t ReplyName(Socket& socket) {
  FrameHeader reply;
  EXPECT_TRUE(ReadFrameHeader(socket, &reply).ok());
  return reply.a;
}

TEST(EventListenerOrderTest, SmallRequestGoesAheadOfALargeOneReadyBefore) {
  Served served;
  EventListenerOptions options;
  options.host = "127.0.0.1";
  options.threads = 1;
  absl::StatusOr<std::unique_ptr<EventListener>> listener =
      EventListener::Start(options, [&served] {
        return std::make_unique<RecordingConnection>(&served);
      });
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int port = (*listener)->port();
  // Each handshake's last step on the one pool thread also arms its wait,
  // so `large` and `small` wait in epoll before `blocker` is served.
  Socket large = Connected(port);
  Socket small = Connected(port);
  Socket blocker = Connected(port);
  Send(blocker, FrameOp::kPushDense, 1, kBlock);
  served.blocking.WaitForNotification();
  // Both arrive while the pool's only thread is busy, the large one first.
  Send(large, FrameOp::kPushDense, 2);
  Send(small, FrameOp::kPullRows, 3);
  served.release.Notify();
  EXPECT_EQ(ReplyName(blocker), 1);
  EXPECT_EQ(ReplyName(small), 3);
  EXPECT_EQ(ReplyName(large), 2);
  absl::MutexLock lock(&served.mu);
  EXPECT_EQ(served.order, (std::vector<int64_t>{1, 3, 2}));
}

TEST(EventListenerOrderTest, SmallPerLargeBelowOneIsRefused) {
  EventListenerOptions options;
  options.host = "127.0.0.1";
  options.small_per_large = 0;
  absl::StatusOr<std::unique_ptr<EventListener>> listener =
      EventListener::Start(options,
                           [] { return std::unique_ptr<PooledConnection>(); });
  ASSERT_FALSE(listener.ok());
  EXPECT_EQ(listener.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(listener.status().message()),
      ::testing::HasSubstr("small_per_large must be at least 1, not 0"));
}

}  // namespace event_listener_order_test
}  // namespace tessera
