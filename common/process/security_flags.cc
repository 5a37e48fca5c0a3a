#include "common/process/security_flags.h"

#include <utility>

#include "glog/logging.h"

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
DEFINE_string(job_token_file, "",
              "File holding this job's token, which every RPC must carry "
              "(launchers write one per job). Empty: $TESSERA_JOB_TOKEN, and "
              "without that no token is required.");

namespace tessera {

absl::StatusOr<std::optional<TlsFiles>> TlsFilesFromFlags() {
  return LoadTlsFiles({FLAGS_tls_cert, FLAGS_tls_key, FLAGS_tls_ca});
}

absl::StatusOr<std::string> JobTokenFromFlags() {
  return LoadJobToken(FLAGS_job_token_file);
}

absl::StatusOr<ChannelSecurity> ChannelSecurityFromFlags() {
  ChannelSecurity security;
  absl::StatusOr<std::string> token = JobTokenFromFlags();
  if (!token.ok()) return token.status();
  security.job_token = *std::move(token);
  absl::StatusOr<std::optional<TlsFiles>> tls = TlsFilesFromFlags();
  if (!tls.ok()) return tls.status();
  security.tls = *std::move(tls);
  if (!security.tls && !FLAGS_tls_target_name_override.empty()) {
    return absl::InvalidArgumentError(
        "--tls_target_name_override needs TLS: --tls_cert, --tls_key and "
        "--tls_ca");
  }
  security.tls_target_name_override = FLAGS_tls_target_name_override;
  return security;
}

absl::StatusOr<RpcAuth> RpcAuthFromFlags() {
  absl::StatusOr<std::string> token = JobTokenFromFlags();
  if (!token.ok()) return token.status();
  if (token->empty()) {
    LOG(WARNING) << "no job token (--job_token_file or " << kJobTokenEnvVar
                 << "): this process accepts calls from anyone who can reach "
                    "its port";
  } else {
    LOG(INFO) << "every call must carry this job's token";
  }
  return RpcAuth(*std::move(token));
}

}  // namespace tessera
