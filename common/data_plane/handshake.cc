#include "common/data_plane/handshake.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

constexpr char kHelloMagic[4] = {'T', 'S', 'D', 'H'};
constexpr uint8_t kVersion = 1;
constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
constexpr size_t kHelloBytes = 8 + kNonceBytes;
// hello[6]: TLS comes next (the clear greeting of a TLS server).
constexpr uint8_t kHelloTls = 1;
// hello[7]: the server refuses the connection; its code and reason follow.
constexpr uint8_t kHelloRefused = 1;
constexpr uint32_t kMaxReasonBytes = 4096;

// HMAC-SHA256(token, role | server nonce | client nonce).
bool Mac(const std::string& token, const char* role, const uint8_t* server,
         const uint8_t* client, uint8_t* out) {
  std::string message(role);
  message.append(reinterpret_cast<const char*>(server), kNonceBytes);
  message.append(reinterpret_cast<const char*>(client), kNonceBytes);
  unsigned int len = 0;
  return HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
              reinterpret_cast<const uint8_t*>(message.data()), message.size(),
              out, &len) != nullptr &&
         len == kMacBytes;
}

absl::Status Refuse(Socket& socket, const absl::Status& why) {
  const int32_t code = static_cast<int32_t>(why.code());
  const uint32_t len = static_cast<uint32_t>(
      std::min<size_t>(why.message().size(), kMaxReasonBytes));
  char head[8];
  std::memcpy(head, &code, 4);
  std::memcpy(head + 4, &len, 4);
  const iovec parts[2] = {{head, sizeof(head)},
                          {const_cast<char*>(why.message().data()), len}};
  socket.WriteAll(parts).IgnoreError();
  return why;
}

// Reads the code, length and reason of a refusal (Refuse's layout).
absl::Status ReadRefusal(Socket& socket, int32_t code, bool code_read,
                         absl::StatusCode otherwise, const char* fallback) {
  if (!code_read) {
    char head[4];
    if (absl::Status s = socket.ReadFull(head, sizeof(head)); !s.ok()) {
      return s;
    }
    std::memcpy(&code, head, 4);
  }
  uint32_t len = 0;
  std::string reason;
  if (socket.ReadFull(&len, sizeof(len)).ok() && len <= kMaxReasonBytes) {
    reason.resize(len);
    if (!socket.ReadFull(reason.data(), len).ok()) reason.clear();
  }
  return absl::Status(
      code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : otherwise,
      reason.empty() ? fallback : reason);
}

// Reads a server's greeting into `hello` and checks that it is one; a
// refusal greeting is returned as the server's error.
absl::Status ReadGreeting(Socket& socket, uint8_t (&hello)[kHelloBytes]) {
  if (absl::Status s = socket.ReadFull(hello, sizeof(hello)); !s.ok()) {
    return s;
  }
  if (std::memcmp(hello, kHelloMagic, sizeof(kHelloMagic)) != 0 ||
      hello[4] != kVersion) {
    return absl::UnavailableError(
        "data plane: the server's greeting is not a Tessera data plane's "
        "(version 1)");
  }
  if (hello[7] == kHelloRefused) {
    return ReadRefusal(socket, 0, false, absl::StatusCode::kUnavailable,
                       "data plane: the server refused the connection");
  }
  return absl::OkStatus();
}

}  // namespace

static_assert(kNonceBytes == 32,
              "DataPlaneHandshakeServer::nonce_ holds one server nonce");

absl::Status DataPlaneHandshakeServer::SendHello(Socket& socket) {
  uint8_t hello[kHelloBytes] = {};
  std::memcpy(hello, kHelloMagic, sizeof(kHelloMagic));
  hello[4] = kVersion;
  hello[5] = token_.empty() ? 0 : 1;
  if (RAND_bytes(nonce_, kNonceBytes) != 1) {
    return absl::InternalError("data plane: no random bytes for a nonce");
  }
  std::memcpy(hello + 8, nonce_, kNonceBytes);
  return socket.WriteFull(hello, sizeof(hello));
}

absl::Status DataPlaneHandshakeServer::Finish(Socket& socket) {
  const std::string& token = token_;
  const uint8_t* const server_nonce = nonce_;
  uint8_t answer[kNonceBytes + kMacBytes];
  if (absl::Status s = socket.ReadFull(answer, sizeof(answer)); !s.ok()) {
    return s;
  }
  const uint8_t* client_nonce = answer;
  uint8_t reply[4 + kMacBytes] = {};
  if (!token.empty()) {
    uint8_t expected[kMacBytes];
    if (!Mac(token, "tessera-dp-client", server_nonce, client_nonce,
             expected)) {
      return Refuse(socket, absl::InternalError("data plane: HMAC failed"));
    }
    if (CRYPTO_memcmp(expected, answer + kNonceBytes, kMacBytes) != 0) {
      return Refuse(socket,
                    absl::UnauthenticatedError(
                        "data plane: the connection did not prove it holds "
                        "the job token (missing or wrong token)"));
    }
    if (!Mac(token, "tessera-dp-server", server_nonce, client_nonce,
             reply + 4)) {
      return Refuse(socket, absl::InternalError("data plane: HMAC failed"));
    }
  }
  return socket.WriteFull(reply, sizeof(reply));
}

absl::Status AcceptDataPlaneHandshake(Socket& socket,
                                      const std::string& token) {
  DataPlaneHandshakeServer server(token);
  if (absl::Status s = server.SendHello(socket); !s.ok()) return s;
  return server.Finish(socket);
}

absl::Status SendRefusalGreeting(Socket& socket, const absl::Status& why) {
  uint8_t hello[kHelloBytes] = {};
  std::memcpy(hello, kHelloMagic, sizeof(kHelloMagic));
  hello[4] = kVersion;
  hello[7] = kHelloRefused;
  if (absl::Status s = socket.WriteFull(hello, sizeof(hello)); !s.ok()) {
    return s;
  }
  Refuse(socket, why).IgnoreError();
  return absl::OkStatus();
}

absl::Status OfferDataPlaneHandshake(Socket& socket, const std::string& token) {
  uint8_t hello[kHelloBytes];
  if (absl::Status s = ReadGreeting(socket, hello); !s.ok()) return s;
  if (hello[6] == kHelloTls) {
    return absl::UnavailableError(
        "data plane: the server requires TLS, and this process has no TLS "
        "files (--tls_cert, --tls_key, --tls_ca)");
  }
  const bool server_checks = hello[5] != 0;
  const uint8_t* server_nonce = hello + 8;
  uint8_t answer[kNonceBytes + kMacBytes] = {};
  if (RAND_bytes(answer, kNonceBytes) != 1) {
    return absl::InternalError("data plane: no random bytes for a nonce");
  }
  if (server_checks) {
    if (token.empty()) {
      // Answer anyway, so the server says why; the zero MAC fails.
    } else if (!Mac(token, "tessera-dp-client", server_nonce, answer,
                    answer + kNonceBytes)) {
      return absl::InternalError("data plane: HMAC failed");
    }
  }
  if (absl::Status s = socket.WriteFull(answer, sizeof(answer)); !s.ok()) {
    return s;
  }
  char head[4];
  if (absl::Status s = socket.ReadFull(head, sizeof(head)); !s.ok()) return s;
  int32_t code;
  std::memcpy(&code, head, 4);
  if (code != 0) {
    return ReadRefusal(socket, code, true, absl::StatusCode::kUnauthenticated,
                       "data plane: handshake refused");
  }
  uint8_t proof[kMacBytes];
  if (absl::Status s = socket.ReadFull(proof, sizeof(proof)); !s.ok()) {
    return s;
  }
  if (!token.empty() && server_checks) {
    uint8_t expected[kMacBytes];
    if (!Mac(token, "tessera-dp-server", server_nonce, answer, expected)) {
      return absl::InternalError("data plane: HMAC failed");
    }
    if (CRYPTO_memcmp(expected, proof, kMacBytes) != 0) {
      return absl::UnauthenticatedError(
          "data plane: the server did not prove it holds the job token");
    }
  }
  return absl::OkStatus();
}

absl::Status SendTlsGreeting(Socket& socket) {
  uint8_t hello[kHelloBytes] = {};
  std::memcpy(hello, kHelloMagic, sizeof(kHelloMagic));
  hello[4] = kVersion;
  hello[6] = kHelloTls;
  return socket.WriteFull(hello, sizeof(hello));
}

absl::Status ReadTlsGreeting(Socket& socket) {
  uint8_t hello[kHelloBytes];
  if (absl::Status s = ReadGreeting(socket, hello); !s.ok()) return s;
  if (hello[6] != kHelloTls) {
    return absl::UnavailableError(
        "data plane: the server speaks no TLS (its parameter server runs "
        "without --tls_*), and this process requires it");
  }
  return absl::OkStatus();
}

}  // namespace tessera
