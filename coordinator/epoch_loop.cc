#include "coordinator/epoch_loop.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/report/job_summary.h"
#include "coordinator/report/metrics_history.h"
#include "glog/logging.h"

namespace tessera {

EpochLoop::EpochLoop(JobConfig job, EpochLoopParts parts,
                     EpochLoopOptions options)
    : job_(std::move(job)), parts_(parts), options_(std::move(options)) {}

absl::Status EpochLoop::Plan(int epoch) {
  absl::StatusOr<std::unique_ptr<StepPlan>> data =
      parts_.setup->PlanData(epoch);
  if (!data.ok()) return data.status();
  data_ = *std::move(data);
  return absl::OkStatus();
}

absl::Status EpochLoop::ResumeFrom(const JobPosition& position) {
  if (const int lost = parts_.metrics->RecoverPendingEpoch(position.epoch);
      lost > 0) {
    std::fprintf(parts_.out,
                 "epoch %d's metrics line, lost with the previous "
                 "coordinator after its checkpoint, written from "
                 "metrics.pending\n",
                 lost);
  }
  // The job's totals count what earlier coordinators of the job trained.
  if (!options_.run_dir.empty()) {
    results_ = EpochsBefore(
        ReadEpochHistory(options_.run_dir + "/metrics.jsonl"), position.epoch);
    resumed_epochs_ = static_cast<int>(results_.size());
    for (EpochResult& r : results_) {
      earlier_steps_rerun_ += r.steps_rerun;
      r.has_accuracy = options_.has_accuracy;
    }
  }
  if (absl::Status s = Plan(position.epoch); !s.ok()) return s;
  parts_.runner->SetPosition(position.global_step, position.next_sync_step);
  return absl::OkStatus();
}

absl::StatusOr<std::string> EpochLoop::SaveCheckpoint(
    const JobPosition& position) {
  absl::StatusOr<std::string> saved =
      parts_.checkpointer != nullptr
          ? parts_.checkpointer->Save(position)
          : absl::FailedPreconditionError(
                "this job writes no checkpoints (no --checkpoint_dir)");
  RestartCadence();
  if (saved.ok()) {
    last_checkpoint_step_ = position.global_step;
    parts_.board->Update([&](JobStatus* s) { s->set_last_checkpoint(*saved); });
  }
  if (parts_.control->checkpoint_wanted())
    parts_.control->CheckpointWritten(saved);
  return saved;
}

JobPosition EpochLoop::PositionAfter(int epoch) const {
  JobPosition position;
  position.global_step = parts_.runner->next_step();
  position.epoch = epoch;
  position.next_sync_step = parts_.runner->next_global_step();
  return position;
}

absl::Status EpochLoop::Evaluate(EpochResult* result) {
  result->has_accuracy = options_.has_accuracy;
  if (absl::Status s =
          parts_.evaluator->Evaluate(parts_.setup->test_examples(), result);
      !s.ok()) {
    return s;
  }
  parts_.board->Update([&](JobStatus* s) {
    s->set_last_test_accuracy(static_cast<float>(result->test_accuracy));
    s->set_last_test_loss(static_cast<float>(result->test_loss));
    s->set_regression(!options_.has_accuracy);
    s->set_evaluations(s->evaluations() + 1);
  });
  return absl::OkStatus();
}

absl::Status EpochLoop::EvaluateCheckpoint(int workers) {
  if (parts_.checkpointer == nullptr) {
    return absl::FailedPreconditionError(
        "--evaluate_only needs --checkpoint_dir");
  }
  std::vector<std::string> rejected;
  absl::StatusOr<ValidCheckpoint> latest =
      parts_.checkpointer->Latest(&rejected);
  for (const std::string& why : rejected) {
    std::fprintf(parts_.out, "checkpoint rejected: %s\n", why.c_str());
  }
  if (!latest.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--evaluate_only: no checkpoint to evaluate in ",
        parts_.checkpointer->root(), ": ", latest.status().message()));
  }
  if (absl::Status s = parts_.checkpointer->Restore(*latest); !s.ok()) return s;
  EpochResult result;
  result.epoch = latest->manifest.epoch() - 1;
  const absl::Time start = absl::Now();
  if (absl::Status s = Evaluate(&result); !s.ok()) return s;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const std::string figures =
      options_.has_accuracy
          ? absl::StrFormat("test loss %.4f, test accuracy %.4f",
                            result.test_loss, result.test_accuracy)
          : absl::StrFormat("test loss (MSE) %.4f", result.test_loss);
  std::fprintf(parts_.out,
               "evaluated %s (after epoch %d) on %lld test examples with %d "
               "workers: %s\n",
               latest->path.c_str(), result.epoch,
               static_cast<long long>(parts_.setup->test_examples()), workers,
               figures.c_str());
  if (result.auc >= 0) {
    std::fprintf(
        parts_.out,
        "evaluated: test AUC %.6f (best achievable %s), test log loss %.6f\n",
        result.auc,
        parts_.setup->best_auc() >= 0
            ? absl::StrFormat("%.4f", parts_.setup->best_auc()).c_str()
            : "unknown",
        result.log_loss);
  }
  std::fflush(parts_.out);
  parts_.metrics->WriteEpoch(result, parts_.setup->best_auc());
  return absl::OkStatus();
}

absl::Status EpochLoop::CheckEpochCoverage(const EpochResult& result) const {
  // A one-pass epoch reads each training example exactly once: a step lost
  // or run twice (a failed worker's step re-run) would show here. A bad
  // record skipped (skip_bad_records) was read but not trained on.
  if (job_.schedule().steps_per_epoch() != 0) return absl::OkStatus();
  if (result.examples + result.bad_records != parts_.setup->train_examples()) {
    return absl::InternalError(absl::StrCat(
        "epoch ", result.epoch, " trained on ", result.examples, " examples (",
        result.bad_records,
        " bad records skipped); one pass over the training set is ",
        parts_.setup->train_examples()));
  }
  // The count can hold while an example was trained twice and another
  // never: the digest of the examples' identities cannot.
  return CheckExampleDigest(result, data_->OnePassDigest());
}

absl::Status EpochLoop::ResumeAt(const JobPosition& position, int* epoch) {
  *epoch = position.epoch;
  resume_ = position;
  // Epochs after the checkpoint are trained again and kept again: the
  // summary counts each epoch of the job once.
  results_.erase(std::remove_if(results_.begin(), results_.end(),
                                [&](const EpochResult& r) {
                                  return r.extra_steps.empty() &&
                                         r.epoch >= position.epoch;
                                }),
                 results_.end());
  resumed_epochs_ =
      std::min(resumed_epochs_, static_cast<int>(results_.size()));
  // Every step done since the checkpoint is trained again: re-run work,
  // as a failed worker's step is (a server killed in an async epoch once
  // showed "2 steps re-run" while 45,824 examples were trained again).
  const int64_t done = parts_.board->Snapshot().steps_done();
  if (done > position.global_step) {
    parts_.coordinator->CountRerun(done - position.global_step);
  }
  parts_.runner->UndoRoundsSince(position.next_sync_step);
  parts_.runner->SetPosition(position.global_step,
                             parts_.runner->next_global_step());
  RestartCadence();
  absl::StatusOr<std::unique_ptr<StepPlan>> data =
      parts_.setup->PlanData(*epoch);
  if (!data.ok()) return data.status();
  data_ = *std::move(data);
  return absl::OkStatus();
}

void EpochLoop::Keep(EpochResult result) {
  const int64_t rerun = parts_.coordinator->steps_rerun();
  result.steps_rerun = rerun - rerun_counted_;
  rerun_counted_ = rerun;
  results_.push_back(result);
  parts_.metrics->WriteEpoch(result, parts_.setup->best_auc());
  parts_.metrics->WriteCharts(results_);
}

namespace {

// "stopped by the operator (why)", or without the parentheses when the
// operator gave no reason.
std::string StoppedByOperator(const std::string& reason) {
  return reason.empty()
             ? std::string("stopped by the operator")
             : absl::StrCat("stopped by the operator (", reason, ")");
}

EpochResult ResultOf(const EpochProgress& p) {
  EpochResult r;
  r.steps = p.steps();
  r.examples = p.examples();
  r.train_loss = p.train_loss();
  r.train_accuracy = p.train_accuracy();
  r.seconds = p.seconds();
  r.bad_records = p.bad_records();
  r.example_digest = p.example_digest();
  // A checkpoint of an older Tessera holds no digest of its epoch's part.
  r.digest_known = p.example_digest() != 0 || p.examples() == 0;
  return r;
}

EpochProgress ProgressOf(const EpochResult& r) {
  EpochProgress p;
  p.set_steps(r.steps);
  p.set_examples(r.examples);
  p.set_train_loss(r.train_loss);
  p.set_train_accuracy(r.train_accuracy);
  p.set_seconds(r.seconds);
  p.set_bad_records(r.bad_records);
  p.set_example_digest(r.example_digest);
  return p;
}

}  // namespace

absl::StatusOr<int> EpochLoop::TrainEpochs(JobPosition position) {
  const int epochs = job_.schedule().epochs();
  int epoch = position.epoch;
  resume_ = position;
  // The job starts at a checkpoint (PsRecovery::Start writes one).
  RestartCadence();
  parts_.board->Update([](JobStatus* s) { s->set_state("training"); });
  while (epoch <= epochs && !parts_.control->stop_requested()) {
    EpochResult result;
    absl::Status s = RunEpoch(epoch, &result);
    if (stopped_inside_epoch_) {
      if (!s.ok()) return s;
      return epoch;
    }
    if (s.ok()) s = Evaluate(&result);
    if (!s.ok() && parts_.control->stop_requested()) break;
    if (!s.ok()) {
      if (absl::Status r = Recover(s, &epoch); !r.ok()) return r;
      continue;
    }
    resume_ = JobPosition();
    if (absl::Status check = CheckEpochCoverage(result); !check.ok()) {
      return check;
    }
    PrintEpochResult(parts_.out, result, epochs, parts_.setup->best_auc());
    if (absl::Status lost = CheckpointEpoch(epoch, result); !lost.ok()) {
      // A server lost its shards (it restarted), or a worker its row
      // pushes in flight: this epoch's model is gone with them, so recover
      // as from a failed epoch and train it again from the last checkpoint.
      if (absl::Status r = Recover(lost, &epoch); !r.ok()) return r;
      continue;
    }
    Keep(result);
    parts_.health->Refresh();
    ++epoch;
  }
  return epoch;
}

absl::Status EpochLoop::RunEpoch(int epoch, EpochResult* result) {
  const int epochs = job_.schedule().epochs();
  // A stop lets the steps in flight finish and schedules no more, so a
  // checkpoint then holds exactly the steps before it.
  const std::function<bool()> stop = [this] {
    return parts_.control->stop_requested();
  };
  std::vector<PlannedStep> steps = data_->NextEpoch();
  const int64_t planned = static_cast<int64_t>(steps.size());
  // An epoch resumed from a stop's checkpoint: its first steps were
  // trained before it, and the epoch's figures include them.
  int64_t skipped = 0;
  if (resume_.epoch == epoch && resume_.next_step_in_epoch > 0) {
    skipped = std::min(resume_.next_step_in_epoch, planned);
    steps.erase(steps.begin(), steps.begin() + skipped);
    *result = ResultOf(resume_.progress);
  }
  const int64_t to_run = static_cast<int64_t>(steps.size());
  EpochResult part;
  std::vector<PlannedStep> not_run;
  // Checkpoints inside the epoch hold its part before this run too.
  const EpochResult before = *result;
  StepRunner::Boundary boundary;
  boundary.due = [this] { return CheckpointDue(); };
  boundary.take = [&](int64_t left, const EpochResult& so_far) {
    EpochResult total = before;
    AddEpochPart(so_far, &total);
    total.epoch = epoch;
    return CheckpointInsideEpoch(epoch, planned, skipped + to_run - left,
                                 total);
  };
  *parts_.in_steps = true;
  absl::Status s =
      parts_.runner->Run(std::move(steps), epoch, *data_,
                         absl::StrFormat("epoch %d/%d", epoch, epochs), &part,
                         stop, &not_run, &boundary);
  *parts_.in_steps = false;
  AddEpochPart(part, result);
  result->epoch = epoch;
  if (s.ok() && !not_run.empty()) {
    int64_t left = 0;  // a mirrored round's padding is no step of the plan
    for (const PlannedStep& p : not_run) left += !p.empty();
    stopped_inside_epoch_ = true;
    return StopInsideEpoch(epoch, planned, skipped + to_run - left, *result);
  }
  return s;
}

void EpochLoop::RestartCadence() {
  cadence_step_ = parts_.runner->next_step();
  cadence_global_step_ = parts_.runner->next_global_step();
  cadence_time_ = absl::Now();
}

bool EpochLoop::CheckpointDue() {
  // Not twice at one step: the job starts, or resumes, at a checkpoint.
  if (parts_.runner->next_step() == cadence_step_) return false;
  if (parts_.control->checkpoint_wanted()) return true;
  if (parts_.checkpointer == nullptr) return false;
  if (options_.checkpoint_every_steps > 0) {
    const int64_t since =
        options_.mode.lockstep()
            ? parts_.runner->next_global_step() - cadence_global_step_
            : parts_.runner->next_step() - cadence_step_;
    if (since >= options_.checkpoint_every_steps) return true;
  }
  return options_.checkpoint_every > absl::ZeroDuration() &&
         absl::Now() - cadence_time_ >= options_.checkpoint_every;
}

absl::Status EpochLoop::CheckpointInsideEpoch(int epoch, int64_t planned,
                                              int64_t done,
                                              const EpochResult& result) {
  JobPosition at = PositionAfter(epoch);
  at.next_step_in_epoch = done;
  at.progress = ProgressOf(result);
  absl::StatusOr<std::string> saved = SaveCheckpoint(at);
  if (saved.ok()) {
    LOG(INFO) << "checkpoint " << *saved << " inside epoch " << epoch
              << " after " << done << " of its " << planned << " "
              << (options_.mode.lockstep() ? "worker steps" : "steps")
              << " (job step " << at.global_step << ")";
    return absl::OkStatus();
  }
  if (MustRecover(saved.status())) return saved.status();
  if (parts_.checkpointer != nullptr) {
    parts_.metrics->RecordWriteFailure(absl::StrFormat(
        "checkpoint after step %lld of %lld of epoch %d failed: %s",
        static_cast<long long>(done), static_cast<long long>(planned), epoch,
        saved.status().message()));
  }
  return absl::OkStatus();
}

bool EpochLoop::MustRecover(const absl::Status& failed_save) {
  if (parts_.recovery == nullptr) return false;
  // A worker's row pushes in flight went with its process (hybrid:ssp):
  // no checkpoint can hold the steps they carried, so the job goes back to
  // the last one and trains them again, as for a lost server.
  return RowPushesLost(failed_save) || !parts_.health->FailedServers().empty();
}

absl::Status EpochLoop::Recover(const absl::Status& failure, int* epoch) {
  absl::StatusOr<JobPosition> resumed =
      parts_.recovery != nullptr ? parts_.recovery->Recover(failure) : failure;
  if (!resumed.ok()) return resumed.status();
  return ResumeAt(*resumed, epoch);
}

absl::Status EpochLoop::CheckpointEpoch(int epoch, const EpochResult& result) {
  const int epochs = job_.schedule().epochs();
  // The epoch's record is written once its checkpoint is safe: an epoch
  // trained again after a server lost its shards gets one line.
  if (!((parts_.checkpointer != nullptr &&
         (epoch % std::max(1, options_.checkpoint_every_epochs) == 0 ||
          epoch == epochs)) ||
        parts_.control->checkpoint_wanted())) {
    return absl::OkStatus();
  }
  // The epoch's line, kept whole before the checkpoint that makes the
  // epoch done (MetricsWriter::StagePendingEpoch).
  if (absl::Status s =
          parts_.metrics->StagePendingEpoch(result, parts_.setup->best_auc());
      !s.ok()) {
    LOG(WARNING) << "epoch " << epoch << "'s pending metrics line: " << s;
  }
  absl::StatusOr<std::string> saved = SaveCheckpoint(PositionAfter(epoch + 1));
  if (!saved.ok() && MustRecover(saved.status())) return saved.status();
  if (!saved.ok() && parts_.checkpointer != nullptr) {
    // Training goes on, but the job will not end as if nothing were
    // lost. (Without checkpoints, only the operator who asked for one
    // is told.)
    parts_.metrics->RecordWriteFailure(
        absl::StrCat("checkpoint after epoch ", epoch,
                     " failed: ", saved.status().message()));
  }
  return absl::OkStatus();
}

void EpochLoop::EndAtStop(int epoch) {
  if (!parts_.control->stop_requested()) return;
  stopped_early_ = epoch <= job_.schedule().epochs();
  // A stop at an epoch's boundary keeps the epochs trained since the
  // last checkpoint too.
  if (stopped_early_ && parts_.checkpointer != nullptr &&
      last_checkpoint_step_ != parts_.runner->next_step()) {
    if (absl::StatusOr<std::string> saved =
            SaveCheckpoint(PositionAfter(epoch));
        !saved.ok()) {
      parts_.metrics->RecordWriteFailure(absl::StrCat(
          "checkpoint at the stop failed: ", saved.status().message()));
    }
  }
  std::fprintf(
      parts_.out, "%s after %s\n",
      StoppedByOperator(parts_.control->stop_reason()).c_str(),
      StepCount(parts_.runner->next_step(), parts_.runner->next_global_step(),
                options_.mode.lockstep())
          .c_str());
  std::fflush(parts_.out);
}

absl::Status EpochLoop::StopInsideEpoch(int epoch, int64_t planned,
                                        int64_t done, EpochResult result) {
  stopped_early_ = true;
  result.stopped = true;
  result.has_accuracy = options_.has_accuracy;
  result.planned_steps = planned;
  JobPosition at = PositionAfter(epoch);
  at.next_step_in_epoch = done;
  at.progress = ProgressOf(result);
  std::string where = absl::StrFormat(
      "at %s %lld of %lld of epoch %d",
      options_.mode.lockstep() ? "worker step" : "step",
      static_cast<long long>(done), static_cast<long long>(planned), epoch);
  if (parts_.checkpointer != nullptr || parts_.control->checkpoint_wanted()) {
    absl::StatusOr<std::string> saved = SaveCheckpoint(at);
    if (saved.ok()) {
      absl::StrAppend(&where, "; checkpoint ", *saved,
                      " resumes the epoch there");
    } else {
      parts_.metrics->RecordWriteFailure(absl::StrCat(
          "checkpoint ", where, " failed: ", saved.status().message()));
    }
  }
  // "(job step N)": the checkpoint's name; lockstep modes name the global
  // step too.
  const std::string job_step =
      options_.mode.lockstep()
          ? absl::StrFormat(
                "job worker step %lld, global step %lld",
                static_cast<long long>(parts_.runner->next_step()),
                static_cast<long long>(parts_.runner->next_global_step()))
          : absl::StrFormat("job step %lld",
                            static_cast<long long>(parts_.runner->next_step()));
  std::fprintf(parts_.out, "%s %s (%s)\n",
               StoppedByOperator(parts_.control->stop_reason()).c_str(),
               where.c_str(), job_step.c_str());
  std::fflush(parts_.out);
  // The summary counts what was trained; the epoch gets its metrics line
  // once it is finished, by the run that resumes it.
  results_.push_back(std::move(result));
  return absl::OkStatus();
}

}  // namespace tessera
