// The replica of a mirrored or hybrid worker in the job's checkpoints.

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "worker/params/replica_checkpoint.h"
#include "worker/training_worker.h"

namespace tessera {

absl::Status TrainingWorker::SaveReplica(const SaveShardsRequest& request,
                                         SaveShardsResponse* response) {
  if (state_ == nullptr || state_->replica == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SaveReplica: this worker keeps no replica (",
        configured() ? state_->mode.ToString() + " mode" : "not configured",
        ")"));
  }
  if (request.directory().empty()) {
    return absl::InvalidArgumentError("SaveReplica: no checkpoint directory");
  }
  return tessera::SaveReplica(*state_->replica, request.directory(), response);
}

absl::Status TrainingWorker::RestoreReplica(
    const RestoreReplicaRequest& request, RestoreShardsResponse* response) {
  if (state_ == nullptr || state_->replica == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RestoreReplica: this worker keeps no replica (",
        configured() ? state_->mode.ToString() + " mode" : "not configured",
        ")"));
  }
  // Rows pushed before the restore must not land after the servers' own
  // restore; a prefetch holds values of before it.
  state_->rows->WaitForPushes(0).IgnoreError();
  CancelPrefetch();
  const RestoreShardsRequest& checkpoint = request.checkpoint();
  if (absl::Status s = tessera::RestoreReplica(
          checkpoint.manifest(), checkpoint.directory(), state_->replica);
      !s.ok()) {
    return s;
  }
  response->set_shards_restored(
      static_cast<int32_t>(state_->replica->variables().size()));
  if (request.collective_epoch() != 0) {
    if (absl::Status s = all_reducer_->Restart(request.collective_epoch());
        !s.ok()) {
      return s;
    }
  }
  LOG(INFO) << "replica restored from " << checkpoint.directory() << " (step "
            << checkpoint.manifest().global_step() << ")";
  return absl::OkStatus();
}

void TrainingWorker::Interrupt(const std::string& reason) {
  if (all_reducer_ == nullptr) return;
  LOG(WARNING) << "all-reduce interrupted: " << reason;
  all_reducer_->Abort(absl::AbortedError(
      absl::StrCat("the chief interrupted the all-reduce: ", reason)));
}

}  // namespace tessera
