// TLS on the data plane's connections (issue #18), made from the job's
// PEM files (common/rpc/tls_files.h) with the trust model of its gRPC
// channels (common/rpc/tls_credentials.h): a server shows its certificate and
// requires one from the client that the job's CA signed; a client shows
// its own and accepts only a server whose certificate the CA signed and
// names the host it dialled (or the name it was told to expect instead,
// as --tls_target_name_override tells gRPC). TLS 1.2 or later.
//
// Records are encrypted by the kernel (kTLS) where it offers that (Linux's
// `tls` module, for the cipher negotiated), else by OpenSSL in user space;
// which one carries this process's connections is logged once.
//
// After Accept or Connect the socket carries the session (Socket::
// AttachTls), and the token handshake (handshake.h) and frames run inside
// it unchanged.
//
// Thread safety: Accept and Connect may be called concurrently.
#ifndef TESSERA_COMMON_DATA_PLANE_TLS_H_
#define TESSERA_COMMON_DATA_PLANE_TLS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/data_plane/socket.h"
#include "common/rpc/tls_files.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace tessera {

class DataPlaneTls {
 public:
  enum class Role { kServer, kClient };

  // InvalidArgument naming the part of `files` OpenSSL cannot use (a
  // certificate, the key, the CA).
  static absl::StatusOr<std::shared_ptr<const DataPlaneTls>> Create(
      const TlsFiles& files, Role role);
  ~DataPlaneTls();
  DataPlaneTls(const DataPlaneTls&) = delete;
  DataPlaneTls& operator=(const DataPlaneTls&) = delete;

  // The server's side, on a freshly accepted connection: the clear
  // greeting that says TLS follows (handshake.h), then the TLS handshake,
  // which must make progress within `timeout_s`. UNAVAILABLE with
  // OpenSSL's reason when the client is refused (no certificate, or one
  // the CA did not sign) or speaks no TLS.
  absl::Status Accept(Socket& socket, double timeout_s) const;

  // The client's side, on a freshly made connection (the socket's own
  // timeout applies): reads the greeting, then the TLS handshake, checking
  // that the server's certificate names `server_name` (a DNS name or an
  // IP address). UNAVAILABLE with the reason when the server speaks no
  // TLS, its certificate is not the CA's or does not name `server_name`,
  // or it refuses this process's certificate.
  absl::Status Connect(Socket& socket, const std::string& server_name) const;

 private:
  DataPlaneTls(ssl_ctx_st* ctx, Role role) : ctx_(ctx), role_(role) {}

  ssl_ctx_st* const ctx_;
  const Role role_;
};

// The protocol, cipher and where records are encrypted of the socket's
// TLS session, e.g. "TLSv1.3 TLS_AES_256_GCM_SHA384, kernel TLS (send and
// receive)"; "no TLS" without one.
std::string DescribeTls(const Socket& socket);

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_PLANE_TLS_H_
