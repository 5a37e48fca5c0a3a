// The evaluator task (TensorFlow's SidecarEvaluator): a process beside a
// training job that watches its checkpoint folder and evaluates each new
// checkpoint on the test set as it appears, with the prediction code
// (tools/predict), writing
//   <run_dir>/eval.jsonl              one JSON line per checkpoint
//   <run_dir>/tensorboard/eval/       TensorBoard scalars eval/loss,
//                                     eval/accuracy, eval/auc, eval/log_loss
// It only reads files the job has finished writing (complete checkpoints),
// so it never blocks training; when it falls behind it takes the newest
// checkpoint and skips the ones in between. A checkpoint deleted by the
// job's rotation while it is read is skipped with a note.
#ifndef TESSERA_TOOLS_EVALUATE_CHECKPOINT_EVALUATOR_H_
#define TESSERA_TOOLS_EVALUATE_CHECKPOINT_EVALUATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/tensorboard/event_file_writer.h"
#include "data/example_set.h"
#include "worker/backend/backend.h"

namespace tessera {

struct EvaluatorOptions {
  std::string checkpoint_root;
  std::string run_dir;        // where eval.jsonl and tensorboard/eval go
  std::string data_dir;       // "": the job's data
  int64_t max_examples = -1;  // -1: the job's test set (after its cap)
  int64_t batch = 1024;
  absl::Duration poll = absl::Seconds(2);
  // Give up after this long without a new checkpoint; zero: wait for the
  // job's final checkpoint however long it takes.
  absl::Duration max_idle = absl::ZeroDuration();
  // While no new checkpoint comes, say what it waits for when the wait
  // begins and again this often, so a mistyped folder shows.
  absl::Duration wait_report_every = absl::Minutes(1);
};

// Thread safety: one Run at a time.
class CheckpointEvaluator {
 public:
  // `backend` must outlive the evaluator.
  CheckpointEvaluator(EvaluatorOptions options, Backend* backend);

  // Evaluates checkpoints until the job's final one (its data position past
  // the last epoch) has been evaluated, `stop()` returns true, or max_idle
  // passes with nothing new; each evaluation, and each checkpoint skipped,
  // is also passed to `report` as one line, as is what it waits for while
  // nothing new comes (rate-limited by wait_report_every). Errors:
  // InvalidArgument for an empty checkpoint root, NotFound when the root's
  // parent folder does not exist (no job could write there: a mistyped
  // path), before anything is created; the test set cannot be read, or
  // eval.jsonl or the event file cannot be written.
  absl::Status Run(const std::function<bool()>& stop,
                   const std::function<void(const std::string&)>& report);

  int64_t evaluated() const { return evaluated_; }

 private:
  // Evaluates the checkpoint in `path` at `step`; false (with a reported
  // reason) when it could not be read.
  absl::StatusOr<bool> EvaluateOne(
      const std::string& path, int64_t step, bool* final_checkpoint,
      const std::function<void(const std::string&)>& report);

  const EvaluatorOptions options_;
  Backend* const backend_;
  std::unique_ptr<ExampleSet> examples_;
  std::unique_ptr<EventFileWriter> events_;
  int64_t evaluated_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_TOOLS_EVALUATE_CHECKPOINT_EVALUATOR_H_
