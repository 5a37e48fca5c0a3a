#ifndef TESSERA_COMMON_GRPC_CHANNEL_H_
#define TESSERA_COMMON_GRPC_CHANNEL_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rpc/tls_credentials.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"

namespace tessera {

// How a channel shows that it belongs to the job.
struct ChannelSecurity {
  // Sent with every call under kJobTokenMetadataKey (common/rpc/rpc_auth.h);
  // empty: calls carry no token.
  std::string job_token;
  // TLS with a client certificate; nullopt: plaintext.
  std::optional<TlsFiles> tls;
  // With TLS, the name the server's certificate must carry instead of the
  // dialled host; empty: the dialled host.
  std::string tls_target_name_override;
};

// The one place channels are made: message size limits derived from the
// chunk size, keepalive so a dead peer is noticed, reconnect backoff, and
// gRPC's retry policy (ChannelArgs()); every call carries
// `security.job_token`, over TLS when `security.tls` is set. Channels are
// meant to be created once per peer and reused. Binaries build `security`
// once from their flags (common/process/security_flags.h) and pass it down.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ChannelSecurity& security);

// The arguments MakeChannel uses, for callers (benches) that add their own:
// size limits, keepalive, reconnect backoff, and a service config whose
// retry policy retries every method on UNAVAILABLE up to
// kRpcMaxAttempts times with exponential backoff (common/rpc/backoff.h's
// figures, jittered), within the call's deadline. gRPC replays only calls that
// are not yet committed: no answer from the server began, and at most 256 KiB
// sent (so a stream of large chunks is not retried once under way).
// Exception: the methods of the Worker service are not retried; the
// coordinator, their caller, handles a worker's failure itself (probes it,
// runs the step again elsewhere).
grpc::ChannelArguments ChannelArgs();

// Attempts of one call under the retry policy, the first included.
inline constexpr int kRpcMaxAttempts = 5;

// Where a server listens for the cluster address `address` (host:port):
// with `listen_host` "[::]" every interface at that port; "cluster" the
// host itself (several fake nodes of one machine on 127.0.0.x); any other
// host as given (--listen_host).
std::string ListenAddress(const std::string& address,
                          const std::string& listen_host);

// Applies the same message size limits to a server.
void ConfigureServerBuilder(grpc::ServerBuilder* builder);

// The longest deadline a call is given, in seconds (about 11.6 days): far
// beyond any real call, and far below where the deadline overflows.
inline constexpr double kMaxRpcTimeoutS = 1e6;

// OK when `seconds` can be a call's deadline: finite and in
// (0, kMaxRpcTimeoutS]. Otherwise InvalidArgument naming `flag` (e.g.
// "--rpc_timeout_s") and the value. StartProcess checks --rpc_timeout_s
// with it.
absl::Status CheckTimeoutSeconds(absl::string_view flag, double seconds);

// The deadline of a call when its caller's options say nothing else (the
// default of --rpc_timeout_s, which the binaries pass down as options).
inline constexpr double kDefaultRpcTimeoutS = 120;

// Every client call gets a deadline of `seconds` (NaN: kDefaultRpcTimeoutS),
// clamped to [0, kMaxRpcTimeoutS] for values no one checked (a tool's
// flags, sums such as --wait_s + 10): more than the maximum gives the
// maximum, and a value that is not positive a deadline already past, so
// the call fails at once with DEADLINE_EXCEEDED.
void SetDeadline(grpc::ClientContext* context, double seconds);

}  // namespace tessera

#endif  // TESSERA_COMMON_GRPC_CHANNEL_H_
