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
  // Bytes each parameter server holds by its own accounting (values,
  // optimizer slots, table overhead); -1 for a server that did not answer.
  std::vector<int64_t> server_bytes;
};

// The table of every epoch and extra steps, the final figures (those of
// the last row: the model the job leaves), and the servers' memory.
void PrintSummary(std::FILE* out, const JobSummary& summary);

// The best achievable test AUC that tessera_ctr_gen wrote into meta.json
// beside the test file `test_path`, or -1 when there is none.
double ReadBestAuc(const std::string& test_path);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_REPORT_JOB_SUMMARY_H_
