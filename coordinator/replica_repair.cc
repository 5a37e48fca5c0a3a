#include "coordinator/replica_repair.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/training_mode.h"
#include "coordinator/job_checkpointer.h"
#include "glog/logging.h"

namespace tessera {
namespace {

// The refusal when a restarted worker's row pushes were in flight, OK when
// none could be: under hybrid:ssp:S its last rounds' row pushes, up to S,
// went with its process, and running the failed round again would not
// bring them back. RowPushesLostError, as the checkpoint settle's, so that
// PsRecovery counts the job's return to its last checkpoint toward the
// same bound (max_lost_push_recoveries) whichever of the two saw it.
absl::Status LostRowPushesRefusal(const absl::StatusOr<TrainingMode>& mode,
                                  const std::vector<int>& restarted) {
  if (!mode.ok() || !mode->ssp_rows || mode->staleness <= 0) {
    return absl::OkStatus();
  }
  return RowPushesLostError(absl::StrCat(
      "worker ", absl::StrJoin(restarted, ", "), " restarted with up to ",
      mode->staleness,
      " of its row pushes in flight (hybrid:ssp): the rows of its last "
      "rounds may be missing from the servers"));
}

}  // namespace

ReplicaRepair::ReplicaRepair(ClusterCoordinator* coordinator,
                             ClusterHealth* health, WorkerReplicas* replicas,
                             std::string directory, JobConfig job,
                             std::FILE* out)
    : coordinator_(coordinator),
      health_(health),
      replicas_(replicas),
      directory_(std::move(directory)),
      job_(std::move(job)),
      out_(out) {}

absl::Status ReplicaRepair::Repair(int64_t global_step,
                                   const absl::Status& error) {
  const absl::Time start = absl::Now();
  if (health_->heartbeat_failed()) {
    return absl::FailedPreconditionError(
        "a parameter server missed its heartbeat too");
  }
  if (std::vector<std::string> failed = health_->FailedServers();
      !failed.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a parameter server failed too: ", absl::StrJoin(failed, "; ")));
  }
  const std::vector<int> restarted =
      coordinator_->replica_losses()->restarted();
  if (restarted.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no worker restarted, so the round would fail again: ",
                     error.message()));
  }
  const absl::StatusOr<TrainingMode> mode = ParseTrainingMode(job_.mode());
  if (absl::Status s = LostRowPushesRefusal(mode, restarted); !s.ok()) {
    return s;
  }
  const std::vector<std::pair<int64_t, bool>> workers =
      coordinator_->worker_progress();
  int survivor = -1;
  // The ring's members: a worker that drained is none.
  for (int w : replicas_->indices()) {
    const bool was_restarted =
        std::find(restarted.begin(), restarted.end(), w) != restarted.end();
    if (workers[w].second) {
      return absl::UnavailableError(absl::StrCat("worker ", w, " is not back"));
    }
    if (!was_restarted && survivor < 0) survivor = w;
  }
  if (survivor < 0) {
    return absl::FailedPreconditionError(
        "every worker restarted: no replica survived");
  }
  // A member removed for good changes the round's parts (one per member
  // left): servers aggregating the round's parts (hybrid:sync) may hold
  // some of the parts it had, so it cannot run again under its global
  // step; the job goes back to its last checkpoint instead.
  const std::vector<int>& members = replicas_->indices();
  std::vector<int> back, removed;
  for (int w : restarted) {
    (std::find(members.begin(), members.end(), w) != members.end() ? back
                                                                   : removed)
        .push_back(w);
  }
  if (!removed.empty() && mode.ok() && mode->aggregates_steps()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", absl::StrJoin(removed, ", "),
        " left the ring inside the round, whose parts the servers aggregate"));
  }
  absl::Status copied = replicas_->Copy(survivor, directory_, job_);
  // The copy is needed only until every worker has read it.
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
  if (!copied.ok()) return copied;
  coordinator_->replica_losses()->Take();
  // A worker that never came back was removed (--remove_lost_workers):
  // the ring goes on without it.
  const std::string line = absl::StrFormat(
      "worker%s %s %s inside global step %lld: every replica copied from "
      "worker %d's in %.2f s; the round runs again",
      restarted.size() > 1 ? "s" : "", absl::StrJoin(restarted, ", "),
      removed.empty() ? "restarted"
      : back.empty()  ? "failed for good and left the ring"
                      : "failed (some for good, leaving the ring)",
      static_cast<long long>(global_step), survivor,
      absl::ToDoubleSeconds(absl::Now() - start));
  LOG(INFO) << line;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  return absl::OkStatus();
}

}  // namespace tessera
