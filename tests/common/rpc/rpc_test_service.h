// A Worker service for tests of the RPC layer (tokens, TLS, retries, size
// limits): every method checks the job token first, as the real services
// do, and then does as little as possible. Served on 127.0.0.1 by a real
// gRPC server.
#ifndef TESSERA_TESTS_COMMON_RPC_TEST_SERVICE_H_
#define TESSERA_TESTS_COMMON_RPC_TEST_SERVICE_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "proto/coordinator_service.grpc.pb.h"
#include "proto/worker_service.grpc.pb.h"

namespace tessera {

class TokenCheckingWorker final : public Worker::CallbackService {
 public:
  explicit TokenCheckingWorker(RpcAuth auth) : auth_(std::move(auth)) {}

  // RunStep answers `failure_code` to the first `failures` calls, then OK.
  void FailRunSteps(int failures, grpc::StatusCode failure_code) {
    failures_left_ = failures;
    failure_code_ = failure_code;
  }
  // Calls of RunStep that passed the token check.
  int run_steps() const { return run_steps_.load(); }
  // Calls of Shutdown that passed the token check.
  int shutdowns() const { return shutdowns_.load(); }

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context,
                                   const HealthRequest* /*request*/,
                                   HealthResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::Status s = auth_.Check(*context, "Worker.Health");
    if (s.ok()) response->set_task_type("worker");
    reactor->Finish(s);
    return reactor;
  }

  grpc::ServerUnaryReactor* RunStep(grpc::CallbackServerContext* context,
                                    const StepRequest* /*request*/,
                                    StepResponse* /*response*/) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::Status s = auth_.Check(*context, "Worker.RunStep");
    if (s.ok()) {
      ++run_steps_;
      if (failures_left_.fetch_sub(1) > 0) {
        s = grpc::Status(failure_code_, "RunStep: failing on purpose");
      }
    }
    reactor->Finish(s);
    return reactor;
  }

  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* context,
                                     const ShutdownRequest* /*request*/,
                                     ShutdownResponse* /*response*/) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::Status s = auth_.Check(*context, "Worker.Shutdown");
    if (s.ok()) ++shutdowns_;
    reactor->Finish(s);
    return reactor;
  }

 private:
  const RpcAuth auth_;
  std::atomic<int> failures_left_{0};
  std::atomic<grpc::StatusCode> failure_code_{grpc::StatusCode::UNAVAILABLE};
  std::atomic<int> run_steps_{0};
  std::atomic<int> shutdowns_{0};
};

// A Coordinator service whose Health answers `failure_code` to the first
// `failures` calls, then OK: a service that gRPC's retry policy covers.
class FlakyCoordinator final : public Coordinator::CallbackService {
 public:
  void FailHealth(int failures, grpc::StatusCode failure_code) {
    failures_left_ = failures;
    failure_code_ = failure_code;
  }
  int healths() const { return healths_.load(); }

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context,
                                   const HealthRequest* /*request*/,
                                   HealthResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    ++healths_;
    if (failures_left_.fetch_sub(1) > 0) {
      reactor->Finish(
          grpc::Status(failure_code_, "Health: failing on purpose"));
    } else {
      response->set_task_type("chief");
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

 private:
  std::atomic<int> failures_left_{0};
  std::atomic<grpc::StatusCode> failure_code_{grpc::StatusCode::UNAVAILABLE};
  std::atomic<int> healths_{0};
};

// Serves `service` on 127.0.0.1 at a free port with the project's limits.
class TestServer {
 public:
  TestServer(grpc::Service* service,
             std::shared_ptr<grpc::ServerCredentials> credentials) {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", std::move(credentials), &port);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
    address_ = absl::StrCat("127.0.0.1:", port);
    port_ = port;
  }
  ~TestServer() {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(200));
    }
  }

  bool ok() const { return server_ != nullptr && port_ != 0; }
  const std::string& address() const { return address_; }
  int port() const { return port_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int port_ = 0;
};

// Health through `channel` with a deadline of `seconds`.
inline grpc::Status CallHealth(const std::shared_ptr<grpc::Channel>& channel,
                               double seconds = 5,
                               HealthResponse* response = nullptr) {
  HealthResponse ignored;
  grpc::ClientContext context;
  SetDeadline(&context, seconds);
  return Worker::NewStub(channel)->Health(&context, HealthRequest(),
                                          response ? response : &ignored);
}

}  // namespace tessera

#endif  // TESSERA_TESTS_COMMON_RPC_TEST_SERVICE_H_
