#include "coordinator/test_set_evaluator.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/binary_metrics.h"
#include "common/rpc/backoff.h"
#include "glog/logging.h"

namespace tessera {

TestSetEvaluator::TestSetEvaluator(std::vector<WorkerTask*> workers,
                                   absl::Duration recovery_timeout)
    : workers_([workers = std::move(workers)] { return workers; }),
      slices_(0),
      recovery_timeout_(recovery_timeout) {}

TestSetEvaluator::TestSetEvaluator(
    std::function<std::vector<WorkerTask*>()> workers, int slices,
    absl::Duration recovery_timeout)
    : workers_(std::move(workers)),
      slices_(slices),
      recovery_timeout_(recovery_timeout) {}

absl::Status TestSetEvaluator::Evaluate(int64_t test_examples,
                                        EpochResult* result) {
  const std::vector<WorkerTask*> workers = workers_();
  if (workers.empty()) {
    return absl::UnavailableError(
        "no active worker is left to evaluate the test set");
  }
  // A fixed cut, summed in slice order: a different number of slices
  // would sum the same losses in another order, to other last bits.
  const int n = slices_ > 0 ? slices_ : static_cast<int>(workers.size());
  const int active = static_cast<int>(workers.size());
  auto slice = [&](int s) {
    EvaluateRequest request;
    request.set_begin(test_examples * s / n);
    request.set_end(test_examples * (s + 1) / n);
    return request;
  };
  std::vector<EvaluateResponse> responses(n);
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int s = 0; s < n; ++s) {
    threads.emplace_back([&, s] {
      statuses[s] = workers[s % active]->Evaluate(slice(s), &responses[s]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int s = 0; s < n; ++s) {
    if (statuses[s].ok()) continue;
    statuses[s] = EvaluateElsewhere(workers, s % active, slice(s), statuses[s],
                                    &responses[s]);
  }
  int64_t examples = 0, correct = 0;
  double loss = 0;
  std::vector<float> probabilities, labels;
  for (int w = 0; w < n; ++w) {
    if (!statuses[w].ok()) return statuses[w];
    examples += responses[w].examples();
    correct += responses[w].correct();
    loss += responses[w].loss_sum();
    probabilities.insert(probabilities.end(),
                         responses[w].probabilities().begin(),
                         responses[w].probabilities().end());
    labels.insert(labels.end(), responses[w].labels().begin(),
                  responses[w].labels().end());
  }
  result->test_accuracy = examples > 0 ? double(correct) / examples : 0;
  result->test_loss = examples > 0 ? loss / examples : 0;
  if (!probabilities.empty()) {
    // Exact over the whole test set: every prediction, sorted once.
    absl::StatusOr<double> auc = RocAuc(probabilities, labels);
    if (!auc.ok()) return auc.status();
    absl::StatusOr<double> log_loss = LogLoss(probabilities, labels);
    if (!log_loss.ok()) return log_loss.status();
    result->auc = *auc;
    result->log_loss = *log_loss;
  }
  return absl::OkStatus();
}

namespace {

// A worker answers Evaluate with FAILED_PRECONDITION only when it has no
// configuration: it was restarted and not yet restored. Once restored (by
// the step recovery or below) it can evaluate, so that answer is never a
// final one, even from a worker that is ready by the time it is probed.
bool LostState(const absl::Status& s) { return absl::IsFailedPrecondition(s); }

// A slice whose worker died (or did not answer in time) is evaluated
// elsewhere even when that worker is back and ready by the time it is
// probed: the launcher restarts it within moments, and the step recovery
// restores it.
bool MayPass(const absl::Status& s) { return LostState(s) || IsTransient(s); }

}  // namespace

absl::Status TestSetEvaluator::EvaluateElsewhere(
    const std::vector<WorkerTask*>& workers, int owner,
    const EvaluateRequest& request, absl::Status failure,
    EvaluateResponse* response) {
  const int n = static_cast<int>(workers.size());
  if (!MayPass(failure) && workers[owner]->Probe() == WorkerHealth::kReady) {
    return failure;
  }
  LOG(WARNING) << "worker " << owner << " failed evaluating test examples ["
               << request.begin() << ", " << request.end() << ") (" << failure
               << "); trying the other workers";
  const absl::Time deadline = absl::Now() + recovery_timeout_;
  Backoff backoff;
  while (true) {
    for (int i = 0; i < n; ++i) {
      const int w = (owner + 1 + i) % n;  // the others first
      WorkerTask* worker = workers[w];
      const WorkerHealth health = worker->Probe();
      if (health == WorkerHealth::kDown) continue;
      if (health == WorkerHealth::kLostState && !worker->Restore().ok()) {
        continue;
      }
      response->Clear();
      absl::Status s = worker->Evaluate(request, response);
      if (s.ok()) {
        LOG(INFO) << "test examples [" << request.begin() << ", "
                  << request.end() << ") evaluated by worker " << w;
        return s;
      }
      if (!MayPass(s) && worker->Probe() == WorkerHealth::kReady) return s;
      failure = s;
    }
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "no worker could evaluate test examples [", request.begin(), ", ",
          request.end(), ") within ", absl::FormatDuration(recovery_timeout_),
          ": ", failure.message()));
    }
    absl::SleepFor(backoff.Next());
  }
}

}  // namespace tessera
