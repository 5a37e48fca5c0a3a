#ifndef TESSERA_COORDINATOR_REPORT_PROGRESS_METER_H_
#define TESSERA_COORDINATOR_REPORT_PROGRESS_METER_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tessera {

// Shows the progress of an epoch: steps done of total, steps/s,
// examples/s, a running loss and the time left. On a terminal it redraws
// one line; into a file (the launcher's logs) it writes a line every few
// seconds, so logs stay readable.
//
// Thread safety: one thread.
class ProgressMeter {
 public:
  // `per_shown` workers' steps make one step shown: in sync and mirrored
  // modes a global step is one step per worker, and the line counts global
  // steps as the job's log does.
  ProgressMeter(std::FILE* out, std::string label, int64_t total_steps,
                int per_shown = 1);

  // Records one finished step of `examples` examples and its loss.
  void Step(int64_t examples, double loss);
  // The rate of the latest update, shown on the line as "lr 0.001"
  // (with the tables' own rate, when they have one, as "lr 0.001/0.05").
  void SetLearningRate(double dense, double embedding = -1) {
    learning_rate_ = dense;
    embedding_learning_rate_ = embedding;
  }
  // Draws the final state of the epoch and ends the line.
  void Finish();

  int64_t steps() const { return steps_; }
  int64_t examples() const { return examples_; }
  double mean_loss() const { return steps_ > 0 ? loss_sum_ / steps_ : 0; }
  absl::Duration elapsed() const { return absl::Now() - start_; }

  // "1:02:03", "02:03" or "--:--" for durations.
  static std::string FormatEta(absl::Duration d);

 private:
  void Draw(bool final);

  std::FILE* const out_;
  const std::string label_;
  const int64_t total_;
  const int per_shown_;
  const bool tty_;
  const absl::Time start_ = absl::Now();
  absl::Time last_draw_ = absl::InfinitePast();
  int64_t steps_ = 0;
  int64_t examples_ = 0;
  double loss_sum_ = 0;
  double recent_loss_ = 0;     // exponential moving average
  double learning_rate_ = -1;  // < 0: not shown
  double embedding_learning_rate_ = -1;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_REPORT_PROGRESS_METER_H_
