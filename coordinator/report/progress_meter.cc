#include "coordinator/report/progress_meter.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace tessera {

ProgressMeter::ProgressMeter(std::FILE* out, std::string label,
                             int64_t total_steps, int per_shown)
    : out_(out),
      label_(std::move(label)),
      total_(total_steps),
      per_shown_(std::max(1, per_shown)),
      tty_(isatty(fileno(out)) != 0) {}

void ProgressMeter::Step(int64_t examples, double loss) {
  ++steps_;
  examples_ += examples;
  loss_sum_ += loss;
  recent_loss_ = steps_ == 1 ? loss : 0.98 * recent_loss_ + 0.02 * loss;
  const absl::Duration every =
      tty_ ? absl::Milliseconds(200) : absl::Seconds(5);
  if (absl::Now() - last_draw_ >= every) Draw(false);
}

void ProgressMeter::Finish() { Draw(true); }

std::string ProgressMeter::FormatEta(absl::Duration d) {
  if (d < absl::ZeroDuration() || d == absl::InfiniteDuration()) return "--:--";
  const int64_t s = absl::ToInt64Seconds(d);
  if (s >= 3600) {
    return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  }
  return absl::StrFormat("%02d:%02d", s / 60, s % 60);
}

void ProgressMeter::Draw(bool final) {
  last_draw_ = absl::Now();
  const double secs = std::max(1e-9, absl::ToDoubleSeconds(elapsed()));
  const double steps_per_s = steps_ / secs;
  const double fraction = total_ > 0 ? double(steps_) / total_ : 1.0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(std::round(fraction * kWidth));
  std::string bar(filled, '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  const absl::Duration eta =
      steps_per_s > 0 ? absl::Seconds((total_ - steps_) / steps_per_s)
                      : absl::InfiniteDuration();
  const int64_t shown_total = (total_ + per_shown_ - 1) / per_shown_;
  const int64_t shown_steps =
      final ? (steps_ + per_shown_ - 1) / per_shown_ : steps_ / per_shown_;
  std::string rate;
  if (learning_rate_ >= 0) {
    rate = absl::StrFormat("  lr %.4g", learning_rate_);
    if (embedding_learning_rate_ >= 0) {
      absl::StrAppendFormat(&rate, "/%.4g", embedding_learning_rate_);
    }
  }
  const std::string line = absl::StrFormat(
      "%s [%s] %d/%d %ssteps  %.0f steps/s  %.0f ex/s  loss %.4f%s  %s %s",
      label_, bar, shown_steps, shown_total, per_shown_ > 1 ? "global " : "",
      steps_per_s / per_shown_, examples_ / secs, recent_loss_, rate,
      final ? "took" : "ETA", FormatEta(final ? elapsed() : eta));
  if (tty_) {
    absl::FPrintF(out_, "\r%s\033[K%s", line, final ? "\n" : "");
  } else {
    absl::FPrintF(out_, "%s\n", line);
  }
  std::fflush(out_);
}

}  // namespace tessera
