// The PEM files of a job's TLS (common/rpc/tls_credentials.h), apart from the
// gRPC credentials made of them, so the data plane (common/data_plane/)
// builds its own TLS from the same files without depending on gRPC.
#ifndef TESSERA_COMMON_TLS_FILES_H_
#define TESSERA_COMMON_TLS_FILES_H_

#include <string>

namespace tessera {

// The PEM text of this process's certificate (chain), its private key and
// the CA that signs every certificate of the job.
struct TlsFiles {
  std::string cert_chain;
  std::string private_key;
  std::string ca;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_TLS_FILES_H_
