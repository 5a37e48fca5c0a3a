// A connected TCP socket of the data plane (common/data_plane/): blocking
// reads and writes of whole buffers, with errors as the gRPC path reports
// them, so a caller cannot tell from the code which plane failed:
//
//   the peer closed or reset the connection, or cannot be reached:
//       UNAVAILABLE (as gRPC's "Socket closed" / "Connection reset");
//   no progress within the socket's timeout (SetTimeout):
//       DEADLINE_EXCEEDED.
//
// A socket may carry a TLS session (AttachTls; common/data_plane/tls.h
// makes them): every read and write then goes through it, with the same
// errors, so what runs on the socket (frames, the token handshake) is the
// same code over TLS and without.
//
// Thread safety: one reader and one writer at a time (with TLS: one call
// at a time, as an OpenSSL session allows); Shutdown() may be called from
// any thread to wake them.
#ifndef TESSERA_COMMON_DATA_PLANE_SOCKET_H_
#define TESSERA_COMMON_DATA_PLANE_SOCKET_H_

#include <sys/uio.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

struct ssl_st;  // OpenSSL's SSL

namespace tessera {

class Socket {
 public:
  Socket() = default;
  // Takes ownership of the connected descriptor `fd`.
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { Close(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_), ssl_(other.ssl_) {
    other.fd_ = -1;
    other.ssl_ = nullptr;
  }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Connects to host:port (a name or a literal address, IPv6 with or
  // without brackets) within `timeout_s`, with TCP_NODELAY set and the
  // timeout applied to every later read and write. UNAVAILABLE naming the
  // address when nothing answers there, DEADLINE_EXCEEDED on the timeout.
  static absl::StatusOr<Socket> Connect(const std::string& host, int port,
                                        double timeout_s);

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // From now on every read and write goes through `ssl`, a TLS session on
  // fd() whose handshake is done; the socket owns it.
  void AttachTls(ssl_st* ssl);
  bool tls() const { return ssl_ != nullptr; }
  ssl_st* tls_session() const { return ssl_; }

  // Every later read or write that makes no progress for `seconds` fails
  // with DEADLINE_EXCEEDED (<= 0: wait forever). The connection is then
  // in an unknown state: callers close it.
  absl::Status SetTimeout(double seconds);

  // Reads exactly n bytes into dst.
  absl::Status ReadFull(void* dst, size_t n);
  // The same, but waits as long as it takes for the first byte (the next
  // request on an idle connection); the timeout applies after it.
  absl::Status ReadFullAfterIdle(void* dst, size_t n);
  // Writes all of `parts`, in order, with as few system calls as the
  // kernel allows (no copy of the bytes in user space; with TLS, small
  // parts are gathered into one record and large ones encrypted in
  // place). `more`: further writes of the same message follow at once, so
  // the kernel may hold a short tail back to send it with them (MSG_MORE)
  // rather than wake the reader for each piece.
  absl::Status WriteAll(absl::Span<const iovec> parts, bool more = false);
  absl::Status WriteFull(const void* src, size_t n);

  // True while the peer has not closed the connection and nothing unread
  // waits on it: an idle pooled connection is still usable. Never blocks.
  bool IdleAndOpen() const;

  // Wakes any thread blocked on the socket (its call fails UNAVAILABLE).
  void Shutdown();
  // Sends no TLS close_notify: every message is length-framed, so a peer
  // sees a cut either way, and a close never blocks on a stalled peer.
  void Close();

 private:
  absl::Status TlsRead(void* dst, size_t n);
  absl::Status TlsWriteAll(absl::Span<const iovec> parts);
  absl::Status TlsWrite(const char* src, size_t n);

  int fd_ = -1;
  ssl_st* ssl_ = nullptr;
};

// Splits "host:port" or "[v6]:port" into host (brackets dropped) and port.
absl::Status SplitHostPort(const std::string& address, std::string* host,
                           int* port);

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_PLANE_SOCKET_H_
