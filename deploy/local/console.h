// The launcher's two voices: progress on stdout, problems on stderr. The
// launcher's threads (the signal watcher, the coordinator echo, the main
// loop) write whole messages through stdio, whose per-FILE lock keeps their
// lines from interleaving.
#ifndef TESSERA_DEPLOY_LOCAL_CONSOLE_H_
#define TESSERA_DEPLOY_LOCAL_CONSOLE_H_

#include <cstdio>

#include "absl/strings/str_format.h"

namespace tessera {

template <typename... Args>
void Say(const absl::FormatSpec<Args...>& format, const Args&... args) {
  absl::FPrintF(stdout, format, args...);
  std::fflush(stdout);
}

// Flushes stdout first, so a problem follows the progress it interrupts.
template <typename... Args>
void Complain(const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::fflush(stdout);
  absl::FPrintF(stderr, format, args...);
  std::fflush(stderr);
}

}  // namespace tessera

#endif  // TESSERA_DEPLOY_LOCAL_CONSOLE_H_
