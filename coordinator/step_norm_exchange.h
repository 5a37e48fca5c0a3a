// Global-norm clipping across the parameter servers in the lockstep modes
// (docs/design.md#gradient-clipping). Once a global step's parts are all
// on every server (not yet applied: sync_steps.h applies a step when the
// next shows up), the coordinator asks every server for its part of each
// group's squared norm, adds them in server order in double (the same sum
// in every run and after any failure, since a step re-run pushes the same
// gradients), and hands every server the global norms; each server then
// applies its part of the step scaled by min(1, clip / norm), as Keras'
// global_clipnorm clips the global batch's gradient.
//
// Thread safety: Exchange from one thread (the training loop's).
#ifndef TESSERA_COORDINATOR_STEP_NORM_EXCHANGE_H_
#define TESSERA_COORDINATOR_STEP_NORM_EXCHANGE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/job.pb.h"
#include "ps_server/client/ps_client.h"

namespace tessera {

// Whether `job` in a mode that aggregates steps on the servers clips some
// optimizer by a global norm: then the servers clip, not the workers.
bool ClipsGlobalNormOnServers(const JobConfig& job, bool aggregates_steps);

class StepNormExchange {
 public:
  // `servers` in task order; each must outlive the exchange.
  explicit StepNormExchange(std::vector<PsClient*> servers)
      : servers_(std::move(servers)) {}

  // The exchange for global step `step`, complete on every server. An
  // error names the server; the step is then applied by no server
  // unclipped only if the job goes back to a checkpoint.
  absl::Status Exchange(int64_t step);

  // The global norms of the last exchange, by group (serialized
  // optimizer): for tests and logs.
  const std::map<std::string, double>& last_norms() const {
    return last_norms_;
  }

 private:
  const std::vector<PsClient*> servers_;
  std::map<std::string, double> last_norms_;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_STEP_NORM_EXCHANGE_H_
