#ifndef TESSERA_COORDINATOR_TEST_SET_EVALUATOR_H_
#define TESSERA_COORDINATOR_TEST_SET_EVALUATOR_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/report/epoch_result.h"
#include "coordinator/worker_task.h"

namespace tessera {

// Evaluates the model the parameter servers hold on the whole test set:
// every worker takes a slice, in parallel; the slice of a worker that
// failed goes to whichever worker answers (a restarted one is restored
// first) until `recovery_timeout`. The figures do not depend on how many
// workers evaluate: AUC and log loss are computed over every prediction.
//
// Thread safety: one thread.
class TestSetEvaluator {
 public:
  // `workers` must outlive this object.
  TestSetEvaluator(std::vector<WorkerTask*> workers,
                   absl::Duration recovery_timeout);
  // The workers that evaluate are `workers()`'s at each evaluation (an
  // elastic job's active ones); they must outlive this object. The test
  // set is cut into `slices` (> 0) whatever their number, handed out in
  // turn, and summed in slice order: the figures are the same bits
  // however many workers are active or which one stands in for another.
  TestSetEvaluator(std::function<std::vector<WorkerTask*>()> workers,
                   int slices, absl::Duration recovery_timeout);

  // Test examples [0, test_examples): fills *result's test figures.
  absl::Status Evaluate(int64_t test_examples, EpochResult* result);

 private:
  // Evaluates `request` (the slice of worker `owner`, whose own attempt
  // failed with `failure`) elsewhere. A failure of a worker that is up and
  // configured is the job's (bad data), returned as is.
  absl::Status EvaluateElsewhere(const std::vector<WorkerTask*>& workers,
                                 int owner, const EvaluateRequest& request,
                                 absl::Status failure,
                                 EvaluateResponse* response);

  const std::function<std::vector<WorkerTask*>()> workers_;
  const int slices_;  // 0: one per worker
  const absl::Duration recovery_timeout_;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_TEST_SET_EVALUATOR_H_
