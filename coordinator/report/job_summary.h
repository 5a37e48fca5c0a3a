// What a job prints at the end of each epoch and at its end.

#ifndef TESSERA_COORDINATOR_REPORT_JOB_SUMMARY_H_
#define TESSERA_COORDINATOR_REPORT_JOB_SUMMARY_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/report/epoch_result.h"

namespace tessera {

// A count of steps as every report prints it (docs/operations.md, "Steps
// and global steps"). A step is one batch on one worker, what checkpoint
// names (ckpt-N), metrics.jsonl's "steps" and steps.jsonl count; in the
// lockstep modes (sync, mirrored, hybrid) a global step is one round of a
// step per worker, so a count there says both:
//   "392 worker steps (196 global steps)"; elsewhere "392 steps".
std::string StepCount(int64_t steps, int64_t global_steps, bool lockstep);

// The line (two with an AUC) after an epoch of `epochs`, or after extra
// steps. `best_auc` < 0 is unknown.
void PrintEpochResult(std::FILE* out, const EpochResult& result, int epochs,
                      double best_auc);

struct JobSummary {
  std::vector<EpochResult> results;  // epochs and extra steps, in order
  absl::Duration wall;
  int64_t steps_rerun = 0;
  // The first `resumed_epochs` results were trained by an earlier
  // coordinator of the job (it restarted and resumed from a checkpoint);
  // `wall` is this coordinator's.
  int resumed_epochs = 0;
  double best_auc = -1;  // < 0: unknown
  // Lockstep modes: steps are worker steps, and the summary says so.
  bool lockstep = false;
  // False for a regression (EpochResult::has_accuracy): the table and the
  // final line show the loss (MSE) and no accuracy.
  bool has_accuracy = true;
  // Bytes each parameter server has allocated by its own accounting
  // (values, optimizer slots, table overhead, and growing tables' room
  // reserved for rows not seen yet); -1 for a server that did not answer.
  std::vector<int64_t> server_bytes;
  // Of those, what the rows present take (same order; missing: unknown).
  std::vector<int64_t> server_used_bytes;
};

// The table of every epoch and extra steps, the final figures (those of
// the last row: the model the job leaves), and the servers' memory.
void PrintSummary(std::FILE* out, const JobSummary& summary);

// The best achievable test AUC that tessera_ctr_gen wrote into meta.json
// beside the test file `test_path`, or -1 when there is none.
double ReadBestAuc(const std::string& test_path);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_REPORT_JOB_SUMMARY_H_
