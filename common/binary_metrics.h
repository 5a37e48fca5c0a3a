// Metrics of a binary classifier that outputs probabilities: ROC AUC and
// log loss, as scikit-learn's roc_auc_score and log_loss compute them.
//
// Contract:
//  - `labels` are 0 or 1 and have one entry per score; anything else is
//    InvalidArgument naming the first bad index.
//  - Both functions are exact over the whole set (no binning), so AUC is
//    O(n log n) and needs every score at once.
//  - Thread safety: pure functions.

#ifndef TESSERA_COMMON_BINARY_METRICS_H_
#define TESSERA_COMMON_BINARY_METRICS_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tessera {

// The area under the ROC curve of `scores` (any order-preserving scale: a
// probability or a logit) against `labels`: the probability that a random
// positive scores above a random negative, a tie counting one half (the
// average-rank form of the Mann-Whitney U statistic). FailedPrecondition
// when the labels are all one class (AUC is undefined); InvalidArgument for
// a NaN score.
absl::StatusOr<double> RocAuc(absl::Span<const float> scores,
                              absl::Span<const float> labels);

// The mean binary cross-entropy, -(y log p + (1 - y) log(1 - p)), with p
// clipped to [1e-15, 1 - 1e-15] as scikit-learn does, so a confident wrong
// prediction costs about 34.5 rather than infinity. Probabilities must be in
// [0, 1] and there must be at least one.
absl::StatusOr<double> LogLoss(absl::Span<const float> probabilities,
                               absl::Span<const float> labels);

}  // namespace tessera

#endif  // TESSERA_COMMON_BINARY_METRICS_H_
