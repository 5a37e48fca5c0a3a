// Optional TLS with mutual authentication between the processes of a job.
//
// With --tls_cert, --tls_key and --tls_ca (PEM files, all three or none)
// every server asks each client for a certificate and accepts only one
// signed by the CA, and every channel shows the same certificate and
// accepts only a server whose certificate the CA signed and that names
// the dialled host (or --tls_target_name_override). Without them, servers
// and channels speak plaintext and only the job token (common/rpc/rpc_auth.h)
// guards the calls.
#ifndef TESSERA_COMMON_TLS_CREDENTIALS_H_
#define TESSERA_COMMON_TLS_CREDENTIALS_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/tls_files.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace tessera {

// Where the three files are (the --tls_cert, --tls_key and --tls_ca flags
// of the binaries, common/process/security_flags.h); errors name them by those
// flags.
struct TlsPaths {
  std::string cert;
  std::string key;
  std::string ca;
};

// Reads the three files. nullopt when no path is set (plaintext).
// InvalidArgument naming the missing flag when only some are set, and
// naming the file when one cannot be read, is larger than 1 MiB (e.g.
// /dev/zero given by mistake), does not hold what its flag promises (a
// PEM certificate, a PEM private key), or when the key is not the
// certificate's.
absl::StatusOr<std::optional<TlsFiles>> LoadTlsFiles(const TlsPaths& paths);

// Server credentials: plaintext for nullopt, else TLS that requires and
// verifies a client certificate signed by `tls->ca`.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const std::optional<TlsFiles>& tls);

// Channel credentials: plaintext for nullopt, else TLS that shows
// `tls->cert_chain` and trusts only servers `tls->ca` signed.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const std::optional<TlsFiles>& tls);

}  // namespace tessera

#endif  // TESSERA_COMMON_TLS_CREDENTIALS_H_
