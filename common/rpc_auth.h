// The per-job token every RPC of a job carries. Launchers generate a random
// token per job and hand it to every process (--job_token_file, or the
// TESSERA_JOB_TOKEN environment variable); clients attach it to every call
// as metadata (MakeChannel does), and every server handler checks it first,
// so another user's process on a shared cluster can neither read nor change
// a job's parameters.
//
// A process with no token configured accepts every call: a test or a
// single-user machine may run without one, and the process logs that it
// does.
#ifndef TESSERA_COMMON_RPC_AUTH_H_
#define TESSERA_COMMON_RPC_AUTH_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gflags/gflags.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

DECLARE_string(job_token_file);

namespace tessera {

// The metadata key a call carries its token under.
inline constexpr char kJobTokenMetadataKey[] = "tessera-job-token";
// The environment variable that may hold the token itself.
inline constexpr char kJobTokenEnvVar[] = "TESSERA_JOB_TOKEN";

// Reads the job's token: the file named by --job_token_file (trailing
// whitespace dropped) or else $TESSERA_JOB_TOKEN; empty when neither is
// set. InvalidArgument naming the file when it cannot be read, is larger
// than 16 KiB (e.g. /dev/zero given by mistake), is empty, or holds
// characters gRPC metadata cannot carry.
absl::StatusOr<std::string> LoadJobToken();

// A random 256-bit token as 64 hex digits, from /dev/urandom.
absl::StatusOr<std::string> GenerateJobToken();

// Checks calls against the job's token.
//
// Thread safety: immutable after construction; Check may be called from any
// thread.
class RpcAuth {
 public:
  // An empty token accepts every call.
  explicit RpcAuth(std::string token = "") : token_(std::move(token)) {}

  // LoadJobToken(), logging once whether calls are authenticated.
  static absl::StatusOr<RpcAuth> FromFlags();

  // LoadJobToken() for services built where no error can be returned; when
  // the token cannot be read, an RpcAuth that refuses every call with
  // UNAUTHENTICATED saying why (the error is logged too). Binaries have
  // checked the token in StartProcess already, so this fails closed only
  // where that was skipped.
  static RpcAuth FromFlagsOrRefuseAll();

  bool enabled() const { return !token_.empty(); }
  const std::string& token() const { return token_; }

  // OK when the call carries the job's token (compared in constant time);
  // otherwise UNAUTHENTICATED naming `method` and whether the token was
  // missing or wrong. The token itself is never put in a message.
  grpc::Status Check(const grpc::ServerContextBase& context,
                     absl::string_view method) const;

 private:
  std::string token_;
  // Non-empty: why every call is refused (FromFlagsOrRefuseAll).
  std::string refusal_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_RPC_AUTH_H_
