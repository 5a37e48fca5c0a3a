#include "common/tls_credentials.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_file_read.h"
#include "grpc/grpc_security_constants.h"

DEFINE_string(tls_cert, "",
              "PEM file with this process's TLS certificate (chain). With "
              "--tls_key and --tls_ca every server and channel of the job "
              "uses TLS with mutual authentication; all three or none.");
DEFINE_string(tls_key, "", "PEM file with the private key of --tls_cert.");
DEFINE_string(tls_ca, "",
              "PEM file with the CA that signs every certificate of the job; "
              "peers whose certificate it did not sign are refused.");
DEFINE_string(tls_target_name_override, "",
              "Host name to expect in the servers' certificates instead of "
              "the dialled host (for certificates issued to another name).");

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

}  // namespace

absl::StatusOr<std::optional<TlsFiles>> LoadTlsFiles() {
  const std::pair<const char*, const std::string*> flags[] = {
      {"tls_cert", &FLAGS_tls_cert},
      {"tls_key", &FLAGS_tls_key},
      {"tls_ca", &FLAGS_tls_ca}};
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
      ReadPem("tls_cert", FLAGS_tls_cert, "CERTIFICATE");
  if (!pem.ok()) return pem.status();
  files.cert_chain = *std::move(pem);
  pem = ReadPem("tls_key", FLAGS_tls_key, "PRIVATE KEY");
  if (!pem.ok()) return pem.status();
  files.private_key = *std::move(pem);
  pem = ReadPem("tls_ca", FLAGS_tls_ca, "CERTIFICATE");
  if (!pem.ok()) return pem.status();
  files.ca = *std::move(pem);
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
