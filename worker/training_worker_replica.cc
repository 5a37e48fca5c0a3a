// The replica of a mirrored or hybrid worker in the job's checkpoints.

#include <string>
#include <vector>

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
  const RestoreShardsRequest& checkpoint = request.checkpoint();
  const bool reform = request.ring_peers_size() > 0;
  if (checkpoint.directory().empty() && !reform) {
    return absl::InvalidArgumentError(
        "RestoreReplica: neither a checkpoint directory nor a ring to re-form");
  }
  if (reform && request.collective_epoch() == 0) {
    return absl::InvalidArgumentError(
        "RestoreReplica: a ring re-formed needs a collective epoch");
  }
  if (!checkpoint.directory().empty()) {
    // Rows pushed before the restore must not land after the servers' own
    // restore; a prefetch holds values of before it.
    state_->rows->WaitForPushes(0).IgnoreError();
    CancelPrefetch();
    if (absl::Status s = tessera::RestoreReplica(
            checkpoint.manifest(), checkpoint.directory(), state_->replica);
        !s.ok()) {
      return s;
    }
    response->set_shards_restored(
        static_cast<int32_t>(state_->replica->variables().size()));
    LOG(INFO) << "replica restored from " << checkpoint.directory() << " (step "
              << checkpoint.manifest().global_step() << ")";
  }
  if (reform) {
    std::vector<std::string> peers(request.ring_peers().begin(),
                                   request.ring_peers().end());
    if (absl::Status s = all_reducer_->Reform(request.ring_rank(), peers,
                                              request.collective_epoch());
        !s.ok()) {
      return s;
    }
    LOG(INFO) << "all-reduce ring re-formed: rank " << request.ring_rank()
              << " of " << peers.size();
  } else if (request.collective_epoch() != 0) {
    if (absl::Status s = all_reducer_->Restart(request.collective_epoch());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void TrainingWorker::Interrupt(const std::string& reason) {
  if (all_reducer_ == nullptr) return;
  LOG(WARNING) << "all-reduce interrupted: " << reason;
  all_reducer_->Abort(absl::AbortedError(
      absl::StrCat("the chief interrupted the all-reduce: ", reason)));
}

}  // namespace tessera
