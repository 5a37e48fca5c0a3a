// tessera_ctl status as text: what a person reads of a JobStatus.

#ifndef TESSERA_COORDINATOR_CONTROL_STATUS_TEXT_H_
#define TESSERA_COORDINATOR_CONTROL_STATUS_TEXT_H_

#include <string>

#include "proto/coordinator_service.pb.h"

namespace tessera {

// The job's state, counts and last figures, then a line per worker and per
// parameter server. A figure not measured yet (the loss before the first
// step, the test accuracy before the first evaluation) reads "none yet",
// never 0.0000.
std::string FormatJobStatus(const JobStatus& status);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_CONTROL_STATUS_TEXT_H_
