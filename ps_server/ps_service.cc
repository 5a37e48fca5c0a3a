#include "ps_server/ps_service.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/optimizer/gradient_clipping.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "ps_server/dense_pull_reactor.h"
#include "ps_server/dense_push_reactor.h"
#include "ps_server/refused_reactors.h"
#include "ps_server/row_reactors.h"
#include "ps_server/shard_checkpoint.h"

namespace tessera {

ParameterServerService::ParameterServerService(PsCore* core,
                                               PsServiceOptions options)
    : core_(core), store_(core->store()), options_(std::move(options)) {}

bool ParameterServerService::Refused(grpc::CallbackServerContext* context,
                                     const char* method,
                                     grpc::ServerUnaryReactor* reactor) const {
  grpc::Status status = options_.auth.Check(*context, method);
  if (status.ok()) return false;
  reactor->Finish(status);
  return true;
}

absl::Status ParameterServerService::ApplySyncStepsFor(
    const grpc::CallbackServerContext& context) {
  absl::StatusOr<std::optional<int64_t>> step = ReadSyncPull(context);
  if (!step.ok()) return step.status();
  core_->sync_steps()->ApplyBefore(*step);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ParameterServerService::CreateShards(
    grpc::CallbackServerContext* context, const CreateShardsRequest* request,
    CreateShardsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (Refused(context, "ParameterServer.CreateShards", reactor)) return reactor;
  absl::Status status = store_->Create(*request, response);
  if (status.ok()) {
    LOG(INFO) << "CreateShards: " << response->created() << " created, "
              << response->existing() << " existing; now "
              << store_->num_shards() << " shards, " << store_->resident_bytes()
              << " bytes";
  } else {
    LOG(WARNING) << "CreateShards refused: " << status;
  }
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// The streaming calls check the token where their reactor is made, so a
// refused call never parses its request or looks up a shard.
grpc::ServerWriteReactor<grpc::ByteBuffer>* ParameterServerService::PullDense(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  if (grpc::Status s =
          options_.auth.Check(*context, "ParameterServer.PullDense");
      !s.ok()) {
    return new RefusedWriteReactor<grpc::ByteBuffer>(s);
  }
  core_->CountPull();
  if (absl::Status s = ApplySyncStepsFor(*context); !s.ok()) {
    return new RefusedWriteReactor<grpc::ByteBuffer>(ToGrpcStatus(s));
  }
  return new DensePullReactor(store_, *request, options_.chunk_bytes);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* ParameterServerService::PushDense(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  if (grpc::Status s =
          options_.auth.Check(*context, "ParameterServer.PushDense");
      !s.ok()) {
    return new RefusedReadReactor<grpc::ByteBuffer>(s);
  }
  core_->CountPush();
  return new DensePushReactor(store_, core_->sync_steps(),
                              ReadSyncPush(*context),
                              ReadPushSize(*context, "PushDense"), response);
}

grpc::ServerWriteReactor<RowsChunk>* ParameterServerService::PullRows(
    grpc::CallbackServerContext* context, const PullRowsRequest* request) {
  if (grpc::Status s =
          options_.auth.Check(*context, "ParameterServer.PullRows");
      !s.ok()) {
    return new RefusedWriteReactor<RowsChunk>(s);
  }
  core_->CountPull();
  if (absl::Status s = ApplySyncStepsFor(*context); !s.ok()) {
    return new RefusedWriteReactor<RowsChunk>(ToGrpcStatus(s));
  }
  return new RowPullReactor(store_, *request, options_.chunk_bytes);
}

grpc::ServerReadReactor<RowsChunk>* ParameterServerService::PushRows(
    grpc::CallbackServerContext* context, PushResponse* response) {
  if (grpc::Status s =
          options_.auth.Check(*context, "ParameterServer.PushRows");
      !s.ok()) {
    return new RefusedReadReactor<RowsChunk>(s);
  }
  core_->CountPush();
  return new RowPushReactor(store_, core_->sync_steps(), ReadSyncPush(*context),
                            ReadPushSize(*context, "PushRows"), response);
}

grpc::ServerUnaryReactor* ParameterServerService::Health(
    grpc::CallbackServerContext* context, const HealthRequest* request,
    HealthResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (Refused(context, "ParameterServer.Health", reactor)) return reactor;
  response->set_task_type("ps");
  response->set_task_index(options_.task_index);
  response->set_uptime_ms(absl::ToInt64Milliseconds(core_->uptime()));
  response->set_num_shards(store_->num_shards());
  response->set_pulls_served(core_->pulls());
  response->set_pushes_served(core_->pushes());
  response->set_resident_bytes(store_->resident_bytes());
  response->set_used_bytes(store_->used_bytes());
  response->set_data_plane_port(core_->data_plane_port());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Shutdown(
    grpc::CallbackServerContext* context, const ShutdownRequest* request,
    ShutdownResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (Refused(context, "ParameterServer.Shutdown", reactor)) return reactor;
  LOG(INFO) << "Shutdown requested: " << request->reason();
  if (!shutdown_called_.exchange(true)) shutdown_.Notify();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::SaveShards(
    grpc::CallbackServerContext* context, const SaveShardsRequest* request,
    SaveShardsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (Refused(context, "ParameterServer.SaveShards", reactor)) return reactor;
  // The request and response live until Finish; the executor runs this
  // before the service goes away.
  checkpoint_io_.Post([this, request, response, reactor] {
    const absl::Time start = absl::Now();
    // The coordinator saves between steps: a sync step complete on every
    // server is part of the state saved.
    core_->sync_steps()->ApplyBefore(std::nullopt);
    absl::Status status =
        request->directory().empty()
            ? absl::InvalidArgumentError("SaveShards: no directory given")
            : SaveShardCheckpoint(*store_, request->directory(),
                                  request->ps_index(), response);
    if (status.ok()) {
      LOG(INFO) << "SaveShards: step " << request->global_step() << ", "
                << response->file().size_bytes() << " bytes of "
                << response->variables_size() << " variables into "
                << request->directory() << "/" << response->file().name()
                << " in " << absl::FormatDuration(absl::Now() - start);
    } else {
      LOG(WARNING) << "SaveShards of step " << request->global_step()
                   << " failed: " << status;
    }
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::RestoreShards(
    grpc::CallbackServerContext* context, const RestoreShardsRequest* request,
    RestoreShardsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (Refused(context, "ParameterServer.RestoreShards", reactor)) {
    return reactor;
  }
  checkpoint_io_.Post([this, request, response, reactor] {
    const absl::Time start = absl::Now();
    absl::Status status =
        request->directory().empty()
            ? absl::InvalidArgumentError("RestoreShards: no directory given")
            : RestoreShardCheckpoint(request->manifest(), request->directory(),
                                     store_, response);
    if (status.ok()) {
      // Sync steps restart from the checkpoint's; none of them is late.
      core_->sync_steps()->ResetAll();
      LOG(INFO) << "RestoreShards: " << response->shards_restored()
                << " shards, " << response->rows_restored() << " rows from "
                << request->directory() << " (step "
                << request->manifest().global_step() << ") in "
                << absl::FormatDuration(absl::Now() - start);
    } else {
      LOG(WARNING) << "RestoreShards from " << request->directory()
                   << " failed: " << status;
    }
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::StepNorm(
    grpc::CallbackServerContext* context, const StepNormRequest* request,
    StepNormResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (Refused(context, "ParameterServer.StepNorm", reactor)) return reactor;
  // A shard's group is its optimizer, when that clips by a global norm.
  std::map<std::string, float> clip_of;  // serialized optimizer: its norm
  std::map<std::string, std::string> group;
  auto group_of = [&](const std::string& shard) -> std::string {
    auto known = group.find(shard);
    if (known != group.end()) return known->second;
    std::string key;
    absl::StatusOr<std::string> optimizer = store_->OptimizerOf(shard);
    OptimizerConfig config;
    if (optimizer.ok() && config.ParseFromString(*optimizer) &&
        GradientClipOf(config).global_norm > 0) {
      key = *optimizer;
      clip_of[key] = GradientClipOf(config).global_norm;
    }
    group[shard] = key;
    return key;
  };
  if (request->norms().empty()) {
    absl::StatusOr<std::map<std::string, double>> partial =
        core_->sync_steps()->PartialNorms(request->step(), group_of);
    if (!partial.ok()) {
      reactor->Finish(ToGrpcStatus(partial.status()));
      return reactor;
    }
    for (const auto& [optimizer, squared] : *partial) {
      GroupNorm* g = response->add_partial();
      g->set_optimizer(optimizer);
      g->set_value(squared);
    }
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  std::map<std::string, double> norms;
  for (const GroupNorm& g : request->norms()) norms[g.optimizer()] = g.value();
  // As ClipGradients: scaled by limit / norm when the norm is finite and
  // above the limit.
  core_->sync_steps()->SetClipScales(
      request->step(), [&](const std::string& shard) -> float {
        const std::string key = group_of(shard);
        auto it = norms.find(key);
        if (key.empty() || it == norms.end()) return 1.0f;
        const double limit = clip_of[key];
        const double norm = it->second;
        return std::isfinite(norm) && norm > limit
                   ? static_cast<float>(limit / norm)
                   : 1.0f;
      });
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace tessera
