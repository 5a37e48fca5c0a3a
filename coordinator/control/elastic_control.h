#ifndef TESSERA_COORDINATOR_CONTROL_ELASTIC_CONTROL_H_
#define TESSERA_COORDINATOR_CONTROL_ELASTIC_CONTROL_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/coordinator_service.pb.h"

namespace tessera {

// What the Coordinator service asks of a job whose workers come and go
// (TrainingJob implements it): a worker joins, a worker drains. Errors
// name what is wrong (a mode that cannot change its workers, an unknown
// worker, the floor of --min_workers) and go back to the caller as is.
//
// Thread safety: implementations must allow calls from any thread.
class ElasticControl {
 public:
  virtual ~ElasticControl() = default;
  // A worker serving at `address` joins the job: it gets its index and
  // the cluster at once, and steps from the next step boundary on, once
  // the job has configured it.
  virtual absl::StatusOr<AddWorkerResponse> AddWorker(
      const std::string& address) = 0;
  // `worker` (an index, or an address HOST:PORT) finishes the steps it
  // holds and leaves; returns its index.
  virtual absl::StatusOr<int> DrainWorker(const std::string& worker) = 0;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_CONTROL_ELASTIC_CONTROL_H_
