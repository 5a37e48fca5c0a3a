#include "coordinator/ps_recovery.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "coordinator/replica_repair.h"
#include "glog/logging.h"

namespace tessera {
namespace {

// "step 392", or in lockstep modes (which number global steps too)
// "worker step 392 (global step 196)": checkpoints count worker steps.
std::string StepAt(const JobPosition& position) {
  if (position.next_sync_step <= 0) {
    return absl::StrCat("step ", position.global_step);
  }
  return absl::StrCat("worker step ", position.global_step, " (global step ",
                      position.next_sync_step, ")");
}

}  // namespace

PsRecovery::PsRecovery(JobCheckpointer* checkpointer, ClusterHealth* health,
                       ClusterCoordinator* coordinator, JobStatusBoard* board,
                       std::function<absl::Status()> create_variables,
                       std::FILE* out, PsRecoveryOptions options)
    : checkpointer_(checkpointer),
      health_(health),
      coordinator_(coordinator),
      board_(board),
      create_variables_(std::move(create_variables)),
      out_(out),
      options_(options) {}

absl::StatusOr<JobPosition> PsRecovery::Start() {
  if (!options_.restore) {
    // This run's checkpoints would mix with the earlier run's: pruning
    // would keep the newer of them, and recovering from a failed parameter
    // server would restore the other run's model.
    absl::StatusOr<std::optional<std::string>> old =
        checkpointer_->NewestComplete();
    if (!old.ok()) return old.status();
    if (old->has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--restore=false, but --checkpoint_dir ", checkpointer_->root(),
          " holds checkpoints of an earlier run (newest ", **old,
          "); give this run its own --checkpoint_dir, or remove them"));
    }
  }
  std::vector<std::string> rejected;
  absl::StatusOr<ValidCheckpoint> latest =
      options_.restore ? checkpointer_->Latest(&rejected)
                       : absl::NotFoundError("--restore is off");
  for (const std::string& why : rejected) {
    std::fprintf(out_, "checkpoint rejected: %s\n", why.c_str());
  }
  if (latest.ok()) {
    if (absl::Status s = checkpointer_->Restore(*latest); !s.ok()) return s;
    std::string line = absl::StrFormat("resuming from %s: epoch %d, %s",
                                       latest->path, latest->manifest.epoch(),
                                       StepAt(PositionOf(latest->manifest)));
    if (latest->manifest.next_step_in_epoch() > 0) {
      absl::StrAppendFormat(
          &line, " (%lld steps of the epoch already done)",
          static_cast<long long>(latest->manifest.next_step_in_epoch()));
    }
    LOG(INFO) << line;
    std::fprintf(out_, "%s\n", line.c_str());
    std::fflush(out_);
    board_->Update([&](JobStatus* s) { s->set_last_checkpoint(latest->path); });
    return PositionOf(latest->manifest);
  }
  if (latest.status().code() != absl::StatusCode::kNotFound) {
    return latest.status();
  }
  if (!options_.init_checkpoint.empty()) {
    if (absl::Status s =
            WarmStart(options_.init_checkpoint, *checkpointer_, out_);
        !s.ok()) {
      return s;
    }
  }
  JobPosition start;
  absl::StatusOr<std::string> first = checkpointer_->Save(start);
  if (!first.ok()) return first.status();
  board_->Update([&](JobStatus* s) { s->set_last_checkpoint(*first); });
  return start;
}

absl::Status WarmStart(const std::string& root, JobCheckpointer& checkpointer,
                       std::FILE* out) {
  std::vector<std::string> rejected;
  absl::StatusOr<ValidCheckpoint> init =
      CheckpointDir(root).LatestValid(&rejected);
  for (const std::string& why : rejected) {
    std::fprintf(out, "checkpoint rejected: %s\n", why.c_str());
  }
  if (!init.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--init_checkpoint=", root, ": ", init.status().message()));
  }
  // The restore re-shards onto this job's servers and checks every
  // variable's shape; the position stays at step 0.
  if (absl::Status s = checkpointer.Restore(*init); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("--init_checkpoint=", root, ": ", s.message()));
  }
  const std::string line = absl::StrFormat(
      "warm start from %s (saved by %d parameter servers): step 0", init->path,
      init->manifest.num_ps());
  LOG(INFO) << line;
  std::fprintf(out, "%s\n", line.c_str());
  std::fflush(out);
  return absl::OkStatus();
}

std::vector<std::string> PsRecovery::TakeReasons(const absl::Status& error) {
  // Taken first, so that a failure an earlier recovery dealt with is not
  // seen again here.
  const bool missed_heartbeat = health_->TakeHeartbeatFailure();
  std::vector<std::string> failed = health_->FailedServers();
  if (failed.empty() && missed_heartbeat) {
    // It answers again (it was paused, or too busy to answer in time), but
    // the steps it cut short may have reached some servers and not others:
    // every server goes back to the newest checkpoint, as for a restart.
    failed.push_back(
        "a parameter server missed its heartbeat and answers again");
  }
  // (Each reason once: the epoch's error, printed below, says the rest.)
  // Mirrored and hybrid: a worker that failed a step left its replica
  // behind the others', and its round could not run again (ReplicaRepair):
  // every replica goes back to the checkpoint.
  if (coordinator_->replica_losses()->Take()) {
    failed.push_back("a worker's replica missed a step");
  }
  // hybrid:ssp:S: a worker's last row pushes went with its process, so
  // the servers miss rows of steps the job counts as trained (the chaos
  // soak's seed 48125 lost its job so before this).
  if (RowPushesLost(error)) {
    failed.push_back("a worker's row pushes in flight were lost");
  }
  return failed;
}

absl::Status PsRecovery::CountLostPushRecovery(const absl::Status& error,
                                               const ValidCheckpoint& latest) {
  // Only a newer checkpoint starts the count again: a recovery for another
  // reason in between (a server lost) went back to the same one, so the
  // job made no progress past it.
  if (latest.step != lost_push_step_) {
    lost_push_step_ = latest.step;
    lost_push_recoveries_ = 0;
  }
  if (!RowPushesLost(error)) return absl::OkStatus();
  ++lost_push_recoveries_;
  if (lost_push_recoveries_ <= options_.max_lost_push_recoveries) {
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat(
      "the job went back to ", latest.path, " ",
      options_.max_lost_push_recoveries,
      " times in a row because a worker restarted with row pushes in flight "
      "before the next checkpoint, and it happened again; giving up "
      "(the last time: ",
      error.message(), ")"));
}

absl::StatusOr<JobPosition> PsRecovery::Recover(const absl::Status& error) {
  std::vector<std::string> failed = TakeReasons(error);
  if (failed.empty()) return error;
  const absl::Time start = absl::Now();
  // The checkpoint is a directory's, so it is known before the servers
  // are back: a recovery past the bound gives up before it waits for them,
  // re-creates their variables or pauses the heartbeat.
  std::vector<std::string> rejected;
  absl::StatusOr<ValidCheckpoint> latest = checkpointer_->Latest(&rejected);
  for (const std::string& why : rejected) {
    std::fprintf(out_, "checkpoint rejected: %s\n", why.c_str());
  }
  if (!latest.ok()) return latest.status();
  if (absl::Status s = CountLostPushRecovery(error, *latest); !s.ok()) {
    return s;
  }
  health_->Pause(true);
  std::fprintf(out_, "%s; training paused (the epoch failed with: %s)\n",
               absl::StrJoin(failed, "; ").c_str(),
               std::string(error.message()).c_str());
  std::fflush(out_);
  // A heartbeat may have aborted the steps after the error was taken.
  coordinator_->Join().IgnoreError();
  if (absl::Status s = health_->WaitForServers(options_.timeout); !s.ok()) {
    return s;
  }
  // Join does not wait for a failed worker's recovery (its step went back
  // to the queue): one still being restarted or configured is waited for,
  // as long as its own recovery lasts (--worker_recovery_timeout). The
  // chaos test's ssp2_idx seed 242156 failed a job so: its Configure was
  // CANCELLED while a server was down, and the check below came 40 ms
  // later, before the retry. A worker that drained or was removed is not
  // waited for: it left the job (the chaos soak's seed 48002 failed a job
  // so, its ps killed after a drain).
  coordinator_->AwaitWorkersBack(options_.timeout);
  const std::vector<std::pair<int64_t, bool>> workers =
      coordinator_->worker_progress();
  for (size_t w = 0; w < workers.size(); ++w) {
    if (workers[w].second && !coordinator_->gone(static_cast<int>(w))) {
      return absl::UnavailableError(absl::StrCat(
          "worker ", w, " did not come back; the recovery needs every worker"));
    }
  }
  if (absl::Status s = create_variables_(); !s.ok()) return s;
  if (absl::Status s = checkpointer_->Restore(*latest); !s.ok()) return s;
  coordinator_->Join().IgnoreError();
  health_->Pause(false);
  const JobPosition position = PositionOf(latest->manifest);
  const std::string line = absl::StrFormat(
      "recovered in %.2f s: restored %s on every parameter server%s; "
      "resuming epoch %d at %s%s",
      absl::ToDoubleSeconds(absl::Now() - start), latest->path,
      checkpointer_->has_replicas() ? " and every worker's replica" : "",
      position.epoch, StepAt(position),
      position.next_step_in_epoch > 0
          ? absl::StrFormat(" (%lld steps of the epoch already done)",
                            static_cast<long long>(position.next_step_in_epoch))
          : "");
  LOG(INFO) << line;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  board_->Update(
      [](JobStatus* s) { s->set_ps_recoveries(s->ps_recoveries() + 1); });
  return position;
}

}  // namespace tessera
