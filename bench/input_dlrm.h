// bench_input's job-level line: the DLRM job's worker step rate with its
// examples already in memory against the same job reading them from a
// TFRecord stream, on the CPU backend.
//
// Both runs train the same examples in the same batches and order: the
// stream's order (StreamReader, the job's shuffle buffer and read-ahead,
// one file) is computed without reading (StreamOrder), and the in-memory
// run gathers exactly those examples from the loaded Criteo set. A step
// is the worker's from its batch on (LocalTrainer::TrainBatch: pull from
// in-process shards, forward, backward, apply), so the reader's share is
// larger here than behind a network, where steps are slower.

#ifndef TESSERA_BENCH_INPUT_DLRM_H_
#define TESSERA_BENCH_INPUT_DLRM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace tessera {

struct DlrmReaderCostOptions {
  std::string job_file = "deploy/jobs/dlrm.textproto";
  std::string dir = "/tmp";  // scratch files go to <dir>/bench_input_dlrm
  int64_t examples = 40000;  // per run
  int rounds = 5;            // runs of each kind, alternated
};

// Generates the examples (tessera_ctr_gen's generator, 20000 ids a
// field), writes them as TFRecord, times the runs and prints both rates
// (median and best run), the CPU time per example and the reader's cost. An
// error when a run fails or when the two runs' losses differ (then the batches
// were not the same).
absl::Status RunDlrmReaderCost(const DlrmReaderCostOptions& options);

}  // namespace tessera

#endif  // TESSERA_BENCH_INPUT_DLRM_H_
