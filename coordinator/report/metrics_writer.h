#ifndef TESSERA_COORDINATOR_REPORT_METRICS_WRITER_H_
#define TESSERA_COORDINATOR_REPORT_METRICS_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/tensorboard/event_file_writer.h"
#include "coordinator/report/epoch_result.h"
#include "proto/worker_service.pb.h"

namespace tessera {

// What a job keeps in its run folder: one line per step (steps.jsonl),
// one per epoch (metrics.jsonl), TensorBoard events (tensorboard/) and the
// charts (accuracy.svg, loss.svg). With no run folder it writes nothing.
//
// A write that fails is never silent: it is said at once on `out` and in
// the log, and kept (write_failures), so that the job can end with an
// error instead of "done" with its output missing.
//
// Thread safety: RecordWriteFailure and write_failures may be called from
// any thread; the rest from the training loop's thread.
class MetricsWriter {
 public:
  // `mode` is the training mode written into every epoch's line.
  MetricsWriter(std::string run_dir, std::string mode, std::FILE* out);

  // Opens steps.jsonl and the TensorBoard writer.
  absl::Status Open();

  // `learning_rate`: the rate of the step's update (< 0: not known).
  void RecordStep(int64_t step, int epoch, const StepResponse& response,
                  double learning_rate = -1);
  // metrics.jsonl and TensorBoard; `best_auc` < 0 is unknown. Removes
  // the pending record (StagePendingEpoch).
  void WriteEpoch(const EpochResult& result, double best_auc);

  // An epoch's line is written once its checkpoint is safe, but a
  // coordinator killed between the checkpoint and the line would lose the
  // record of an epoch that the next coordinator does not train again.
  // So the line is first kept whole in metrics.pending, before the
  // checkpoint; a restarted coordinator resuming after that epoch
  // (RecoverPendingEpoch) appends it to metrics.jsonl if it is not there,
  // and drops it otherwise (the epoch is trained again).
  absl::Status StagePendingEpoch(const EpochResult& result, double best_auc);
  // Returns the epoch recovered, or 0.
  int RecoverPendingEpoch(int resumed_epoch);
  // accuracy.svg and loss.svg over the epochs so far.
  void WriteCharts(const std::vector<EpochResult>& results);

  // Says `what` at once, the first time for each `file` (a full disk
  // fails every later write of it too: those are counted, not repeated).
  void RecordWriteFailure(const std::string& what,
                          const std::string& file = "");
  // The first failure of each file, in order, and how many writes failed.
  std::vector<std::string> write_failures() const;
  int64_t failed_writes() const;

 private:
  // An epoch's TensorBoard scalars and staleness histogram.
  void WriteEpochEvents(const EpochResult& result);
  // The JSON line of metrics.jsonl for `result`.
  std::string EpochLine(const EpochResult& result, double best_auc) const;
  // Appends `line` to metrics.jsonl and makes it durable.
  void AppendEpochLine(const std::string& line);
  // Flushes `out` after a write of `file` and records a failure with
  // errno's reason.
  void CheckWritten(std::ostream& out, const std::string& file);

  const std::string run_dir_;
  const std::string mode_;
  std::FILE* const out_;
  std::ofstream step_log_;
  std::unique_ptr<EventFileWriter> events_;
  mutable absl::Mutex mu_;
  std::vector<std::string> write_failures_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> failed_files_ ABSL_GUARDED_BY(mu_);
  int64_t failed_writes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_REPORT_METRICS_WRITER_H_
