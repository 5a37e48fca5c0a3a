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
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace tessera {

// The metadata key a call carries its token under.
inline constexpr char kJobTokenMetadataKey[] = "tessera-job-token";
// The environment variable that may hold the token itself.
inline constexpr char kJobTokenEnvVar[] = "TESSERA_JOB_TOKEN";

// Reads the job's token: the file `token_file` (--job_token_file of the
// binaries; trailing whitespace dropped) or, when that is empty,
// $TESSERA_JOB_TOKEN; empty when neither is set. InvalidArgument naming the
// file when it cannot be read, is larger than 16 KiB (e.g. /dev/zero given by
// mistake), is empty, or holds characters gRPC metadata cannot carry.
absl::StatusOr<std::string> LoadJobToken(const std::string& token_file);

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

  bool enabled() const { return !token_.empty(); }
  const std::string& token() const { return token_; }

  // OK when the call carries the job's token (compared in constant time);
  // otherwise UNAUTHENTICATED naming `method` and whether the token was
  // missing or wrong. The token itself is never put in a message.
  grpc::Status Check(const grpc::ServerContextBase& context,
                     absl::string_view method) const;

 private:
  std::string token_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_RPC_AUTH_H_
