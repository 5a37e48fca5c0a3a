// The data plane's token handshake between a real Listener and client
// sockets on loopback: the right token passes both ways, a missing or
// wrong one is refused with UNAUTHENTICATED, and a server without a token
// takes every client, as its gRPC service does; a refusal greeting
// reaches the client as the server's error.

#include "common/data_plane/handshake.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/listener.h"
#include "common/data_plane/socket.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// A server that runs the handshake with `token` and, when it passes,
// echoes one frame header back.
std::unique_ptr<Listener> EchoServer(const std::string& token) {
  absl::StatusOr<std::unique_ptr<Listener>> listener =
      Listener::Start("127.0.0.1", 0, [token](Socket& socket) {
        if (!AcceptDataPlaneHandshake(socket, token).ok()) return;
        char raw[kFrameHeaderBytes];
        if (socket.ReadFull(raw, sizeof(raw)).ok()) {
          socket.WriteFull(raw, sizeof(raw)).IgnoreError();
        }
      });
  EXPECT_TRUE(listener.ok()) << listener.status();
  return listener.ok() ? *std::move(listener) : nullptr;
}

absl::Status Handshake(const Listener& server, const std::string& token,
                       Socket* out = nullptr) {
  absl::StatusOr<Socket> socket =
      Socket::Connect("127.0.0.1", server.port(), 5);
  if (!socket.ok()) return socket.status();
  absl::Status s = OfferDataPlaneHandshake(*socket, token);
  if (out != nullptr) *out = *std::move(socket);
  return s;
}

TEST(DataPlaneHandshakeTest, RightTokenPassesAndTheConnectionWorks) {
  std::unique_ptr<Listener> server = EchoServer("s3cret-token");
  ASSERT_NE(server, nullptr);
  Socket socket;
  ASSERT_TRUE(Handshake(*server, "s3cret-token", &socket).ok());
  FrameHeader header;
  header.op = FrameOp::kPushDense;
  header.count = 3;
  header.a = -7;
  header.bytes = 123;
  char raw[kFrameHeaderBytes];
  EncodeFrameHeader(header, raw);
  ASSERT_TRUE(socket.WriteFull(raw, sizeof(raw)).ok());
  FrameHeader echoed;
  ASSERT_TRUE(ReadFrameHeader(socket, &echoed).ok());
  EXPECT_EQ(echoed.op, FrameOp::kPushDense);
  EXPECT_EQ(echoed.count, 3u);
  EXPECT_EQ(echoed.a, -7);
  EXPECT_EQ(echoed.bytes, 123);
}

TEST(DataPlaneHandshakeTest, MissingOrWrongTokenIsUnauthenticated) {
  std::unique_ptr<Listener> server = EchoServer("s3cret-token");
  ASSERT_NE(server, nullptr);
  for (const std::string token :
       {"", "s3cret-tokeN", "s3cret-token-and-more"}) {
    SCOPED_TRACE(token);
    absl::Status s = Handshake(*server, token);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    EXPECT_THAT(s.message(), HasSubstr("job token"));
    // The token is never echoed in an error.
    EXPECT_THAT(std::string(s.message()), ::testing::Not(HasSubstr("s3cret")));
  }
}

TEST(DataPlaneHandshakeTest, ServerWithoutTokenAcceptsEveryClient) {
  std::unique_ptr<Listener> server = EchoServer("");
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(Handshake(*server, "").ok());
  EXPECT_TRUE(Handshake(*server, "any-token").ok());
}

// A server that does not hold the token cannot pose as the job's: it
// cannot answer the client's nonce.
TEST(DataPlaneHandshakeTest, ImpostorServerIsRefusedByTheClient) {
  std::unique_ptr<Listener> server = EchoServer("another-jobs-token");
  ASSERT_NE(server, nullptr);
  absl::Status s = Handshake(*server, "s3cret-token");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
}

TEST(DataPlaneSocketTest, PeerClosingIsUnavailableAndSilenceIsDeadline) {
  absl::Notification release;
  absl::StatusOr<std::unique_ptr<Listener>> closer =
      Listener::Start("127.0.0.1", 0, [](Socket& socket) { socket.Close(); });
  ASSERT_TRUE(closer.ok());
  absl::StatusOr<Socket> a = Socket::Connect("127.0.0.1", (*closer)->port(), 5);
  ASSERT_TRUE(a.ok());
  char byte;
  EXPECT_EQ(a->ReadFull(&byte, 1).code(), absl::StatusCode::kUnavailable);

  absl::StatusOr<std::unique_ptr<Listener>> silent = Listener::Start(
      "127.0.0.1", 0, [&release](Socket&) { release.WaitForNotification(); });
  ASSERT_TRUE(silent.ok());
  absl::StatusOr<Socket> b =
      Socket::Connect("127.0.0.1", (*silent)->port(), 0.2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->ReadFull(&byte, 1).code(), absl::StatusCode::kDeadlineExceeded);
  release.Notify();

  // Nothing listens on a port just released.
  int port = (*closer)->port();
  closer->reset();
  EXPECT_EQ(Socket::Connect("127.0.0.1", port, 5).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(DataPlaneHandshakeTest, RefusalGreetingGivesTheClientTheCodeAndReason) {
  // What a server out of descriptors sends (descriptor_limit.h): the
  // client, with TLS files or without, returns the server's code and
  // reason instead of a broken handshake.
  const absl::Status why = absl::ResourceExhaustedError(
      "data plane: the parameter server has no descriptor left");
  absl::StatusOr<std::unique_ptr<Listener>> server =
      Listener::Start("127.0.0.1", 0, [why](Socket& socket) {
        SendRefusalGreeting(socket, why).IgnoreError();
      });
  ASSERT_TRUE(server.ok()) << server.status();
  for (bool tls : {false, true}) {
    absl::StatusOr<Socket> socket =
        Socket::Connect("127.0.0.1", (*server)->port(), 5);
    ASSERT_TRUE(socket.ok());
    absl::Status s = tls ? ReadTlsGreeting(*socket)
                         : OfferDataPlaneHandshake(*socket, "any-token");
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_THAT(s.message(), HasSubstr("no descriptor left"));
  }
}

}  // namespace
}  // namespace tessera
