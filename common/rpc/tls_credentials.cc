#include "common/rpc/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/io/bounded_file_read.h"
#include "grpc/grpc_security_constants.h"

namespace tessera {
namespace {

// A certificate chain, key or CA bundle is a few KB; a long chain or a
// system CA bundle some hundreds. Larger is the wrong file, refused before
// it is read into memory.
constexpr size_t kMaxPemFileBytes = 1 << 20;

// Reads `path` (named by --`flag`) and checks that it holds a PEM block
// whose header ends in `pem_label` ("CERTIFICATE", "PRIVATE KEY"), so a
// swapped or truncated file is refused here, naming it, rather than as a
// handshake failure on the first call.
absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path,
                                    const char* pem_label) {
  absl::StatusOr<std::string> text = ReadBoundedFile(
      path, kMaxPemFileBytes, absl::StrCat("--", flag, "=", path));
  if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
  std::string pem = *std::move(text);
  if (!absl::StrContains(pem, "-----BEGIN ") ||
      !absl::StrContains(pem, absl::StrCat(pem_label, "-----"))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", path, ": holds no PEM ", pem_label, " block"));
  }
  return pem;
}

// Checks that `key_pem` is the private key of the first certificate of
// `cert_pem`: a mismatched pair otherwise surfaces only as a server that
// cannot start ("empty address list") or a failed handshake.
absl::Status CheckKeyMatchesCertificate(const TlsPaths& paths,
                                        const std::string& cert_pem,
                                        const std::string& key_pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(
      BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())),
      &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert=", paths.cert,
                     ": its first certificate cannot be "
                     "parsed"));
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())),
      &BIO_free);
  // No passphrase callback: an encrypted key cannot be used unattended.
  auto no_passphrase = [](char*, int, int, void*) { return 0; };
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, no_passphrase, nullptr),
      &EVP_PKEY_free);
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key=", paths.key,
                     ": the private key cannot be parsed "
                     "(an encrypted key is not supported)"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key=", paths.key, " is not the private key of --tls_cert=",
        paths.cert, " (a certificate and key from different pairs)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<TlsFiles>> LoadTlsFiles(const TlsPaths& paths) {
  const std::pair<const char*, const std::string*> flags[] = {
      {"tls_cert", &paths.cert},
      {"tls_key", &paths.key},
      {"tls_ca", &paths.ca}};
  std::vector<std::string> missing;
  for (const auto& [name, value] : flags) {
    if (value->empty()) missing.push_back(absl::StrCat("--", name));
  }
  if (missing.size() == 3) return std::optional<TlsFiles>();
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS needs --tls_cert, --tls_key and --tls_ca together; missing ",
        absl::StrJoin(missing, ", ")));
  }
  TlsFiles files;
  absl::StatusOr<std::string> pem =
      ReadPem("tls_cert", paths.cert, "CERTIFICATE");
  if (!pem.ok()) return pem.status();
  files.cert_chain = *std::move(pem);
  pem = ReadPem("tls_key", paths.key, "PRIVATE KEY");
  if (!pem.ok()) return pem.status();
  files.private_key = *std::move(pem);
  pem = ReadPem("tls_ca", paths.ca, "CERTIFICATE");
  if (!pem.ok()) return pem.status();
  files.ca = *std::move(pem);
  if (absl::Status s = CheckKeyMatchesCertificate(paths, files.cert_chain,
                                                  files.private_key);
      !s.ok()) {
    return s;
  }
  return std::optional<TlsFiles>(std::move(files));
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const std::optional<TlsFiles>& tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls->ca;
  options.pem_key_cert_pairs.push_back({tls->private_key, tls->cert_chain});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const std::optional<TlsFiles>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls->ca;
  options.pem_private_key = tls->private_key;
  options.pem_cert_chain = tls->cert_chain;
  return grpc::SslCredentials(options);
}

}  // namespace tessera
