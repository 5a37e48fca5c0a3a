#include "common/tensorboard/summary_histogram.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {

absl::StatusOr<tensorboard::HistogramProto> HistogramOfValues(
    absl::Span<const double> values, int num_buckets) {
  if (num_buckets < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "histogram: num_buckets is ", num_buckets, ", must be at least 1"));
  }
  tensorboard::HistogramProto h;
  if (values.empty()) {
    h.add_bucket_limit(0);
    h.add_bucket(0);
    return h;
  }
  double lo = values[0], hi = values[0], sum = 0, sum_squares = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram: value ", i, " is ", v));
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    sum_squares += v * v;
  }
  h.set_min(lo);
  h.set_max(hi);
  h.set_num(static_cast<double>(values.size()));
  h.set_sum(sum);
  h.set_sum_squares(sum_squares);
  const int k = lo == hi ? 1 : num_buckets;
  const double width = (hi - lo) / k;
  for (int i = 0; i < k; ++i) {
    // The last limit is exactly the maximum, whatever the rounding.
    h.add_bucket_limit(i + 1 == k ? hi : lo + width * (i + 1));
    h.add_bucket(0);
  }
  for (const double v : values) {
    int index = 0;
    if (v > lo) {
      index = static_cast<int>(std::ceil((v - lo) / width)) - 1;
      index = std::clamp(index, 0, k - 1);
      // Rounding can put a value just past its bucket's limit.
      while (index + 1 < k && v > h.bucket_limit(index)) ++index;
      while (index > 0 && v <= h.bucket_limit(index - 1)) --index;
    }
    h.set_bucket(index, h.bucket(index) + 1);
  }
  return h;
}

absl::StatusOr<tensorboard::HistogramProto> HistogramOfCounts(
    absl::Span<const int64_t> counts) {
  tensorboard::HistogramProto h;
  bool seen = false;
  double num = 0, sum = 0, sum_squares = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram: count of ", i, " is ", counts[i]));
    }
    const double value = static_cast<double>(i);
    const double c = static_cast<double>(counts[i]);
    h.add_bucket_limit(value);
    h.add_bucket(c);
    if (counts[i] == 0) continue;
    if (!seen) h.set_min(value);
    seen = true;
    h.set_max(value);
    num += c;
    sum += c * value;
    sum_squares += c * value * value;
  }
  if (counts.empty()) {
    h.add_bucket_limit(0);
    h.add_bucket(0);
  }
  h.set_num(num);
  h.set_sum(sum);
  h.set_sum_squares(sum_squares);
  return h;
}

absl::Status ValidateHistogram(const tensorboard::HistogramProto& h) {
  if (h.bucket_limit_size() == 0 || h.bucket_limit_size() != h.bucket_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "histogram: ", h.bucket_limit_size(), " bucket limits and ",
        h.bucket_size(), " buckets; need the same number, >= 1"));
  }
  for (int i = 0; i < h.bucket_size(); ++i) {
    if (!std::isfinite(h.bucket(i)) || h.bucket(i) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram: bucket ", i, " counts ", h.bucket(i)));
    }
    if (std::isnan(h.bucket_limit(i)) ||
        (i > 0 && !(h.bucket_limit(i) > h.bucket_limit(i - 1)))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram: bucket limits must increase strictly; limit ", i, " is ",
          h.bucket_limit(i)));
    }
  }
  if (h.num() > 0 && !(h.min() <= h.max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("histogram: min ", h.min(), " is above max ", h.max()));
  }
  return absl::OkStatus();
}

}  // namespace tessera
