#include "common/data_plane/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/tls_io.h"
#include "glog/logging.h"

namespace tessera {
namespace {

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                &BIO_free);
}

absl::Status Refused(const std::string& what) {
  std::string reason;
  if (const unsigned long e = ERR_peek_last_error(); e != 0) {
    char text[256];
    ERR_error_string_n(e, text, sizeof(text));
    reason = absl::StrCat(": ", text);
  }
  ERR_clear_error();
  return absl::InvalidArgumentError(
      absl::StrCat("data plane TLS: ", what, reason));
}

// Every certificate of `pem`, in order; none is an error for the caller.
std::vector<X509Ptr> ReadCertificates(const std::string& pem) {
  std::vector<X509Ptr> certs;
  BioPtr bio = MemoryBio(pem);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert, &X509_free);
  }
  ERR_clear_error();  // the end of the text reads as "no start line"
  return certs;
}

absl::Status Configure(SSL_CTX* ctx, const TlsFiles& files,
                       DataPlaneTls::Role role) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // AES-128-GCM first (OpenSSL's default puts AES-256 first): the fastest
  // with AES-NI, what gRPC's BoringSSL prefers, and one the kernel's TLS
  // takes. The list of TLS 1.2 ciphers stays OpenSSL's.
  SSL_CTX_set_ciphersuites(ctx,
                           "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                           "TLS_CHACHA20_POLY1305_SHA256");
  // No read-ahead (fewer system calls in user space): it may keep OpenSSL
  // from handing reception to the kernel.
#ifdef SSL_OP_ENABLE_KTLS
  SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
#endif
  // Connections are few and long-lived: no resumption, so no session
  // tickets arrive unasked on an idle pooled connection either (which
  // Socket::IdleAndOpen would take for a broken one).
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);

  std::vector<X509Ptr> chain = ReadCertificates(files.cert_chain);
  if (chain.empty()) return Refused("no certificate in the certificate file");
  if (SSL_CTX_use_certificate(ctx, chain[0].get()) != 1) {
    return Refused("the certificate cannot be used");
  }
  for (size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, chain[i].get()) != 1) {
      return Refused("a certificate of the chain cannot be used");
    }
  }
  BioPtr key_bio = MemoryBio(files.private_key);
  auto no_passphrase = [](char*, int, int, void*) { return 0; };
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, no_passphrase, nullptr),
      &EVP_PKEY_free);
  if (key == nullptr || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    return Refused("the private key cannot be used with the certificate");
  }

  std::vector<X509Ptr> cas = ReadCertificates(files.ca);
  if (cas.empty()) return Refused("no certificate in the CA file");
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  for (const X509Ptr& ca : cas) {
    if (X509_STORE_add_cert(store, ca.get()) != 1) {
      return Refused("the CA certificate cannot be used");
    }
  }
  // As gRPC's servers and channels of a TLS job: both ends prove
  // themselves with a certificate of the job's CA.
  SSL_CTX_set_verify(ctx,
                     role == DataPlaneTls::Role::kServer
                         ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                         : SSL_VERIFY_PEER,
                     nullptr);
  return absl::OkStatus();
}

// Why records are not encrypted by the kernel, for the log.
std::string NoKtlsReason() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_ulp");
  std::stringstream ulps;
  ulps << in.rdbuf();
  if (!absl::StrContains(ulps.str(), "tls")) {
    return "the kernel offers no TLS (no `tls` module; `modprobe tls` "
           "loads it where it is built)";
  }
  return "the kernel's TLS takes neither this protocol version nor cipher";
}

void LogOnce(const Socket& socket) {
  static std::once_flag once;
  std::call_once(once, [&socket] {
    LOG(INFO) << "data plane TLS: " << DescribeTls(socket);
  });
}

}  // namespace

absl::StatusOr<std::shared_ptr<const DataPlaneTls>> DataPlaneTls::Create(
    const TlsFiles& files, Role role) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(role == Role::kServer ? TLS_server_method()
                                                   : TLS_client_method());
  if (ctx == nullptr) return Refused("no TLS context");
  std::shared_ptr<const DataPlaneTls> tls(new DataPlaneTls(ctx, role));
  if (absl::Status s = Configure(ctx, files, role); !s.ok()) return s;
  return tls;
}

DataPlaneTls::~DataPlaneTls() { SSL_CTX_free(ctx_); }

absl::Status DataPlaneTls::Accept(Socket& socket, double timeout_s) const {
  if (absl::Status s = socket.SetTimeout(timeout_s); !s.ok()) return s;
  if (absl::Status s = SendTlsGreeting(socket); !s.ok()) return s;
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr || SSL_set_fd(ssl, socket.fd()) != 1) {
    SSL_free(ssl);
    return absl::InternalError("data plane TLS: no session");
  }
  socket.AttachTls(ssl);  // freed with the socket from here on
  ScopedNoSigpipe no_sigpipe;
  int rc;
  int err;
  do {
    rc = SSL_accept(ssl);
    err = errno;
  } while (rc != 1 && SSL_get_error(ssl, rc) == SSL_ERROR_WANT_READ &&
           err == EINTR);
  if (rc != 1) return TlsCallStatus("handshake", ssl, rc, err);
  LogOnce(socket);
  return absl::OkStatus();
}

absl::Status DataPlaneTls::Connect(Socket& socket,
                                   const std::string& server_name) const {
  if (absl::Status s = ReadTlsGreeting(socket); !s.ok()) return s;
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr || SSL_set_fd(ssl, socket.fd()) != 1) {
    SSL_free(ssl);
    return absl::InternalError("data plane TLS: no session");
  }
  socket.AttachTls(ssl);
  // The name to check: an IP address against the certificate's IP
  // entries, anything else against its DNS names (and sent as SNI).
  in6_addr ip;
  const bool is_ip = inet_pton(AF_INET, server_name.c_str(), &ip) == 1 ||
                     inet_pton(AF_INET6, server_name.c_str(), &ip) == 1;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  const bool named =
      is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, server_name.c_str()) == 1
            : X509_VERIFY_PARAM_set1_host(param, server_name.c_str(), 0) == 1 &&
                  SSL_set_tlsext_host_name(ssl, server_name.c_str()) == 1;
  if (!named) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "data plane TLS: \"", server_name, "\" cannot be checked as a name"));
  }
  ScopedNoSigpipe no_sigpipe;
  int rc;
  int err;
  do {
    rc = SSL_connect(ssl);
    err = errno;
  } while (rc != 1 && SSL_get_error(ssl, rc) == SSL_ERROR_WANT_READ &&
           err == EINTR);
  if (rc != 1) {
    absl::Status s = TlsCallStatus("handshake", ssl, rc, err);
    return absl::Status(
        s.code(), absl::StrCat(s.message(), " (the server ", server_name, ")"));
  }
  LogOnce(socket);
  return absl::OkStatus();
}

std::string DescribeTls(const Socket& socket) {
  SSL* ssl = socket.tls_session();
  if (ssl == nullptr) return "no TLS";
  const bool send = BIO_get_ktls_send(SSL_get_wbio(ssl));
  const bool recv = BIO_get_ktls_recv(SSL_get_rbio(ssl));
  std::string where;
  if (send && recv) {
    where = "kernel TLS (send and receive)";
  } else if (send || recv) {
    where = absl::StrCat("kernel TLS for ", send ? "sending" : "receiving",
                         " only, the other way in user space (OpenSSL)");
  } else {
    where = absl::StrCat("encrypted in user space (OpenSSL): ", NoKtlsReason());
  }
  return absl::StrCat(SSL_get_version(ssl), " ", SSL_get_cipher_name(ssl), ", ",
                      where);
}

}  // namespace tessera
