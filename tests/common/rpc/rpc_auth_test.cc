#include "common/rpc/rpc_auth.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/process/security_flags.h"
#include "gflags/gflags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

class RpcAuthFlagsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    FLAGS_job_token_file = "";
    unsetenv(kJobTokenEnvVar);
  }
  std::string WriteFile(const std::string& text) {
    // Per process: ctest runs these cases in parallel processes.
    const std::string path =
        ::testing::TempDir() + "/rpc_auth_token_" + std::to_string(getpid());
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(RpcAuthFlagsTest, NoTokenConfiguredMeansNone) {
  absl::StatusOr<std::string> token = JobTokenFromFlags();
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "");
  EXPECT_FALSE(RpcAuth(*token).enabled());
}

TEST_F(RpcAuthFlagsTest, FileWinsOverEnvironmentAndLosesTrailingNewline) {
  FLAGS_job_token_file = WriteFile("from-file\n");
  setenv(kJobTokenEnvVar, "from-env", 1);
  absl::StatusOr<std::string> token = JobTokenFromFlags();
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "from-file");
}

TEST_F(RpcAuthFlagsTest, EnvironmentWhenNoFile) {
  setenv(kJobTokenEnvVar, "from-env", 1);
  absl::StatusOr<std::string> token = JobTokenFromFlags();
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "from-env");
}

TEST_F(RpcAuthFlagsTest, MissingEmptyOrUnprintableFileIsNamed) {
  FLAGS_job_token_file = "/nonexistent/token";
  EXPECT_THAT(JobTokenFromFlags().status().message(),
              HasSubstr("--job_token_file=/nonexistent/token"));
  FLAGS_job_token_file = WriteFile("\n");
  EXPECT_THAT(JobTokenFromFlags().status().message(),
              HasSubstr("holds no token"));
  FLAGS_job_token_file =
      WriteFile(std::string("ab\x01"
                            "cd"));
  EXPECT_THAT(JobTokenFromFlags().status().message(), HasSubstr("printable"));
}

TEST(RpcAuthTest, GeneratedTokensAreHexAndDiffer) {
  absl::StatusOr<std::string> a = GenerateJobToken();
  absl::StatusOr<std::string> b = GenerateJobToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(*a, *b);
}

// The token file was read whole before its size was checked:
// --job_token_file=/dev/zero read until memory ran out.
TEST_F(RpcAuthFlagsTest, EndlessOrHugeFileIsRefusedAtTheCap) {
  FLAGS_job_token_file = "/dev/zero";
  absl::StatusOr<std::string> token = JobTokenFromFlags();
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(token.status().message(),
              HasSubstr("--job_token_file=/dev/zero is larger than 16384 "
                        "bytes"));
  // A token of 5000 characters fits the file cap but not the token's.
  FLAGS_job_token_file = WriteFile(std::string(5000, 'a') + "\n");
  EXPECT_THAT(JobTokenFromFlags().status().message(),
              HasSubstr("holds 5000 bytes; a job token is at most 4096"));
}

}  // namespace
}  // namespace tessera
