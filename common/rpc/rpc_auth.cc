#include "common/rpc/rpc_auth.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/io/bounded_file_read.h"
#include "glog/logging.h"

namespace tessera {
namespace {

// A token is at most kMaxTokenBytes; the file may add trailing whitespace.
// Anything larger is the wrong file (--job_token_file=/dev/zero), refused
// before it is read into memory.
constexpr size_t kMaxTokenBytes = 4096;
constexpr size_t kMaxTokenFileBytes = 16 << 10;

// gRPC refuses non-printable metadata values; a token stays in visible
// ASCII so it never breaks a call.
absl::Status CheckTokenText(absl::string_view token, absl::string_view from) {
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(from, " holds no token"));
  }
  if (token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(from, " holds ", token.size(),
                     " bytes; a job token is at most ", kMaxTokenBytes));
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat(from,
                       " holds a character that is not printable ASCII; a job "
                       "token is letters, digits and punctuation"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> LoadJobToken(const std::string& token_file) {
  if (!token_file.empty()) {
    const std::string what = absl::StrCat("--job_token_file=", token_file);
    absl::StatusOr<std::string> text =
        ReadBoundedFile(token_file, kMaxTokenFileBytes, what);
    if (!text.ok()) {
      return absl::InvalidArgumentError(text.status().message());
    }
    std::string token(absl::StripTrailingAsciiWhitespace(*text));
    if (absl::Status s = CheckTokenText(token, what); !s.ok()) return s;
    return token;
  }
  const char* env = std::getenv(kJobTokenEnvVar);
  if (env == nullptr || *env == '\0') return std::string();
  std::string token(absl::StripTrailingAsciiWhitespace(env));
  if (absl::Status s = CheckTokenText(token, kJobTokenEnvVar); !s.ok()) {
    return s;
  }
  return token;
}

absl::StatusOr<std::string> GenerateJobToken() {
  std::ifstream random("/dev/urandom", std::ios::binary);
  char bytes[32];
  if (!random.read(bytes, sizeof(bytes))) {
    return absl::UnavailableError("cannot read /dev/urandom for a job token");
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

grpc::Status RpcAuth::Check(const grpc::ServerContextBase& context,
                            absl::string_view method) const {
  if (token_.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kJobTokenMetadataKey);
  if (it == metadata.end()) {
    return grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        absl::StrCat(method, ": the call carries no job token (",
                     kJobTokenMetadataKey, ")"));
  }
  const grpc::string_ref given = it->second;
  // Constant time in the token's length, so the answer's timing does not
  // tell how much of a guess was right.
  unsigned char diff = given.size() == token_.size() ? 0 : 1;
  for (size_t i = 0; i < token_.size(); ++i) {
    const char g = i < given.size() ? given.data()[i] : 0;
    diff |= static_cast<unsigned char>(g ^ token_[i]);
  }
  if (diff != 0) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat(method, ": wrong job token"));
  }
  return grpc::Status::OK;
}

}  // namespace tessera
