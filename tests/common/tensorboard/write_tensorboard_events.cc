// Writes the event file that tests/common/tensorboard/tensorboard_check.py
// reads with TensorBoard's own reader: scalars "loss" and "accuracy" at steps
// 0..9, a staleness histogram from counts at every step, and a histogram of
// values at step 9. The expected numbers are repeated in the script.
//
// Usage: write_tensorboard_events <folder>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "common/tensorboard/event_file_writer.h"
#include "common/tensorboard/summary_histogram.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <folder>\n", argv[0]);
    return 2;
  }
  auto writer = tessera::EventFileWriter::Create(argv[1]);
  if (!writer.ok()) {
    std::fprintf(stderr, "%s\n", writer.status().ToString().c_str());
    return 1;
  }
  for (int64_t step = 0; step < 10; ++step) {
    absl::Status s = (*writer)->AddScalar("loss", step, 1.0f / (step + 1));
    if (s.ok()) s = (*writer)->AddScalar("accuracy", step, 0.1f * step);
    auto staleness = tessera::HistogramOfCounts({step, 1, 0, 2});
    if (s.ok()) s = staleness.status();
    if (s.ok()) s = (*writer)->AddHistogram("staleness", step, *staleness);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::vector<double> values;
  for (int i = 0; i < 100; ++i) values.push_back(0.5 * i);
  absl::Status s = (*writer)->AddHistogram("weights", 9, values);
  if (s.ok()) s = (*writer)->Flush();
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("%s\n", (*writer)->path().c_str());
  return 0;
}
