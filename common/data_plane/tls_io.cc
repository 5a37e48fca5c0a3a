#include "common/data_plane/tls_io.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <time.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

absl::Status PeerClosed(const char* what) {
  return absl::UnavailableError(absl::StrCat(
      "data plane ", what, " (TLS): the connection was closed by the peer"));
}

// OpenSSL's reasons for the failure, oldest first ("...:tlsv13 alert
// certificate required"), and the certificate check's verdict when it
// failed: what a person needs to fix the files.
std::string OpenSslReasons(ssl_st* ssl) {
  std::string reasons;
  while (const unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof(text));
    absl::StrAppend(&reasons, reasons.empty() ? "" : "; ", text);
  }
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    absl::StrAppend(
        &reasons, reasons.empty() ? "" : "; ",
        "certificate check: ", X509_verify_cert_error_string(verify));
  }
  return reasons.empty() ? "unknown TLS error" : reasons;
}

}  // namespace

absl::Status TlsCallStatus(const char* what, ssl_st* ssl, int ret, int err) {
  const int why = SSL_get_error(ssl, ret);
  switch (why) {
    case SSL_ERROR_ZERO_RETURN:
      ERR_clear_error();
      return PeerClosed(what);
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      // A blocking socket wants more only when SO_RCVTIMEO/SO_SNDTIMEO ran
      // out.
      ERR_clear_error();
      return absl::DeadlineExceededError(absl::StrCat(
          "data plane ", what, " (TLS): no progress within the timeout"));
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() == 0) {
        if (err == 0) return PeerClosed(what);
        if (err == EAGAIN || err == EWOULDBLOCK) {
          return absl::DeadlineExceededError(absl::StrCat(
              "data plane ", what, " (TLS): no progress within the timeout"));
        }
        return absl::UnavailableError(
            absl::StrCat("data plane ", what, " (TLS): ", std::strerror(err)));
      }
      break;
    case SSL_ERROR_SSL:
      if (ERR_GET_REASON(ERR_peek_last_error()) ==
          SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        ERR_clear_error();
        return PeerClosed(what);
      }
      break;
    default:
      break;
  }
  return absl::UnavailableError(
      absl::StrCat("data plane ", what, " (TLS): ", OpenSslReasons(ssl)));
}

ScopedNoSigpipe::ScopedNoSigpipe() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  sigset_t pending;
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  blocked_ = pthread_sigmask(SIG_BLOCK, &pipe, &old_) == 0;
}

ScopedNoSigpipe::~ScopedNoSigpipe() {
  if (!blocked_) return;
  const int saved_errno = errno;
  if (!was_pending_) {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      const timespec now{};
      while (sigtimedwait(&pipe, nullptr, &now) < 0 && errno == EINTR) {
      }
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  errno = saved_errno;
}

}  // namespace tessera
