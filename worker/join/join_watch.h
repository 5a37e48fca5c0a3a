#ifndef TESSERA_WORKER_JOIN_JOIN_WATCH_H_
#define TESSERA_WORKER_JOIN_JOIN_WATCH_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "worker/join/join_job.h"

namespace tessera {

// For a worker that joined a running job (JoinRunningJob): asks the
// job's coordinator every `interval` whether it still counts this worker
// (GetJobStatus lists its address as joining, active, draining or down),
// and calls `gone` once, with why, when it does not (a coordinator that
// restarted from its cluster spec knows only the workers there; a worker
// that never became ready was removed) or has not answered for
// options.timeout. A worker of the cluster spec needs no watch: its
// launcher and its coordinator know it.
//
// Thread safety: the watch runs on a thread of its own until destroyed.
class JoinWatch {
 public:
  JoinWatch(JoinOptions options, absl::Duration interval,
            std::function<void(const std::string& why)> gone);
  ~JoinWatch();
  JoinWatch(const JoinWatch&) = delete;
  JoinWatch& operator=(const JoinWatch&) = delete;

 private:
  void Loop();

  const JoinOptions options_;
  const absl::Duration interval_;
  const std::function<void(const std::string&)> gone_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_JOIN_JOIN_WATCH_H_
