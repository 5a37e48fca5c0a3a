#include "ps_server/ps_service.h"

#include "common/grpc_status.h"
#include "glog/logging.h"
#include "ps_server/dense_pull_reactor.h"
#include "ps_server/dense_push_reactor.h"
#include "ps_server/row_reactors.h"

namespace tessera {

ParameterServerService::ParameterServerService(ShardStore* store,
                                               PsServiceOptions options)
    : store_(store), options_(options) {}

grpc::ServerUnaryReactor* ParameterServerService::CreateShards(
    grpc::CallbackServerContext* context, const CreateShardsRequest* request,
    CreateShardsResponse* response) {
  absl::Status status = store_->Create(*request, response);
  if (status.ok()) {
    LOG(INFO) << "CreateShards: " << response->created() << " created, "
              << response->existing() << " existing; now "
              << store_->num_shards() << " shards, " << store_->resident_bytes()
              << " bytes";
  } else {
    LOG(WARNING) << "CreateShards refused: " << status;
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ParameterServerService::PullDense(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new DensePullReactor(store_, *request, options_.chunk_bytes);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* ParameterServerService::PushDense(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new DensePushReactor(store_, &sync_aggregators_,
                              ReadSyncPush(*context), response);
}

grpc::ServerWriteReactor<RowsChunk>* ParameterServerService::PullRows(
    grpc::CallbackServerContext* context, const PullRowsRequest* request) {
  return new RowPullReactor(store_, *request, options_.chunk_bytes);
}

grpc::ServerReadReactor<RowsChunk>* ParameterServerService::PushRows(
    grpc::CallbackServerContext* context, PushResponse* response) {
  return new RowPushReactor(store_, response);
}

grpc::ServerUnaryReactor* ParameterServerService::Health(
    grpc::CallbackServerContext* context, const HealthRequest* request,
    HealthResponse* response) {
  response->set_task_type("ps");
  response->set_task_index(options_.task_index);
  response->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - start_));
  response->set_num_shards(store_->num_shards());
  response->set_resident_bytes(store_->resident_bytes());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Shutdown(
    grpc::CallbackServerContext* context, const ShutdownRequest* request,
    ShutdownResponse* response) {
  LOG(INFO) << "Shutdown requested: " << request->reason();
  if (!shutdown_called_.exchange(true)) shutdown_.Notify();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace tessera
