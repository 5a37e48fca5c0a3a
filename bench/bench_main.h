#ifndef TESSERA_BENCH_BENCH_MAIN_H_
#define TESSERA_BENCH_BENCH_MAIN_H_

#include <cstdio>
#include <functional>

#include "absl/status/status.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

namespace tessera {

// What a bench's main() does: parse flags, log to stderr, run, and turn an
// error into a message on stderr and exit status 1 (after the table so far
// has been flushed).
inline int BenchMain(int argc, char** argv, const char* name, const char* usage,
                     const std::function<absl::Status()>& run) {
  gflags::SetUsageMessage(usage);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  absl::Status status = run();
  if (!status.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", name, status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace tessera

#endif  // TESSERA_BENCH_BENCH_MAIN_H_
