// The data plane's handshake: proves to each end, before any tensor byte
// moves, that the other holds the job's token (common/rpc/rpc_auth.h), without
// sending the token. Challenge-response with HMAC-SHA256 (OpenSSL's
// libcrypto) over fresh random nonces from both ends:
//
//   server -> client  "TSDH" | version (1) | auth (1: token required) |
//                     tls (0) | zero byte | server nonce (32)
//   client -> server  client nonce (32) |
//                     HMAC(token, "tessera-dp-client" | nonces) (32)
//   server -> client  code (4; absl::StatusCode) |
//                     HMAC(token, "tessera-dp-server" | nonces) (32)
//                     or, when code != 0, a 4-byte length and the reason.
//
// A server without a token accepts every client (and asks for no proof),
// as its gRPC service does; a server with one refuses a client that lacks
// it with UNAUTHENTICATED. A client with a token checks the server's
// answer too, so a process that does not hold the token cannot pose as a
// parameter server. Replayed answers are useless: both nonces are new per
// connection.
//
// A server with TLS (common/data_plane/tls.h) first sends, in the clear, a
// greeting of the same 40 bytes with tls = 1 and no nonce, then runs TLS,
// and the exchange above inside it. A client without TLS reads that
// greeting as its hello and stops with a clear error, rather than both
// ends waiting for the other to speak first; a client with TLS that finds
// tls = 0 stops likewise.
//
// A server that cannot take the connection (no descriptor left) sends, in
// the clear, a greeting with refused = 1 (byte 7) and no nonce, then the
// code (4) and a 4-byte length and the reason, and closes; a client,
// with TLS or without, returns that code and reason.
#ifndef TESSERA_COMMON_DATA_PLANE_HANDSHAKE_H_
#define TESSERA_COMMON_DATA_PLANE_HANDSHAKE_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/data_plane/socket.h"

namespace tessera {

// The server's side in two halves, so that an event-driven server waits
// for the client's answer without holding a thread: SendHello writes the
// greeting with a fresh nonce, Finish reads and checks the answer and
// replies, with AcceptDataPlaneHandshake's result.
class DataPlaneHandshakeServer {
 public:
  explicit DataPlaneHandshakeServer(std::string token)
      : token_(std::move(token)) {}
  absl::Status SendHello(Socket& socket);
  // REQUIRES: SendHello returned OK on `socket`.
  absl::Status Finish(Socket& socket);

 private:
  std::string token_;
  uint8_t nonce_[32] = {};
};

// The server's side, on a freshly accepted connection. OK when the client
// proved it holds `token` (or `token` is empty); otherwise the client has
// been told why (UNAUTHENTICATED) and the caller closes the connection.
absl::Status AcceptDataPlaneHandshake(Socket& socket, const std::string& token);

// The client's side, on a freshly made connection. UNAUTHENTICATED when
// the server refused `token` or failed to prove it holds it; UNAVAILABLE
// when the connection broke.
absl::Status OfferDataPlaneHandshake(Socket& socket, const std::string& token);

// The clear greeting of a TLS server, sent on a freshly accepted
// connection before TLS starts.
absl::Status SendTlsGreeting(Socket& socket);

// The greeting of a server refusing the connection with `why` (not OK),
// sent in the clear on a freshly accepted connection before closing it.
absl::Status SendRefusalGreeting(Socket& socket, const absl::Status& why);

// Reads the server's clear greeting on a freshly made connection: OK when
// it announces TLS; UNAVAILABLE saying so when the server speaks none, or
// is no data plane.
absl::Status ReadTlsGreeting(Socket& socket);

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_PLANE_HANDSHAKE_H_
