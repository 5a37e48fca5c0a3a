// What one epoch (or one batch of extra steps an operator scheduled) of a
// job did: what the report prints, writes and charts.

#ifndef TESSERA_COORDINATOR_REPORT_EPOCH_RESULT_H_
#define TESSERA_COORDINATOR_REPORT_EPOCH_RESULT_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"

namespace tessera {

struct EpochResult {
  int epoch = 0;
  // Extra steps scheduled with tessera_ctl: "steps 1-100" (the steps
  // counted after the job's epochs); empty for an epoch.
  std::string extra_steps;
  int64_t steps = 0;
  int64_t examples = 0;
  // Regression models (a mean-squared-error loss) have no accuracy: their
  // loss, the MSE, is their figure, and the report prints no accuracy.
  bool has_accuracy = true;
  double train_loss = 0;
  double train_accuracy = 0;
  double test_loss = 0;
  double test_accuracy = 0;
  // Models with one sigmoid output (ctr): exact ROC AUC and log loss over
  // the whole test set; -1 for other models.
  double auc = -1;
  double log_loss = -1;
  double seconds = 0;
  double examples_per_second = 0;
  // Async and ssp: how many updates landed between a push's pull and its
  // own update, counted per pushed shard (staleness -> pushes).
  std::map<int64_t, int64_t> staleness;
  // Sync with backup workers: shard gradients dropped as late.
  int64_t late_shards = 0;
  // Streamed data with skip_bad_records: records skipped, not trained on.
  int64_t bad_records = 0;
  // The digest of the examples trained (common/example_digest.h); unknown
  // for an epoch resumed from a checkpoint written before digests were.
  uint64_t example_digest = 0;
  bool digest_known = true;
  // Steps run again after their worker failed while this epoch trained.
  int64_t steps_rerun = 0;
  // An epoch the operator stopped (tessera_ctl stop): its steps so far,
  // not evaluated; `planned_steps` is the whole epoch's.
  bool stopped = false;
  int64_t planned_steps = 0;
  // The rate of the last update the steps made, of the dense optimizer
  // and of the tables' own one (coordinator/learning_rates.h); -1: not
  // known or, for the tables, none of their own.
  double learning_rate = -1;
  double embedding_learning_rate = -1;
};

// Adds the training figures of `part` (a run of some of an epoch's or
// extra steps' steps) to `total`: steps, examples, the mean loss and
// accuracy weighted by them, seconds, staleness, late and bad counts.
void AddEpochPart(const EpochResult& part, EpochResult* total);

// OK when `result`'s examples are one pass over the training set by
// identity: their digest equals `one_pass`'s (common/example_digest.h).
// Otherwise an Internal error saying so: some example was trained twice
// and another not, or one trained that is not in the set. OK when the
// digest is not known.
absl::Status CheckExampleDigest(const EpochResult& result, uint64_t one_pass);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_REPORT_EPOCH_RESULT_H_
