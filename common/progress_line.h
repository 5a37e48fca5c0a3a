// ProgressLine shows a tool's progress (tessera_local_train's epoch,
// tessera_predict's examples) on one stream. On a terminal it redraws one
// line in place with "\r"; into a file or a pipe (a launcher's log, a Slurm
// output file) every update it shows is a plain line of its own, at most
// one per `file_every`, since a "\r" there only piles every redraw into one
// endless line.
//
// Thread safety: one thread. `out` must outlive the ProgressLine.
#ifndef TESSERA_COMMON_PROGRESS_LINE_H_
#define TESSERA_COMMON_PROGRESS_LINE_H_

#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tessera {

class ProgressLine {
 public:
  // Whether `out` is a terminal (isatty) decides how the progress is shown.
  explicit ProgressLine(std::FILE* out,
                        absl::Duration file_every = absl::Seconds(5));

  // Shows `text` (one line, no newline) as the progress now: at once on a
  // terminal; into a file only when `file_every` has passed since the last
  // line written, else it is kept for Finish().
  void Update(absl::string_view text);

  // Ends the progress: the last text not shown yet is written, and the
  // terminal's line is ended. Writes nothing when nothing was updated.
  // Update() may start a new progress afterwards.
  void Finish();

  bool terminal() const { return terminal_; }

 private:
  std::FILE* const out_;
  const absl::Duration file_every_;
  const bool terminal_;
  absl::Time last_written_ = absl::InfinitePast();
  std::string pending_;  // The last text, when a file has not got it yet.
  bool drawn_ = false;   // A terminal line is open, or a text was updated.
};

}  // namespace tessera

#endif  // TESSERA_COMMON_PROGRESS_LINE_H_
