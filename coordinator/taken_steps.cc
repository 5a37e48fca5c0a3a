#include "coordinator/taken_steps.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {

absl::Status RunTakenSteps(
    int worker, WorkerStub* remote, const std::vector<QueuedStep>& taken,
    StepsRequest* request,
    const std::function<void(size_t, StepResponse)>& done, size_t* finished) {
  if (taken.size() == 1) {
    StepResponse response;
    absl::Status status = remote->RunStep(taken[0].request, &response);
    if (status.ok()) {
      done(0, std::move(response));
      *finished = 1;
    }
    return status;
  }
  request->clear_steps();
  for (const QueuedStep& p : taken) *request->add_steps() = p.request;
  absl::Status status =
      remote->RunSteps(*request, [&](int i, StepResponse response) {
        // Only in order, and only each step once.
        if (static_cast<size_t>(i) == *finished && *finished < taken.size()) {
          done(*finished, std::move(response));
          *finished += 1;
        }
      });
  if (status.ok() && *finished != taken.size()) {
    status = absl::InternalError(absl::StrCat("worker ", worker, " finished ",
                                              *finished, " of ", taken.size(),
                                              " steps and reported no error"));
  }
  return status;
}

}  // namespace tessera
