#include "common/data_plane/socket.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/data_plane/tls_io.h"

namespace tessera {
namespace {

// The most one SSL_read or SSL_write is asked for (its length is an int).
constexpr size_t kMaxTlsCall = size_t{1} << 30;
// The largest payload of one TLS record: small parts of a message are
// gathered up to this, so a frame header does not travel in a record (and
// a TCP segment) of its own.
constexpr size_t kTlsRecordBytes = 16384;

absl::Status IoError(const char* what, int err) {
  if (err == EAGAIN || err == EWOULDBLOCK) {
    return absl::DeadlineExceededError(
        absl::StrCat("data plane ", what, ": no progress within the timeout"));
  }
  return absl::UnavailableError(
      absl::StrCat("data plane ", what, ": ", std::strerror(err)));
}

timeval ToTimeval(double seconds) {
  timeval tv{};
  if (seconds > 0 && std::isfinite(seconds)) {
    tv.tv_sec = static_cast<time_t>(seconds);
    tv.tv_usec = static_cast<suseconds_t>((seconds - tv.tv_sec) * 1e6);
    if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;
  }
  return tv;
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    ssl_ = other.ssl_;
    other.fd_ = -1;
    other.ssl_ = nullptr;
  }
  return *this;
}

void Socket::AttachTls(ssl_st* ssl) {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ssl_ = ssl;
}

absl::Status SplitHostPort(const std::string& address, std::string* host,
                           int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), port) || *port < 0 ||
      *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", address, "\" is not host:port"));
  }
  *host = address.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return absl::OkStatus();
}

absl::StatusOr<Socket> Socket::Connect(const std::string& host, int port,
                                       double timeout_s) {
  const std::string where = absl::StrCat(host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                           &found);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("data plane: cannot resolve ",
                                               host, ": ", gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError(
      absl::StrCat("data plane: no address for ", where));
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    Socket s(
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!s.valid()) {
      last = IoError("socket", errno);
      continue;
    }
    // Connect without blocking, so the timeout bounds it.
    const int flags = fcntl(s.fd(), F_GETFL);
    fcntl(s.fd(), F_SETFL, flags | O_NONBLOCK);
    int rc = connect(s.fd(), ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{s.fd(), POLLOUT, 0};
      const int ms =
          timeout_s > 0
              ? static_cast<int>(std::min(timeout_s * 1000, 2147483647.0))
              : -1;
      do {
        rc = poll(&p, 1, ms);
      } while (rc < 0 && errno == EINTR);
      if (rc == 0) {
        last = absl::DeadlineExceededError(
            absl::StrCat("data plane: connecting to ", where, " timed out"));
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = absl::UnavailableError(absl::StrCat(
          "data plane: cannot connect to ", where, ": ", std::strerror(errno)));
      continue;
    }
    fcntl(s.fd(), F_SETFL, flags);
    const int one = 1;
    setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (absl::Status st = s.SetTimeout(timeout_s); !st.ok()) return st;
    freeaddrinfo(found);
    return s;
  }
  freeaddrinfo(found);
  return last;
}

absl::Status Socket::SetTimeout(double seconds) {
  const timeval tv = ToTimeval(seconds);
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return IoError("setsockopt", errno);
  }
  return absl::OkStatus();
}

absl::Status Socket::ReadFull(void* dst, size_t n) {
  if (ssl_ != nullptr) return TlsRead(dst, n);
  char* out = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = recv(fd_, out, n, 0);
    if (got > 0) {
      out += got;
      n -= static_cast<size_t>(got);
    } else if (got == 0) {
      return absl::UnavailableError(
          "data plane read: the connection was closed by the peer");
    } else if (errno != EINTR) {
      return IoError("read", errno);
    }
  }
  return absl::OkStatus();
}

absl::Status Socket::ReadFullAfterIdle(void* dst, size_t n) {
  if (n == 0) return absl::OkStatus();
  if (ssl_ != nullptr) {
    // A record arrives whole or not at all for SSL_read, so wait for the
    // first byte on the descriptor instead (unless OpenSSL holds some).
    while (SSL_has_pending(ssl_) == 0) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, -1) >= 0) break;
      if (errno != EINTR) return IoError("read", errno);
    }
    return TlsRead(dst, n);
  }
  while (true) {
    const ssize_t got = recv(fd_, dst, n, 0);
    if (got > 0) {
      return ReadFull(static_cast<char*>(dst) + got, n - got);
    }
    if (got == 0) {
      return absl::UnavailableError(
          "data plane read: the connection was closed by the peer");
    }
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return IoError("read", errno);
    }
  }
}

absl::Status Socket::WriteAll(absl::Span<const iovec> parts, bool more) {
  if (ssl_ != nullptr) return TlsWriteAll(parts);
  // sendmsg advances through a copy of the vector; the bytes stay put.
  std::vector<iovec> left(parts.begin(), parts.end());
  size_t first = 0;
  while (first < left.size()) {
    if (left[first].iov_len == 0) {
      ++first;
      continue;
    }
    msghdr msg{};
    msg.msg_iov = left.data() + first;
    msg.msg_iovlen = std::min<size_t>(left.size() - first, IOV_MAX);
    const ssize_t sent =
        sendmsg(fd_, &msg, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
    if (sent < 0) {
      if (errno == EINTR) continue;
      return IoError("write", errno);
    }
    size_t done = static_cast<size_t>(sent);
    while (done > 0) {
      const size_t step = std::min(done, left[first].iov_len);
      left[first].iov_base = static_cast<char*>(left[first].iov_base) + step;
      left[first].iov_len -= step;
      done -= step;
      if (left[first].iov_len == 0) ++first;
    }
  }
  return absl::OkStatus();
}

absl::Status Socket::WriteFull(const void* src, size_t n) {
  const iovec part{const_cast<void*>(src), n};
  return WriteAll(absl::MakeConstSpan(&part, 1));
}

bool Socket::IdleAndOpen() const {
  if (fd_ < 0) return false;
  if (ssl_ != nullptr && SSL_has_pending(ssl_) != 0) return false;
  char byte;
  const ssize_t got = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void Socket::Shutdown() {
  if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

absl::Status Socket::TlsRead(void* dst, size_t n) {
  // A read writes too: an alert when the session fails, even on a peer
  // that is gone.
  ScopedNoSigpipe no_sigpipe;
  char* out = static_cast<char*>(dst);
  while (n > 0) {
    ERR_clear_error();
    const int got =
        SSL_read(ssl_, out, static_cast<int>(std::min(n, kMaxTlsCall)));
    const int err = errno;
    if (got > 0) {
      out += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    const int why = SSL_get_error(ssl_, got);
    if ((why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE) &&
        err == EINTR) {
      continue;
    }
    return TlsCallStatus("read", ssl_, got, err);
  }
  return absl::OkStatus();
}

absl::Status Socket::TlsWrite(const char* src, size_t n) {
  while (n > 0) {
    const int len = static_cast<int>(std::min(n, kMaxTlsCall));
    ERR_clear_error();
    const int sent = SSL_write(ssl_, src, len);
    const int err = errno;
    if (sent > 0) {
      src += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    const int why = SSL_get_error(ssl_, sent);
    // OpenSSL wants the interrupted call repeated as it was.
    if ((why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE) &&
        err == EINTR) {
      continue;
    }
    return TlsCallStatus("write", ssl_, sent, err);
  }
  return absl::OkStatus();
}

absl::Status Socket::TlsWriteAll(absl::Span<const iovec> parts) {
  ScopedNoSigpipe no_sigpipe;
  std::string gathered;
  for (const iovec& part : parts) {
    const char* p = static_cast<const char*>(part.iov_base);
    size_t len = part.iov_len;
    while (len > 0) {
      if (gathered.empty() && len >= kTlsRecordBytes) {
        // Encrypted straight from the caller's buffer.
        if (absl::Status s = TlsWrite(p, len); !s.ok()) return s;
        break;
      }
      const size_t take = std::min(len, kTlsRecordBytes - gathered.size());
      gathered.append(p, take);
      p += take;
      len -= take;
      if (gathered.size() == kTlsRecordBytes) {
        if (absl::Status s = TlsWrite(gathered.data(), gathered.size());
            !s.ok()) {
          return s;
        }
        gathered.clear();
      }
    }
  }
  return TlsWrite(gathered.data(), gathered.size());
}

void Socket::Close() {
  if (ssl_ != nullptr) {
    SSL_free(ssl_);
    ssl_ = nullptr;
  }
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
}

}  // namespace tessera
