#ifndef TESSERA_PS_SERVER_REFUSED_REACTORS_H_
#define TESSERA_PS_SERVER_REFUSED_REACTORS_H_

#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"

namespace tessera {

// Streaming reactors that end their call at once with `status`, for calls
// refused before they may touch any state (a missing or wrong job token).
// Each deletes itself when done.
template <typename Response>
class RefusedWriteReactor final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit RefusedWriteReactor(const grpc::Status& status) {
    this->Finish(status);
  }
  void OnDone() override { delete this; }
};

template <typename Request>
class RefusedReadReactor final : public grpc::ServerReadReactor<Request> {
 public:
  explicit RefusedReadReactor(const grpc::Status& status) {
    this->Finish(status);
  }
  void OnDone() override { delete this; }
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_REFUSED_REACTORS_H_
