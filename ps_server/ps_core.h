#ifndef TESSERA_PS_SERVER_PS_CORE_H_
#define TESSERA_PS_SERVER_PS_CORE_H_

#include <atomic>
#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/process/fault_point.h"
#include "ps_server/shard_store.h"
#include "ps_server/sync_steps.h"

namespace tessera {

// What a parameter server's front ends share: the gRPC service
// (ps_service.h) and every other transport's server (the TCP data plane,
// data_plane/dense_plane_server.h) serve the same shards, apply sync mode's
// steps in one place, count their calls together for Health's load, and
// the data plane announces its port here for Health to report. A new
// transport's server is given the core, never another front end.
//
// Thread safety: all methods may be called concurrently.
class PsCore {
 public:
  // `store` must outlive the core.
  explicit PsCore(ShardStore* store) : store_(store) {}
  PsCore(const PsCore&) = delete;
  PsCore& operator=(const PsCore&) = delete;

  ShardStore* store() const { return store_; }
  SyncSteps* sync_steps() { return &sync_steps_; }

  // Calls taken, dense and row ones together, on every transport.
  void CountPull() { pulls_.fetch_add(1, std::memory_order_relaxed); }
  void CountPush() {
    pushes_.fetch_add(1, std::memory_order_relaxed);
    FaultPoint("push");  // tests: a server lost after a count of pushes
  }
  int64_t pulls() const { return pulls_.load(std::memory_order_relaxed); }
  int64_t pushes() const { return pushes_.load(std::memory_order_relaxed); }

  // The TCP data plane's port, announced in Health (0: none, e.g. a TLS
  // job).
  void set_data_plane_port(int port) {
    data_plane_port_.store(port, std::memory_order_relaxed);
  }
  int data_plane_port() const {
    return data_plane_port_.load(std::memory_order_relaxed);
  }

  absl::Duration uptime() const { return absl::Now() - start_; }

 private:
  ShardStore* const store_;
  SyncSteps sync_steps_;  // sync mode's pending steps
  std::atomic<int64_t> pulls_{0};
  std::atomic<int64_t> pushes_{0};
  std::atomic<int> data_plane_port_{0};
  const absl::Time start_ = absl::Now();
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_PS_CORE_H_
