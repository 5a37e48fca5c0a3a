#include "common/rpc/grpc_status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(GrpcStatusTest, CodesAndMessagesSurviveTheRoundTrip) {
  for (absl::Status s :
       {absl::InvalidArgumentError("bad shape"), absl::NotFoundError("x"),
        absl::OutOfRangeError("id 7"), absl::UnavailableError("down"),
        absl::DataLossError("truncated")}) {
    grpc::Status wire = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(wire.error_code()), static_cast<int>(s.code()));
    absl::Status back = FromGrpcStatus(wire, "ps 0 Pull");
    EXPECT_EQ(back.code(), s.code());
    EXPECT_EQ(back.message(), "ps 0 Pull: " + std::string(s.message()));
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK, "x").ok());
}

}  // namespace
}  // namespace tessera
