// The command-line face of a job's security: --tls_cert, --tls_key,
// --tls_ca, --tls_target_name_override and --job_token_file. Only mains
// (through StartProcess, common/process/process_start.h) and tools read them;
// they pass what these functions return down as options, so no library depends
// on a process's flags.
#ifndef TESSERA_COMMON_SECURITY_FLAGS_H_
#define TESSERA_COMMON_SECURITY_FLAGS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/tls_credentials.h"
#include "gflags/gflags.h"

DECLARE_string(tls_cert);
DECLARE_string(tls_key);
DECLARE_string(tls_ca);
DECLARE_string(tls_target_name_override);
DECLARE_string(job_token_file);

namespace tessera {

// LoadTlsFiles() of the three --tls_* files.
absl::StatusOr<std::optional<TlsFiles>> TlsFilesFromFlags();

// LoadJobToken() of --job_token_file.
absl::StatusOr<std::string> JobTokenFromFlags();

// The token and TLS files together, as every channel of this process is
// made with them; InvalidArgument naming the flag or file that is wrong,
// and when --tls_target_name_override is given without TLS.
absl::StatusOr<ChannelSecurity> ChannelSecurityFromFlags();

// The check servers apply to every call, from JobTokenFromFlags(); logs
// once whether calls are authenticated.
absl::StatusOr<RpcAuth> RpcAuthFromFlags();

}  // namespace tessera

#endif  // TESSERA_COMMON_SECURITY_FLAGS_H_
