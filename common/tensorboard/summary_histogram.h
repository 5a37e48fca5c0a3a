#ifndef TESSERA_COMMON_SUMMARY_HISTOGRAM_H_
#define TESSERA_COMMON_SUMMARY_HISTOGRAM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/tensorboard.pb.h"

namespace tessera {

// Builders of TensorBoard histograms (tensorboard::HistogramProto: bucket i
// counts the values v with bucket_limit[i - 1] < v <= bucket_limit[i]).

// `num_buckets` equal-width buckets over [min, max] of `values` (one bucket
// when all values are equal; TensorBoard re-buckets for display). No values
// give num == 0 and one empty bucket at 0. InvalidArgument when a value is
// not finite or num_buckets < 1.
absl::StatusOr<tensorboard::HistogramProto> HistogramOfValues(
    absl::Span<const double> values, int num_buckets = 30);

// A histogram of small non-negative integers given as counts: counts[i]
// values were equal to i (a staleness histogram: counts[s] gradients were
// s versions stale). Bucket i has limit i. InvalidArgument when a count is
// negative.
absl::StatusOr<tensorboard::HistogramProto> HistogramOfCounts(
    absl::Span<const int64_t> counts);

// OK when `histogram` is well formed: as many limits as buckets (at least
// one), limits strictly increasing, counts finite and >= 0, min <= max
// unless num == 0.
absl::Status ValidateHistogram(const tensorboard::HistogramProto& histogram);

}  // namespace tessera

#endif  // TESSERA_COMMON_SUMMARY_HISTOGRAM_H_
