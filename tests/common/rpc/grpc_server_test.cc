#include "common/rpc/grpc_server.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "gtest/gtest.h"
#include "tests/common/rpc/rpc_test_service.h"

namespace tessera {
namespace {

TEST(StartServerTest, APortInUseByAnotherServerIsRefusedNotShared) {
  TokenCheckingWorker first_service{RpcAuth()};
  TestServer first(&first_service, grpc::InsecureServerCredentials());
  ASSERT_TRUE(first.ok());
  // gRPC would bind a second server to the same port (SO_REUSEPORT) and
  // split the connections between them; StartServer refuses instead.
  TokenCheckingWorker second_service{RpcAuth()};
  std::unique_ptr<grpc::Server> second =
      StartServer(first.address(), &second_service, {.listen_host = "cluster"});
  EXPECT_EQ(second, nullptr);
}

TEST(StartServerTest, AFreePortServes) {
  TokenCheckingWorker service{RpcAuth()};
  int port = 0;
  std::unique_ptr<grpc::Server> server = StartServer(
      "127.0.0.1:0", &service, {.listen_host = "cluster"}, nullptr, &port);
  ASSERT_NE(server, nullptr);
  EXPECT_GT(port, 0);
  server->Shutdown();
}

}  // namespace
}  // namespace tessera
