#include "common/binary_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

constexpr double kLogLossEpsilon = 1e-15;

absl::Status CheckLabels(int64_t n, absl::Span<const float> labels) {
  if (static_cast<int64_t>(labels.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", n, " predictions but ", labels.size(), " labels"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] != 0.0f && labels[i] != 1.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", i, " is ", labels[i], ", expected 0 or 1"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> RocAuc(absl::Span<const float> scores,
                              absl::Span<const float> labels) {
  const int64_t n = static_cast<int64_t>(scores.size());
  if (absl::Status s = CheckLabels(n, labels); !s.ok()) return s;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(scores[i])) {
      return absl::InvalidArgumentError(absl::StrCat("score ", i, " is NaN"));
    }
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  // Sum of the (1-based, tie-averaged) ranks of the positives.
  double positive_rank_sum = 0;
  int64_t positives = 0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    int64_t tied_positives = 0;
    while (j < n && scores[order[j]] == scores[order[i]]) {
      tied_positives += labels[order[j]] == 1.0f;
      ++j;
    }
    // Ranks i + 1 .. j share their average.
    positive_rank_sum += tied_positives * (0.5 * (i + 1 + j));
    positives += tied_positives;
    i = j;
  }
  const int64_t negatives = n - positives;
  if (positives == 0 || negatives == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("AUC is undefined with ", positives, " positive and ",
                     negatives, " negative examples"));
  }
  const double u = positive_rank_sum - 0.5 * positives * (positives + 1.0);
  return u / (static_cast<double>(positives) * negatives);
}

absl::StatusOr<double> LogLoss(absl::Span<const float> probabilities,
                               absl::Span<const float> labels) {
  const int64_t n = static_cast<int64_t>(probabilities.size());
  if (absl::Status s = CheckLabels(n, labels); !s.ok()) return s;
  if (n == 0) return absl::InvalidArgumentError("log loss of no examples");
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float p = probabilities[i];
    if (!(p >= 0.0f && p <= 1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "probability ", i, " is ", p, ", expected a value in [0, 1]"));
    }
    const double q =
        std::clamp<double>(p, kLogLossEpsilon, 1 - kLogLossEpsilon);
    sum -= labels[i] == 1.0f ? std::log(q) : std::log1p(-q);
  }
  return sum / n;
}

}  // namespace tessera
