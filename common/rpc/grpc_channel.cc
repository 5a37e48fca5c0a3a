#include "common/rpc/grpc_channel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/backoff.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/transport_limits.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/interceptor.h"

namespace tessera {
namespace {

// Adds the job token to the initial metadata of every call. An interceptor
// rather than CallCredentials: gRPC drops call credentials on plaintext
// channels, and the token must travel on both kinds.
class JobTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit JobTokenInterceptor(std::string token) : token_(std::move(token)) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kJobTokenMetadataKey, token_);
    }
    methods->Proceed();
  }

 private:
  const std::string token_;
};

class JobTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit JobTokenInterceptorFactory(std::string token)
      : token_(std::move(token)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new JobTokenInterceptor(token_);
  }

 private:
  const std::string token_;
};

// gRPC's retry policy for every method (an empty name matches all):
// UNAVAILABLE means the call did not reach a handler that could answer
// (peer restarting, connection lost, server overloaded), so trying again
// after a pause is the cure. Other codes are answers and are not retried.
//
// The Worker service is the exception: its one client, the coordinator,
// handles a failed call itself (it probes the worker and runs the step
// again elsewhere), and a replay by gRPC could reach a worker restarted in
// the meantime, unconfigured, and turn a recoverable worker failure into
// a failed step.
std::string RetryServiceConfig() {
  return absl::StrCat(
      R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": )",
      kRpcMaxAttempts, R"(, "initialBackoff": ")",
      absl::ToDoubleSeconds(kBackoffInitial), R"(s", "maxBackoff": ")",
      absl::ToDoubleSeconds(kBackoffMax), R"(s", "backoffMultiplier": )",
      kBackoffMultiplier,
      R"(, "retryableStatusCodes": ["UNAVAILABLE"]}},)"
      R"( {"name": [{"service": "tessera.Worker"}]}]})");
}

}  // namespace

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
  args.SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              absl::ToInt64Milliseconds(kBackoffInitial));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              absl::ToInt64Milliseconds(kBackoffMax));
  // Each peer gets its own connection even when two channels share an
  // address, so a bulk transfer never queues behind another's stream.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  args.SetServiceConfigJSON(RetryServiceConfig());
  // The policy above is the one source of truth: never one from DNS.
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  return args;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ChannelSecurity& security) {
  grpc::ChannelArguments args = ChannelArgs();
  if (security.tls && !security.tls_target_name_override.empty()) {
    args.SetSslTargetNameOverride(security.tls_target_name_override);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      MakeChannelCredentials(security.tls);
  if (security.job_token.empty()) {
    return grpc::CreateCustomChannel(address, credentials, args);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<JobTokenInterceptorFactory>(security.job_token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, credentials, args, std::move(interceptors));
}

std::string ListenAddress(const std::string& address,
                          const std::string& listen_host) {
  const size_t colon = address.rfind(':');
  const std::string port = address.substr(colon + 1);
  if (listen_host == "cluster") return address.substr(0, colon) + ":" + port;
  return listen_host + ":" + port;
}

void ConfigureServerBuilder(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
  builder->SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC shares a port with any socket bound with SO_REUSEPORT: a second
  // server on a port in use would take half of its connections instead of
  // failing.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder->AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
}

absl::Status CheckTimeoutSeconds(absl::string_view flag, double seconds) {
  // Written so that NaN fails too.
  if (seconds > 0 && seconds <= kMaxRpcTimeoutS) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " must be a number of seconds in (0, ",
                   static_cast<int64_t>(kMaxRpcTimeoutS), "], got ", seconds));
}

void SetDeadline(grpc::ClientContext* context, double seconds) {
  if (std::isnan(seconds)) seconds = kDefaultRpcTimeoutS;
  // Converting a double beyond int64's range is undefined behaviour: keep
  // the microseconds well inside it.
  if (!(seconds > 0)) seconds = 0;
  seconds = std::min(seconds, kMaxRpcTimeoutS);
  context->set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
}

}  // namespace tessera
