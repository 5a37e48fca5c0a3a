#include "common/exit_code.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(ExitCodeTest, TheUsersMistakesAreTwoAndFailuresOne) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
  for (const absl::Status& mistake :
       {absl::InvalidArgumentError("bad flag"),
        absl::NotFoundError("/data/train-images-idx3-ubyte: cannot open"),
        absl::AlreadyExistsError("x"), absl::PermissionDeniedError("x"),
        absl::FailedPreconditionError("x"), absl::OutOfRangeError("x"),
        absl::UnimplementedError("x"), absl::UnauthenticatedError("x")}) {
    EXPECT_EQ(ExitCodeFor(mistake), kExitUserError) << mistake;
  }
  for (const absl::Status& failure :
       {absl::UnavailableError("connection refused"),
        absl::DeadlineExceededError("x"), absl::AbortedError("x"),
        absl::CancelledError("x"), absl::ResourceExhaustedError("x"),
        absl::DataLossError("x"), absl::InternalError("x"),
        absl::UnknownError("x")}) {
    EXPECT_EQ(ExitCodeFor(failure), kExitRetryable) << failure;
  }
}

}  // namespace
}  // namespace tessera
