#include "coordinator/step_runner.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/process/fault_point.h"
#include "coordinator/global_steps.h"
#include "coordinator/job_checkpointer.h"
#include "coordinator/step_future.h"

namespace tessera {
namespace {

// How often one round may run again after its worker died (fail_oldest).
constexpr int kMaxRepairsPerRound = 3;

// Waits until `required` of a round's steps are resolved, or one failed,
// woken by the steps themselves instead of polling them. The steps keep
// the count alive: a late step may resolve after the round is over.
class RoundLatch {
 public:
  explicit RoundLatch(const std::vector<StepFuture>& futures)
      : count_(std::make_shared<Count>()) {
    for (const StepFuture& f : futures) {
      f.OnReady([count = count_](const absl::StatusOr<StepResponse>& r) {
        absl::MutexLock lock(&count->mu);
        ++count->ready;
        count->failed |= !r.ok();
      });
    }
  }

  void Wait(int required) {
    Count& c = *count_;
    absl::MutexLock lock(&c.mu);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu) {
      return c.ready >= required || c.failed;
    };
    c.mu.Await(absl::Condition(&done));
  }

 private:
  struct Count {
    absl::Mutex mu;
    int ready ABSL_GUARDED_BY(mu) = 0;
    bool failed ABSL_GUARDED_BY(mu) = false;
  };
  std::shared_ptr<Count> count_;
};

// The meter's training figures, into `result`.
void AddFigures(const ProgressMeter& meter, int64_t correct,
                EpochResult* result) {
  result->steps = meter.steps();
  result->examples = meter.examples();
  result->train_loss = meter.mean_loss();
  result->train_accuracy =
      meter.examples() > 0 ? double(correct) / meter.examples() : 0;
  result->seconds = absl::ToDoubleSeconds(meter.elapsed());
  result->examples_per_second =
      result->examples / std::max(1e-9, result->seconds);
}

// Steps of `steps` from `from` on that hold data (a mirrored round's
// padding is no step of the plan).
int64_t StepsWithData(const std::vector<PlannedStep>& steps, size_t from) {
  int64_t n = 0;
  for (size_t i = from; i < steps.size(); ++i) n += !steps[i].empty();
  return n;
}

}  // namespace

StepRunner::StepRunner(ClusterCoordinator* coordinator,
                       StepRunnerOptions options, JobStatusBoard* board,
                       MetricsWriter* metrics, std::FILE* out)
    : coordinator_(coordinator),
      options_(options),
      board_(board),
      metrics_(metrics),
      out_(out) {
  board_->Update(
      [this](JobStatus* s) { s->set_lockstep(options_.mode.lockstep()); });
}

absl::Status StepRunner::Run(std::vector<PlannedStep> steps, int epoch,
                             const StepPlan& data, const std::string& label,
                             EpochResult* result,
                             const std::function<bool()>& pause,
                             std::vector<PlannedStep>* not_run,
                             const Boundary* boundary) {
  int64_t nonempty = 0;
  for (const PlannedStep& p : steps) nonempty += !p.empty();
  // Lockstep modes count global steps, a step per worker each, as the
  // job's log does.
  ProgressMeter meter(out_, label, nonempty,
                      options_.mode.lockstep() ? options_.num_workers : 1);
  result->epoch = epoch;
  int64_t correct = 0;
  absl::Status s =
      options_.mode.lockstep()
          ? RunLockstep(std::move(steps), epoch, data, pause, not_run, boundary,
                        &meter, result, &correct)
          : RunQueued(std::move(steps), epoch, data, pause, not_run, boundary,
                      &meter, result, &correct);
  if (!s.ok()) return s;
  meter.Finish();
  AddFigures(meter, correct, result);
  return absl::OkStatus();
}

absl::Status StepRunner::RunQueued(std::vector<PlannedStep> steps, int epoch,
                                   const StepPlan& data,
                                   const std::function<bool()>& pause,
                                   std::vector<PlannedStep>* not_run,
                                   const Boundary* boundary,
                                   ProgressMeter* meter, EpochResult* result,
                                   int64_t* correct) {
  // Without a pause every step is queued at once. With one, a few steps per
  // worker are kept queued, enough to keep every worker busy, so that a
  // pause waits only for those.
  const size_t window = pause == nullptr
                            ? steps.size()
                            : static_cast<size_t>(std::max(
                                  4 * options_.num_workers + 4,
                                  2 * std::max(1, options_.steps_per_call) *
                                          options_.num_workers +
                                      4));
  struct Scheduled {
    int64_t step;
    StepFuture future;
  };
  std::deque<Scheduled> in_flight;
  bool failed = false;
  auto finish_oldest = [&] {
    Scheduled oldest = std::move(in_flight.front());
    in_flight.pop_front();
    absl::StatusOr<StepResponse> r = oldest.future.Get();
    if (!r.ok()) {
      failed = true;  // Join reports the job's first error
      return;
    }
    Record(*r, oldest.step, meter, result, correct);
  };
  size_t next = 0;
  for (; next < steps.size() && !failed; ++next) {
    if (pause != nullptr && pause()) break;
    if (boundary != nullptr && boundary->due()) {
      // The cut: every step handed out so far is applied on every server
      // before the checkpoint, and none after it is handed out yet.
      while (!in_flight.empty() && !failed) finish_oldest();
      if (failed) break;
      if (absl::Status s = coordinator_->Join(); !s.ok()) return s;
      EpochResult so_far = *result;
      AddFigures(*meter, *correct, &so_far);
      if (absl::Status s = boundary->take(StepsWithData(steps, next), so_far);
          !s.ok()) {
        return s;
      }
    }
    while (in_flight.size() >= window && !failed) finish_oldest();
    if (failed) break;
    StepRequest request = MakeRequest(epoch, steps[next], data);
    const int64_t id = request.step();
    absl::StatusOr<StepFuture> future =
        coordinator_->Schedule(std::move(request), steps[next].shard);
    if (!future.ok()) return future.status();
    in_flight.push_back({id, *std::move(future)});
    // Every step, or steps done overtake the count shown while a pause
    // keeps the queue short.
    ShowScheduled(epoch);
  }
  ShowScheduled(epoch);  // the epoch, when there was no step
  while (!in_flight.empty() && !failed) finish_oldest();
  if (absl::Status s = coordinator_->Join(); !s.ok()) return s;
  if (not_run != nullptr) {
    not_run->assign(std::make_move_iterator(steps.begin() + next),
                    std::make_move_iterator(steps.end()));
  }
  return absl::OkStatus();
}

// One epoch of lockstep rounds: what is in flight, what is due (a pause,
// a boundary, a new ring) and the repairs made, so that each stage of the
// epoch's loop is a method of its own.
class StepRunner::LockstepEpoch {
 public:
  LockstepEpoch(StepRunner* runner, std::vector<PlannedStep> steps, int epoch,
                const StepPlan& data, const std::function<bool()>& pause,
                const Boundary* boundary, ProgressMeter* meter,
                EpochResult* result, int64_t* correct)
      : runner_(runner),
        epoch_(epoch),
        data_(data),
        pause_(pause),
        boundary_(boundary),
        meter_(meter),
        result_(result),
        correct_(correct),
        // Replicas (mirrored, hybrid) all take part in every all-reduce.
        replicas_(runner->options_.mode.replicates_dense()),
        rounds_(runner->part_queues_.empty()
                    ? GroupIntoGlobalSteps(std::move(steps),
                                           runner->options_.num_workers,
                                           /*pad_missing=*/replicas_)
                    : GroupIntoRounds(
                          std::move(steps),
                          static_cast<int>(runner->part_queues_.size()))),
        // Rounds in flight at once. A server aggregating steps needs the
        // chief's barrier between rounds (sync_steps.h: the next round's
        // pulls must find the last one complete), so sync and hybrid:sync
        // run one round at a time. Replicas whose rows go asynchronously
        // meet in their all-reduce anyway: they get steps_per_call rounds
        // per call and as many again queued, so no worker waits for the
        // chief between steps.
        window_(replicas_ && !runner->options_.mode.aggregates_steps()
                    ? 2 * static_cast<size_t>(
                              std::max(1, runner->options_.steps_per_call))
                    : 1) {}

  // Runs the rounds until the last, a pause or an error; the steps of the
  // rounds not run into *not_run.
  absl::Status Run(std::vector<PlannedStep>* not_run);

 private:
  struct Round {
    size_t index = 0;  // in `rounds_`
    int64_t global_step = 0;
    int required = 0;
    std::vector<int64_t> ids;
    std::vector<StepFuture> futures;
  };

  // Schedules round r_. An error: the round could not be scheduled and no
  // repair can run it again.
  absl::Status ScheduleRound();
  // The oldest round failed: waits for every step in flight, then, with
  // a repair and no part of this or a later round completed anywhere
  // (none of them was applied by any replica), repairs the replicas and
  // rewinds to that round. OK: rewound; else the epoch's error.
  absl::Status FailOldest();
  // Waits for the oldest round and records it (nullopt). OK: the round
  // failed and runs again (FailOldest); an error ends the epoch.
  std::optional<absl::Status> FinishOldest();
  // No round in flight at a due boundary: the late steps recorded, the
  // boundary's work done.
  absl::Status TakeBoundary();
  void RecordStragglers();

  StepRunner* const runner_;
  const int epoch_;
  const StepPlan& data_;
  const std::function<bool()>& pause_;
  const Boundary* const boundary_;
  ProgressMeter* const meter_;
  EpochResult* const result_;
  int64_t* const correct_;
  const bool replicas_;
  std::vector<std::vector<PlannedStep>> rounds_;
  const size_t window_;
  // Steps of earlier rounds still running (backup workers' late steps).
  std::vector<std::pair<int64_t, StepFuture>> stragglers_;
  std::deque<Round> in_flight_;
  size_t r_ = 0;  // the next round to schedule
  bool paused_ = false;
  // A boundary is due: no round is scheduled until those in flight ended.
  bool at_boundary_ = false;
  // The ring's members changed: re-formed once no round is in flight.
  bool at_reform_ = false;
  // After a repair, no boundary before the repaired round ran again.
  size_t boundary_from_ = 0;
  // A round could not be scheduled after an error (Schedule hands the
  // error over): no more are, and the rounds in flight show which failed.
  absl::Status schedule_error_;
  // Repairs per round: a round whose worker dies every time it runs it
  // is not run forever.
  std::map<size_t, int> repairs_;
};

absl::Status StepRunner::LockstepEpoch::Run(std::vector<PlannedStep>* not_run) {
  while (true) {
    if (!paused_ && !at_boundary_ && !at_reform_ && schedule_error_.ok() &&
        r_ < rounds_.size() && in_flight_.size() < window_) {
      if (pause_ != nullptr && pause_()) {
        paused_ = true;
      } else if (replicas_ && runner_->reform_ != nullptr &&
                 runner_->coordinator_->ring_changed()) {
        at_reform_ = true;
      } else if (boundary_ != nullptr && r_ >= boundary_from_ &&
                 boundary_->due()) {
        at_boundary_ = true;
      } else if (absl::Status s = ScheduleRound(); !s.ok()) {
        return s;
      }
      continue;
    }
    if (in_flight_.empty()) {
      if (!schedule_error_.ok()) return schedule_error_;
      if (at_reform_) {
        at_reform_ = false;
        if (absl::Status s = runner_->ReformRing(&rounds_, r_); !s.ok()) {
          return s;
        }
        continue;
      }
      if (at_boundary_) {
        at_boundary_ = false;
        if (absl::Status s = TakeBoundary(); !s.ok()) return s;
        continue;
      }
      break;
    }
    if (std::optional<absl::Status> end = FinishOldest();
        end.has_value() && !end->ok()) {
      return *end;
    }
  }
  if (absl::Status s = runner_->coordinator_->Join(); !s.ok()) return s;
  RecordStragglers();
  if (not_run != nullptr) {
    not_run->clear();
    for (; r_ < rounds_.size(); ++r_) {
      for (PlannedStep& step : rounds_[r_]) not_run->push_back(std::move(step));
    }
  }
  return absl::OkStatus();
}

absl::Status StepRunner::LockstepEpoch::ScheduleRound() {
  const std::vector<PlannedStep>& round = rounds_[r_];
  Round scheduled;
  scheduled.index = r_++;
  scheduled.global_step = runner_->next_global_step_++;
  const int size = static_cast<int>(round.size());
  scheduled.required =
      replicas_ ? size : std::max(1, size - runner_->options_.backup_workers);
  // With backup workers the parts that count are the first to arrive,
  // so only an average over all of them can weigh each example alike.
  int64_t examples = 0;
  for (const PlannedStep& planned : round) examples += planned.size();
  const bool weigh = runner_->options_.mode.aggregates_steps() &&
                     scheduled.required == size && examples > 0;
  for (const PlannedStep& planned : round) {
    const int queue = runner_->part_queues_.empty()
                          ? planned.shard
                          : runner_->part_queues_[scheduled.ids.size()];
    StepRequest request = runner_->MakeRequest(epoch_, planned, data_);
    request.set_sync_step(scheduled.global_step);
    request.set_sync_required(scheduled.required);
    request.set_sync_part(static_cast<int>(scheduled.ids.size()));
    if (weigh && planned.size() * size != examples) {
      request.set_sync_scale(static_cast<float>(
          static_cast<double>(planned.size()) * size / examples));
    }
    scheduled.ids.push_back(request.step());
    absl::StatusOr<StepFuture> future =
        runner_->coordinator_->Schedule(std::move(request), queue);
    if (!future.ok()) {
      schedule_error_ = future.status();
      scheduled.ids.pop_back();
      break;
    }
    scheduled.futures.push_back(*std::move(future));
  }
  // Its parts scheduled before the error fail with the rounds before
  // it, which a repair may run again.
  if (!scheduled.futures.empty()) in_flight_.push_back(std::move(scheduled));
  if (!schedule_error_.ok() && (!replicas_ || runner_->repair_ == nullptr)) {
    return schedule_error_;
  }
  runner_->ShowScheduled(epoch_);
  return absl::OkStatus();
}

absl::Status StepRunner::LockstepEpoch::FailOldest() {
  absl::Status error = runner_->coordinator_->Join();
  if (error.ok()) error = schedule_error_;
  const Round& failed = in_flight_.front();
  if (error.ok()) {
    error = absl::InternalError(absl::StrCat("global step ", failed.global_step,
                                             " failed, but no error came"));
  }
  if (!replicas_ || runner_->repair_ == nullptr) return error;
  int64_t parts = 0;
  for (const Round& round : in_flight_) {
    for (const StepFuture& f : round.futures) {
      if (f.Get().ok()) return error;
    }
    for (const PlannedStep& p : rounds_[round.index]) parts += !p.empty();
  }
  if (++repairs_[failed.index] > kMaxRepairsPerRound) return error;
  if (absl::Status s = runner_->repair_(failed.global_step, error); !s.ok()) {
    std::fprintf(runner_->out_,
                 "global step %lld cannot run again (%s); the job goes "
                 "back to its last checkpoint\n",
                 static_cast<long long>(failed.global_step),
                 std::string(s.message()).c_str());
    std::fflush(runner_->out_);
    // PsRecovery bounds the job's returns to one checkpoint for lost row
    // pushes (hybrid:ssp), so the epoch's error says they were lost.
    if (RowPushesLost(s)) {
      return RowPushesLostError(absl::StrCat(
          s.message(), "; the round failed with: ", error.message()));
    }
    return error;
  }
  runner_->coordinator_->CountRerun(parts);
  // The same step ids (so the same dropout seeds) and global steps: a
  // server holding every part of the failed round, the dead worker's
  // included (it pushed before it died), counts the parts pushed again
  // as duplicates of the same gradients; a new global step would apply
  // that round there and drop it elsewhere (SyncSteps).
  runner_->next_step_ = failed.ids.front();
  runner_->next_global_step_ = failed.global_step;
  r_ = failed.index;
  at_boundary_ = false;
  boundary_from_ = r_ + 1;
  in_flight_.clear();
  schedule_error_ = absl::OkStatus();
  runner_->ShowScheduled(epoch_);
  return absl::OkStatus();
}

std::optional<absl::Status> StepRunner::LockstepEpoch::FinishOldest() {
  // The round is over once `required` steps are: their updates are then
  // applied everywhere, and the next round's pulls see them.
  RoundLatch(in_flight_.front().futures).Wait(in_flight_.front().required);
  for (const StepFuture& f : in_flight_.front().futures) {
    if (f.ready() && !f.Get().ok()) return FailOldest();
  }
  if (runner_->options_.round_done != nullptr) {
    if (absl::Status s =
            runner_->options_.round_done(in_flight_.front().global_step);
        !s.ok()) {
      return s;
    }
  }
  Round round = std::move(in_flight_.front());
  in_flight_.pop_front();
  runner_->board_->Update([&](JobStatus* s) {
    s->set_global_steps_done(
        std::max(s->global_steps_done(), round.global_step + 1));
  });
  std::optional<uint32_t> checksum;
  for (size_t i = 0; i < round.futures.size(); ++i) {
    if (!round.futures[i].ready()) {
      stragglers_.emplace_back(round.ids[i], round.futures[i]);
      continue;
    }
    absl::StatusOr<StepResponse> response = round.futures[i].Get();
    if (!response.ok()) return runner_->coordinator_->Join();
    runner_->Record(*response, round.ids[i], meter_, result_, correct_);
    if (!replicas_) continue;
    if (checksum.has_value() && *checksum != response->replica_checksum()) {
      runner_->coordinator_->Join().IgnoreError();
      return absl::DataLossError(
          absl::StrCat("the workers' replicas differ after global step ",
                       round.global_step, ": parameter checksums ", *checksum,
                       " and ", response->replica_checksum()));
    }
    checksum = response->replica_checksum();
  }
  return std::nullopt;
}

absl::Status StepRunner::LockstepEpoch::TakeBoundary() {
  // Backup workers' late steps end too: a server then holds every round
  // before the boundary whole, and no part of a later one.
  if (absl::Status s = runner_->coordinator_->Join(); !s.ok()) return s;
  RecordStragglers();
  int64_t left = 0;
  for (size_t k = r_; k < rounds_.size(); ++k) {
    left += StepsWithData(rounds_[k], 0);
  }
  EpochResult so_far = *result_;
  AddFigures(*meter_, *correct_, &so_far);
  return boundary_->take(left, so_far);
}

void StepRunner::LockstepEpoch::RecordStragglers() {
  for (auto& [id, future] : stragglers_) {
    absl::StatusOr<StepResponse> response = future.Get();
    if (response.ok()) {
      runner_->Record(*response, id, meter_, result_, correct_);
    }
  }
  stragglers_.clear();
}

absl::Status StepRunner::RunLockstep(std::vector<PlannedStep> steps, int epoch,
                                     const StepPlan& data,
                                     const std::function<bool()>& pause,
                                     std::vector<PlannedStep>* not_run,
                                     const Boundary* boundary,
                                     ProgressMeter* meter, EpochResult* result,
                                     int64_t* correct) {
  LockstepEpoch run(this, std::move(steps), epoch, data, pause, boundary, meter,
                    result, correct);
  return run.Run(not_run);
}

absl::Status StepRunner::ReformRing(
    std::vector<std::vector<PlannedStep>>* rounds, size_t next) {
  if (absl::Status s = coordinator_->Join(); !s.ok()) return s;
  const std::vector<ClusterCoordinator::RingSeat> ring =
      coordinator_->TakeRing();
  if (ring.empty()) {
    return absl::UnavailableError("no worker is left for the all-reduce ring");
  }
  std::vector<int> workers, queues;
  for (const ClusterCoordinator::RingSeat& seat : ring) {
    workers.push_back(seat.worker);
    queues.push_back(seat.queue);
  }
  if (absl::Status s = reform_(workers, next_global_step_); !s.ok()) return s;
  part_queues_ = std::move(queues);
  // The rounds not yet run, one part per member now: the same steps, in
  // the same order, each once.
  std::vector<PlannedStep> left;
  for (size_t k = next; k < rounds->size(); ++k) {
    for (PlannedStep& step : (*rounds)[k]) left.push_back(std::move(step));
  }
  rounds->resize(next);
  for (std::vector<PlannedStep>& round : GroupIntoRounds(
           std::move(left), static_cast<int>(part_queues_.size()))) {
    rounds->push_back(std::move(round));
  }
  return absl::OkStatus();
}

StepRequest StepRunner::MakeRequest(int epoch, const PlannedStep& planned,
                                    const StepPlan& data) {
  StepRequest request;
  request.set_epoch(epoch);
  request.set_step(next_step_++);
  data.Describe(planned, &request);
  return request;
}

void StepRunner::Record(const StepResponse& r, int64_t step,
                        ProgressMeter* meter, EpochResult* result,
                        int64_t* correct) {
  FaultPoint("step");  // tests: a chief lost after a count of steps
  for (int64_t s : r.staleness()) ++result->staleness[s];
  result->late_shards += r.late_shards();
  result->bad_records += r.bad_records();
  result->example_digest += r.example_digest();
  // Counted as it was scheduled, data or not.
  board_->Update([](JobStatus* s) { s->set_steps_done(s->steps_done() + 1); });
  if (r.examples() == 0) return;  // a mirrored replica without data
  double rate = -1;
  if (options_.learning_rates.has_value()) {
    // The counts of the step just recorded: its update's t.
    JobLearningRates::Rates rates;
    board_->Update([&](JobStatus* s) {
      rates = options_.learning_rates->At(
          s->steps_done(), s->global_steps_done() - undone_rounds_);
      s->set_learning_rate(rates.dense);
      if (rates.embedding.has_value()) {
        s->set_embedding_learning_rate(*rates.embedding);
      }
    });
    rate = rates.dense;
    result->learning_rate = rates.dense;
    result->embedding_learning_rate = rates.embedding.value_or(-1);
    meter->SetLearningRate(rates.dense, rates.embedding.value_or(-1));
  }
  meter->Step(r.examples(), r.loss());
  *correct += r.correct();
  if (metrics_ != nullptr) metrics_->RecordStep(step, result->epoch, r, rate);
  board_->Update([&](JobStatus* s) {
    s->set_examples_done(s->examples_done() + r.examples());
    s->set_last_loss(r.loss());
  });
}

void StepRunner::SetPosition(int64_t step, int64_t global_step) {
  next_step_ = step;
  next_global_step_ = global_step;
  // Resumed or rewound to a checkpoint: its steps are done, and both counts
  // go on from there.
  board_->Update([step, global_step](JobStatus* s) {
    s->set_steps_done(step);
    s->set_steps_scheduled(step);
    s->set_global_steps_done(global_step);
  });
}

void StepRunner::ShowScheduled(int epoch) {
  board_->Update([&](JobStatus* s) {
    s->set_epoch(std::min(epoch, options_.epochs));
    s->set_steps_scheduled(next_step_);
  });
}

}  // namespace tessera
