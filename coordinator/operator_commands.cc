// The part of TrainingJob that serves operators (tessera_ctl) once the
// epochs are over: extra steps, checkpoints between steps, and stop.

#include <algorithm>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/report/job_summary.h"
#include "coordinator/training_job.h"

namespace tessera {

absl::Status TrainingJob::ServeCommands(int epoch) {
  while (true) {
    if (control_.stop_requested()) return absl::OkStatus();
    if (control_.checkpoint_wanted()) {
      // Past the epochs: a restored job has no epoch left to run; extra
      // steps are the operator's to schedule again.
      loop_->SaveCheckpoint(loop_->PositionAfter(epoch))
          .IgnoreError();  // ctl is told
      continue;
    }
    if (const int64_t steps = control_.TakeSteps(); steps > 0) {
      board_.Update([](JobStatus* s) { s->set_state("training"); });
      if (absl::Status s = RunExtraSteps(steps); !s.ok()) return s;
      control_.StepsDone(steps);
      continue;
    }
    if (!options_.wait_for_commands) return absl::OkStatus();
    health_->Refresh();
    board_.Update([](JobStatus* s) { s->set_state("waiting for commands"); });
    std::fprintf(out_,
                 "waiting for commands (tessera_ctl schedule|checkpoint|"
                 "stop)\n");
    std::fflush(out_);
    control_.WaitForWork();
  }
}

void TrainingJob::CheckpointBetweenSteps() {
  const bool asked = control_.checkpoint_wanted();
  if (!asked && checkpointer_ == nullptr) return;
  absl::StatusOr<std::string> saved =
      loop_->SaveCheckpoint(loop_->PositionAfter(job_.schedule().epochs() + 1));
  if (saved.ok()) {
    // Named by the step count, as the checkpoint (ckpt-N) is.
    const std::string at =
        mode_.lockstep()
            ? absl::StrFormat(
                  "worker step %lld (global step %lld)",
                  static_cast<long long>(runner_->next_step()),
                  static_cast<long long>(runner_->next_global_step()))
            : absl::StrFormat("step %lld",
                              static_cast<long long>(runner_->next_step()));
    std::fprintf(out_, "checkpoint after %s: %s\n", at.c_str(), saved->c_str());
    std::fflush(out_);
  } else if (checkpointer_ != nullptr) {
    metrics_->RecordWriteFailure(
        absl::StrCat("checkpoint after step ", runner_->next_step(),
                     " failed: ", saved.status().message()));
  }
}

absl::Status TrainingJob::RunExtraSteps(int64_t steps) {
  // In lockstep modes a step is a global step, one batch per worker.
  const int64_t per_step = mode_.lockstep() ? workers_.size() : 1;
  const int epoch = job_.schedule().epochs() + 1;
  const std::string label = absl::StrFormat("steps %d-%d", extra_steps_run_ + 1,
                                            extra_steps_run_ + steps);
  // A checkpoint or a stop asked for meanwhile is taken at the next step
  // boundary, not at an epoch's end that extra steps may never reach.
  auto pause = [this] {
    return control_.checkpoint_wanted() || control_.stop_requested();
  };
  in_steps_ = true;
  EpochResult result;
  result.epoch = epoch;
  int64_t left = steps * per_step;
  absl::Status status;
  while (left > 0 && !control_.stop_requested()) {
    // At most an epoch's plan at a time, so a large request (tessera_ctl
    // schedule 100000000) holds one epoch of example ids, not all of them.
    if (extra_plan_.empty()) {
      std::vector<PlannedStep> next = loop_->data()->NextEpoch();
      if (next.empty()) {
        status = absl::FailedPreconditionError("the data plan has no steps");
        break;
      }
      extra_plan_.assign(std::make_move_iterator(next.begin()),
                         std::make_move_iterator(next.end()));
    }
    std::vector<PlannedStep> taken;
    while (static_cast<int64_t>(taken.size()) < left && !extra_plan_.empty()) {
      taken.push_back(std::move(extra_plan_.front()));
      extra_plan_.pop_front();
    }
    const int64_t scheduled = static_cast<int64_t>(taken.size());
    // The bar counts this part's steps, so its label names this part's
    // steps too, not the whole request's (an epoch's plan may end inside
    // it).
    const int64_t first =
        extra_steps_run_ + (steps * per_step - left) / per_step;
    const std::string part_label =
        absl::StrFormat("steps %d-%d", first + 1,
                        first + (scheduled + per_step - 1) / per_step);
    EpochResult part;
    std::vector<PlannedStep> not_run;
    status = runner_->Run(std::move(taken), epoch, *loop_->data(), part_label,
                          &part, pause, &not_run);
    if (!status.ok()) break;
    left -= scheduled - static_cast<int64_t>(not_run.size());
    extra_plan_.insert(extra_plan_.begin(),
                       std::make_move_iterator(not_run.begin()),
                       std::make_move_iterator(not_run.end()));
    AddEpochPart(part, &result);
    if (pause()) CheckpointBetweenSteps();
  }
  in_steps_ = false;
  if (!status.ok())
    return control_.stop_requested() ? absl::OkStatus() : status;
  const int64_t done = steps - (left + per_step - 1) / per_step;
  if (done == 0) return absl::OkStatus();
  result.extra_steps =
      done == steps ? label
                    : absl::StrFormat("steps %d-%d", extra_steps_run_ + 1,
                                      extra_steps_run_ + done);
  extra_steps_run_ += done;
  if (absl::Status s = loop_->Evaluate(&result); !s.ok()) return s;
  PrintEpochResult(out_, result, job_.schedule().epochs(), setup_->best_auc());
  loop_->Keep(result);
  return absl::OkStatus();
}

}  // namespace tessera
