#include "common/progress_line.h"

#include <unistd.h>

#include "absl/strings/str_format.h"

namespace tessera {

ProgressLine::ProgressLine(std::FILE* out, absl::Duration file_every)
    : out_(out), file_every_(file_every), terminal_(isatty(fileno(out)) != 0) {}

void ProgressLine::Update(absl::string_view text) {
  drawn_ = true;
  if (terminal_) {
    // "\033[K" clears what a longer earlier text left at the line's end.
    absl::FPrintF(out_, "\r%s\033[K", text);
    std::fflush(out_);
    return;
  }
  const absl::Time now = absl::Now();
  if (now - last_written_ < file_every_) {
    pending_ = std::string(text);
    return;
  }
  last_written_ = now;
  pending_.clear();
  absl::FPrintF(out_, "%s\n", text);
  std::fflush(out_);
}

void ProgressLine::Finish() {
  if (!drawn_) return;
  drawn_ = false;
  if (terminal_) {
    std::fputc('\n', out_);
  } else if (!pending_.empty()) {
    absl::FPrintF(out_, "%s\n", pending_);
    pending_.clear();
  }
  // The next progress starts its own throttle.
  last_written_ = absl::InfinitePast();
  std::fflush(out_);
}

}  // namespace tessera
