#include "coordinator/worker_comeback.h"

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/rpc/backoff.h"
#include "glog/logging.h"

namespace tessera {

Comeback AwaitComeback(int worker, WorkerStub* remote, absl::Time deadline,
                       const std::function<bool()>& give_up) {
  Backoff backoff;
  while (absl::Now() < deadline) {
    if (give_up()) return Comeback::kGaveUp;
    const WorkerHealth health = remote->Probe();
    if (health != WorkerHealth::kDown) {
      absl::Status restored = health == WorkerHealth::kLostState
                                  ? remote->Restore()
                                  : absl::OkStatus();
      if (restored.ok()) return Comeback::kBack;
      LOG(WARNING) << "worker " << worker << " answers but cannot be "
                   << "restored yet: " << restored;
    }
    absl::SleepFor(backoff.Next());
  }
  return Comeback::kTimedOut;
}

}  // namespace tessera
