#include "coordinator/operator_commands.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/report/job_summary.h"

namespace tessera {

OperatorCommands::OperatorCommands(OperatorCommandsParts parts,
                                   OperatorCommandsOptions options)
    : parts_(parts), options_(std::move(options)) {}

absl::Status OperatorCommands::Serve(int epoch) {
  while (true) {
    if (parts_.control->stop_requested()) return absl::OkStatus();
    if (parts_.control->checkpoint_wanted()) {
      // Past the epochs: a restored job has no epoch left to run; extra
      // steps are the operator's to schedule again.
      parts_.loop->SaveCheckpoint(parts_.loop->PositionAfter(epoch))
          .IgnoreError();  // ctl is told
      continue;
    }
    if (const int64_t steps = parts_.control->TakeSteps(); steps > 0) {
      parts_.board->Update([](JobStatus* s) { s->set_state("training"); });
      if (absl::Status s = RunExtraSteps(steps); !s.ok()) return s;
      parts_.control->StepsDone(steps);
      continue;
    }
    if (!options_.wait_for_commands) return absl::OkStatus();
    parts_.health->Refresh();
    parts_.board->Update(
        [](JobStatus* s) { s->set_state("waiting for commands"); });
    std::fprintf(parts_.out,
                 "waiting for commands (tessera_ctl schedule|checkpoint|"
                 "stop)\n");
    std::fflush(parts_.out);
    parts_.control->WaitForWork();
  }
}

void OperatorCommands::CheckpointBetweenSteps() {
  const bool asked = parts_.control->checkpoint_wanted();
  if (!asked && !options_.writes_checkpoints) return;
  absl::StatusOr<std::string> saved = parts_.loop->SaveCheckpoint(
      parts_.loop->PositionAfter(options_.epochs + 1));
  if (saved.ok()) {
    // Named by the step count, as the checkpoint (ckpt-N) is.
    const std::string at =
        options_.mode.lockstep()
            ? absl::StrFormat(
                  "worker step %lld (global step %lld)",
                  static_cast<long long>(parts_.runner->next_step()),
                  static_cast<long long>(parts_.runner->next_global_step()))
            : absl::StrFormat("step %lld", static_cast<long long>(
                                               parts_.runner->next_step()));
    std::fprintf(parts_.out, "checkpoint after %s: %s\n", at.c_str(),
                 saved->c_str());
    std::fflush(parts_.out);
  } else if (options_.writes_checkpoints) {
    parts_.metrics->RecordWriteFailure(
        absl::StrCat("checkpoint after step ", parts_.runner->next_step(),
                     " failed: ", saved.status().message()));
  }
}

absl::Status OperatorCommands::RunExtraSteps(int64_t steps) {
  // In lockstep modes a step is a global step, one batch per worker.
  const int64_t per_step = options_.mode.lockstep() ? options_.num_workers : 1;
  const int epoch = options_.epochs + 1;
  const std::string label = absl::StrFormat("steps %d-%d", extra_steps_run_ + 1,
                                            extra_steps_run_ + steps);
  // A checkpoint or a stop asked for meanwhile, or the checkpoint cadence
  // (--checkpoint_every_steps/seconds), is taken at the next step
  // boundary, not at an epoch's end that extra steps may never reach.
  auto pause = [this] {
    return parts_.control->checkpoint_wanted() ||
           parts_.control->stop_requested() || parts_.loop->CheckpointDue();
  };
  *parts_.in_steps = true;
  EpochResult result;
  result.epoch = epoch;
  int64_t left = steps * per_step;
  absl::Status status;
  while (left > 0 && !parts_.control->stop_requested()) {
    // At most an epoch's plan at a time, so a large request (tessera_ctl
    // schedule 100000000) holds one epoch of example ids, not all of them.
    if (extra_plan_.empty()) {
      std::vector<PlannedStep> next = parts_.loop->data()->NextEpoch();
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
    status = parts_.runner->Run(std::move(taken), epoch, *parts_.loop->data(),
                                part_label, &part, pause, &not_run);
    if (!status.ok()) break;
    left -= scheduled - static_cast<int64_t>(not_run.size());
    extra_plan_.insert(extra_plan_.begin(),
                       std::make_move_iterator(not_run.begin()),
                       std::make_move_iterator(not_run.end()));
    AddEpochPart(part, &result);
    if (pause()) CheckpointBetweenSteps();
  }
  *parts_.in_steps = false;
  if (!status.ok())
    return parts_.control->stop_requested() ? absl::OkStatus() : status;
  const int64_t done = steps - (left + per_step - 1) / per_step;
  if (done == 0) return absl::OkStatus();
  result.extra_steps =
      done == steps ? label
                    : absl::StrFormat("steps %d-%d", extra_steps_run_ + 1,
                                      extra_steps_run_ + done);
  extra_steps_run_ += done;
  if (absl::Status s = parts_.loop->Evaluate(&result); !s.ok()) return s;
  PrintEpochResult(parts_.out, result, options_.epochs,
                   parts_.setup->best_auc());
  parts_.loop->Keep(result);
  return absl::OkStatus();
}

}  // namespace tessera
