#include "coordinator/training_job.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/model/model_presets.h"
#include "common/model/table_placement.h"
#include "common/model/variable_optimizer.h"
#include "common/process/fault_point.h"
#include "common/rpc/backoff.h"
#include "coordinator/job_config.h"
#include "coordinator/learning_rates.h"
#include "coordinator/parallel/bounded_for_each.h"
#include "coordinator/report/job_summary.h"
#include "glog/logging.h"

namespace tessera {

TrainingJob::TrainingJob(JobCluster cluster, JobConfig job, VariablePlan plan,
                         TrainingJobOptions options)
    : job_(std::move(job)),
      plan_(std::move(plan)),
      options_(std::move(options)),
      out_(options_.out),
      ps_(std::move(cluster.ps)) {
  const int num_workers = static_cast<int>(cluster.workers.size());
  ResolveMode(num_workers);
  metrics_ =
      std::make_unique<MetricsWriter>(options_.run_dir, mode_.ToString(), out_);
  std::vector<std::unique_ptr<WorkerStub>> owned;
  for (std::unique_ptr<WorkerTask>& w : cluster.workers) {
    workers_.push_back(w.get());
    owned.push_back(std::move(w));
  }
  coordinator_ = std::make_unique<ClusterCoordinator>(std::move(owned),
                                                      SchedulerOptions());
  // No step is scheduled yet, so no news comes before the membership is.
  membership_ = std::make_unique<Membership>(workers_, coordinator_.get(),
                                             options_.coordinator.min_workers);
  ElasticJoinsOptions joins;
  joins.mode = mode_;
  joins.connect_worker = options_.connect_worker;
  joins.cluster_jobs = options_.cluster_jobs;
  joins.cluster_wait = options_.cluster_wait;
  // The newcomer's replica is copied through the checkpoint folder.
  joins.reforms_ring =
      mode_.replicates_dense() && !options_.checkpoint_dir.empty();
  joins_ = std::make_unique<ElasticJoins>(
      membership_.get(),
      [this](int index, int queue) { return setup_->JoinConfig(index, queue); },
      out_, std::move(joins));
  std::vector<PsClient*> clients;
  for (auto& p : ps_) clients.push_back(p.get());
  health_ = std::make_unique<ClusterHealth>(clients, workers_, out_,
                                            options_.startup_concurrency);
  MakeCheckpoints(clients);
  JobSetupOptions setup;
  setup.startup_concurrency = options_.startup_concurrency;
  setup.ps_recovery_timeout = options_.ps_recovery_timeout;
  setup.worker_recovery_timeout = options_.coordinator.worker_recovery_timeout;
  setup.prefetch_parameters = options_.prefetch_parameters;
  setup_ = std::make_unique<JobSetup>(job_, plan_, served_, replicated_, mode_,
                                      clients, workers_, health_.get(),
                                      checkpointer_.get(), out_, setup);
  MakeRunner(num_workers);
  // The workers active when an evaluation starts share the test set.
  evaluator_ = std::make_unique<TestSetEvaluator>(
      [this] {
        std::vector<WorkerTask*> active = membership_->Active();
        if (replica_checkpoints_ == nullptr) return active;
        // A worker that joined a mirrored job holds the members' replica
        // only once the ring has it.
        const std::vector<WorkerTask*>& ring = replica_checkpoints_->members();
        active.erase(std::remove_if(active.begin(), active.end(),
                                    [&](WorkerTask* w) {
                                      return std::find(ring.begin(), ring.end(),
                                                       w) == ring.end();
                                    }),
                     active.end());
        return active;
      },
      static_cast<int>(workers_.size()),
      options_.coordinator.worker_recovery_timeout);
  MakeEpochLoop();
  MakeOperatorCommands();
  board_.Update([&](JobStatus* s) {
    s->set_epochs(job_.schedule().epochs());
    for (TableMemory& t :
         TableMemoryOf(served_, job_, static_cast<int>(ps_.size()))) {
      *s->add_tables() = std::move(t);
    }
  });
}

void TrainingJob::ResolveMode(int num_workers) {
  std::string mode_note;
  absl::StatusOr<TrainingMode> mode =
      ModeForCluster(job_.mode(), static_cast<int>(ps_.size()), &mode_note);
  if (mode.ok()) {
    mode_ = *mode;
  } else {
    mode_error_ = mode.status();
  }
  if (!mode_note.empty()) LOG(WARNING) << mode_note;
  // The coordinator's main checked these before its dry run already; a
  // job made otherwise (tests, tools) is held to them here.
  if (absl::Status s = ValidateJobForWorkers(
          job_, mode_, num_workers, options_.coordinator.remove_lost_workers);
      !s.ok() && mode_error_.ok()) {
    mode_error_ = s;
  }
  // Hybrid: the servers hold the tables only.
  if (absl::StatusOr<std::vector<TablePlan>> tables =
          PlaceTables(plan_.variables, job_, mode_);
      tables.ok()) {
    replicated_ = ReplicatedTables(*tables);
  } else if (mode_error_.ok()) {
    mode_error_ = tables.status();
  }
  served_ = ServedPlan(plan_, mode_, replicated_);
  if (absl::StatusOr<ModelDef> model = JobModel(job_); model.ok()) {
    has_accuracy_ = model->loss().kind() != LossDef::MEAN_SQUARED_ERROR;
  }
}

CoordinatorOptions TrainingJob::SchedulerOptions() {
  CoordinatorOptions coordinator_options = options_.coordinator;
  coordinator_options.on_member_event = [this](int worker, MemberState state,
                                               const std::string& note) {
    // A replica that did not come back leaves the ring: the repair and
    // every restore after are the members'.
    if (state == MemberState::kRemoved && replica_checkpoints_ != nullptr) {
      replica_checkpoints_->Drop(worker);
    }
    RecordMemberChange(membership_.get(), out_, worker, state, note);
  };
  if (mode_.kind == TrainingMode::Kind::kSsp) {
    coordinator_options.max_staleness = mode_.staleness;
  }
  if (mode_.replicates_dense()) {
    // Every replica takes part in every all-reduce with its own data.
    coordinator_options.steal_threshold = std::numeric_limits<int>::max();
    coordinator_options.replicas_in_lockstep = true;
  }
  // Asynchronous steps may share a call, and so may the rounds of replicas
  // whose rows go asynchronously (their all-reduce keeps them in step);
  // a sync round has one step per worker, and a staleness bound counts
  // steps one at a time.
  if (mode_.kind != TrainingMode::Kind::kAsync &&
      !(mode_.replicates_dense() && !mode_.aggregates_steps())) {
    coordinator_options.steps_per_call = 1;
  }
  return coordinator_options;
}

void TrainingJob::MakeCheckpoints(const std::vector<PsClient*>& clients) {
  // Checkpoints hold what the servers hold and, in mirrored and hybrid
  // jobs, the workers' replica.
  if (options_.checkpoint_dir.empty() ||
      (ps_.empty() && !mode_.replicates_dense())) {
    return;
  }
  checkpointer_ = std::make_unique<JobCheckpointer>(
      options_.checkpoint_dir, options_.keep_checkpoints, clients, job_);
  if (mode_.replicates_dense()) {
    // hybrid:ssp:S leaves a worker's last S row pushes in flight.
    replica_checkpoints_ = std::make_unique<WorkerReplicas>(
        workers_, options_.startup_concurrency, options_.ps_recovery_timeout,
        mode_.ssp_rows ? static_cast<int>(mode_.staleness) : 0);
    checkpointer_->SetReplicas(replica_checkpoints_.get());
  }
  PsRecoveryOptions recovery;
  recovery.restore = options_.restore;
  recovery.epochs = job_.schedule().epochs();
  recovery.timeout = options_.ps_recovery_timeout;
  recovery.init_checkpoint = options_.init_checkpoint;
  recovery_ = std::make_unique<PsRecovery>(
      checkpointer_.get(), health_.get(), coordinator_.get(), &board_,
      [this] { return setup_->CreateVariables(); }, out_, recovery);
}

void TrainingJob::MakeRunner(int num_workers) {
  StepRunnerOptions runner;
  runner.mode = mode_;
  runner.num_workers = num_workers;
  runner.backup_workers = job_.backup_workers();
  runner.epochs = job_.schedule().epochs();
  runner.steps_per_call = options_.coordinator.steps_per_call;
  // The job was validated before it started: its rates are good.
  if (absl::StatusOr<JobLearningRates> rates =
          JobLearningRates::Create(job_, mode_);
      rates.ok()) {
    runner.learning_rates = *std::move(rates);
  }
  // Global-norm clipping of the global batch's gradient: the servers'
  // parts of each global step's norm meet here before any server applies
  // it (docs/design.md#gradient-clipping).
  if (ClipsGlobalNormOnServers(job_, mode_.aggregates_steps())) {
    std::vector<PsClient*> clients;
    for (auto& p : ps_) clients.push_back(p.get());
    step_norms_ = std::make_unique<StepNormExchange>(std::move(clients));
    runner.round_done = [this](int64_t global_step) {
      return step_norms_->Exchange(global_step);
    };
  }
  runner_ = std::make_unique<StepRunner>(coordinator_.get(), runner, &board_,
                                         metrics_.get(), out_);
  if (replica_checkpoints_ == nullptr) return;
  // A worker that dies inside a round costs that round, not the steps
  // since the checkpoint: the survivors' replica is copied through the
  // checkpoint folder, which every worker reads.
  replica_repair_ = std::make_unique<ReplicaRepair>(
      coordinator_.get(), health_.get(), replica_checkpoints_.get(),
      (std::filesystem::path(options_.checkpoint_dir) / "replica-copy")
          .string(),
      job_, out_);
  runner_->SetRoundRepair(
      [this](int64_t global_step, const absl::Status& error) {
        return replica_repair_->Repair(global_step, error);
      });
  // A worker that joined gets its place in the ring at the next round
  // boundary, and the members' replica through the same folder.
  runner_->SetRingReform([this](const std::vector<int>& ring,
                                int64_t global_step) {
    const absl::Time start = absl::Now();
    std::vector<WorkerTask*> tasks;
    for (int w : ring) tasks.push_back(membership_->task(w));
    if (absl::Status s = replica_checkpoints_->Reform(
            ring, std::move(tasks),
            (std::filesystem::path(options_.checkpoint_dir) / "replica-copy")
                .string(),
            job_);
        !s.ok()) {
      return s;
    }
    std::fprintf(out_,
                 "global step %lld: the all-reduce ring re-formed with "
                 "workers %s in %.2f s\n",
                 static_cast<long long>(global_step),
                 absl::StrJoin(ring, ", ").c_str(),
                 absl::ToDoubleSeconds(absl::Now() - start));
    std::fflush(out_);
    return absl::OkStatus();
  });
}

void TrainingJob::MakeEpochLoop() {
  EpochLoopParts parts;
  parts.coordinator = coordinator_.get();
  parts.runner = runner_.get();
  parts.setup = setup_.get();
  parts.evaluator = evaluator_.get();
  parts.health = health_.get();
  parts.metrics = metrics_.get();
  parts.board = &board_;
  parts.control = &control_;
  parts.checkpointer = checkpointer_.get();
  parts.recovery = recovery_.get();
  parts.in_steps = &in_steps_;
  parts.out = out_;
  EpochLoopOptions loop;
  loop.mode = mode_;
  loop.checkpoint_every_epochs = options_.checkpoint_every_epochs;
  loop.checkpoint_every_steps = options_.checkpoint_every_steps;
  loop.checkpoint_every = options_.checkpoint_every;
  loop.run_dir = options_.run_dir;
  loop.has_accuracy = has_accuracy_;
  loop_ = std::make_unique<EpochLoop>(job_, parts, std::move(loop));
}

void TrainingJob::MakeOperatorCommands() {
  OperatorCommandsParts parts;
  parts.loop = loop_.get();
  parts.setup = setup_.get();
  parts.runner = runner_.get();
  parts.health = health_.get();
  parts.metrics = metrics_.get();
  parts.board = &board_;
  parts.control = &control_;
  parts.in_steps = &in_steps_;
  parts.out = out_;
  OperatorCommandsOptions commands;
  commands.mode = mode_;
  commands.epochs = job_.schedule().epochs();
  commands.num_workers = static_cast<int>(workers_.size());
  commands.writes_checkpoints = checkpointer_ != nullptr;
  commands.wait_for_commands = options_.wait_for_commands;
  commands_ = std::make_unique<OperatorCommands>(parts, std::move(commands));
}

TrainingJob::~TrainingJob() { joins_->Close(); }

absl::StatusOr<AddWorkerResponse> TrainingJob::AddWorker(
    const std::string& address) {
  return joins_->AddWorker(address);
}

absl::StatusOr<int> TrainingJob::DrainWorker(const std::string& worker) {
  return joins_->DrainWorker(worker);
}

JobStatus TrainingJob::status() const {
  JobStatus status = board_.Snapshot();
  status.set_steps_rerun(coordinator_->steps_rerun());
  status.set_extra_steps_requested(control_.requested_steps());
  const std::vector<std::pair<int64_t, bool>> progress =
      coordinator_->worker_progress();
  // A recent rate, not the job's average: an idle worker shows 0.
  const std::vector<double> rates =
      coordinator_->steps_per_second(absl::Seconds(10));
  // Joined workers too; a worker that left keeps its row.
  const size_t members = std::min<size_t>(
      progress.size(), static_cast<size_t>(membership_->size()));
  for (size_t w = 0; w < members && w < rates.size(); ++w) {
    WorkerState* state = status.add_workers();
    state->set_index(static_cast<int>(w));
    state->set_address(membership_->task(static_cast<int>(w))->address());
    state->set_steps_done(progress[w].first);
    state->set_steps_per_second(rates[w]);
    state->set_down(progress[w].second);
  }
  membership_->Fill(&status);
  status.set_min_workers(std::max(1, options_.coordinator.min_workers));
  for (const ServerState& server : health_->ServerStates()) {
    *status.add_servers() = server;
  }
  return status;
}

void TrainingJob::Stop(const std::string& reason) {
  control_.Stop(reason);
  // While steps run (the epochs' or extra ones) the stop waits for the
  // steps in flight and a checkpoint is taken at that step boundary;
  // otherwise whatever waits is woken.
  if (!in_steps_) {
    coordinator_->Abort(absl::CancelledError(absl::StrCat(
        "stopped by the operator", reason.empty() ? "" : ": ", reason)));
  }
}

absl::Status TrainingJob::RunJob() {
  if (!mode_error_.ok()) return mode_error_;
  if (absl::Status s = metrics_->Open(); !s.ok()) return s;
  LOG(INFO) << "mode " << mode_.ToString();
  if (const std::string idle =
          IdleServersNote(mode_, served_, static_cast<int>(ps_.size()));
      !idle.empty()) {
    std::fprintf(out_, "note: %s\n", idle.c_str());
    std::fflush(out_);
  }
  if (absl::Status s = health_->WaitForCluster(options_.cluster_wait);
      !s.ok()) {
    return s;
  }
  setup_->InterruptCollectives();
  if (absl::Status s = setup_->ProbeDataSizes(); !s.ok()) return s;
  if (absl::Status s = loop_->Plan(1); !s.ok()) return s;
  if (absl::Status s = setup_->CreateServerVariables(); !s.ok()) return s;
  if (absl::Status s = setup_->ConfigureWorkers(); !s.ok()) return s;
  if (options_.evaluate_only) {
    return loop_->EvaluateCheckpoint(static_cast<int>(workers_.size()));
  }
  JobPosition position;
  if (recovery_ != nullptr) {
    absl::StatusOr<JobPosition> resumed =
        setup_->StartFromCheckpoint(recovery_.get());
    if (!resumed.ok()) return resumed.status();
    position = *resumed;
    if (absl::Status s = loop_->ResumeFrom(position); !s.ok()) return s;
  } else if (!options_.init_checkpoint.empty()) {
    if (absl::Status s = setup_->WarmStartFrom(options_.init_checkpoint);
        !s.ok()) {
      return s;
    }
  }
  // The heartbeat keeps the servers' states for status queries; with
  // checkpoints it also stops the steps at once when a server fails, so
  // that recovery starts without waiting for each step to fail.
  health_->StartHeartbeat(
      options_.heartbeat_interval,
      recovery_ == nullptr ? std::function<void(absl::Status)>()
                           : [this](absl::Status failure) {
                               coordinator_->Abort(std::move(failure));
                             });
  // In lockstep modes the plan holds one step per worker and global step:
  // both counts, each named (StepCount), as checkpoints count the first.
  const int64_t workers = static_cast<int64_t>(workers_.size());
  LOG(INFO) << "training on " << setup_->train_examples() << " examples, "
            << StepCount(
                   loop_->data()->steps_per_epoch(),
                   (loop_->data()->steps_per_epoch() + workers - 1) / workers,
                   mode_.lockstep())
            << " per epoch, "
            << (mode_.lockstep()
                    ? absl::StrCat("global batch ",
                                   job_.schedule().batch_size(), " (",
                                   job_.schedule().batch_size() / workers,
                                   " per worker)")
                    : absl::StrCat("batch ", job_.schedule().batch_size()))
            << ", testing on " << setup_->test_examples();
  joins_->Open();
  return Train(position);
}

absl::Status TrainingJob::Train(const JobPosition& position) {
  absl::StatusOr<int> epoch = loop_->TrainEpochs(position);
  if (!epoch.ok()) return epoch.status();
  if (loop_->stopped_inside_epoch()) return absl::OkStatus();
  if (!control_.stop_requested()) {
    if (absl::Status s = commands_->Serve(*epoch); !s.ok()) return s;
  }
  loop_->EndAtStop(*epoch);
  return absl::OkStatus();
}

void TrainingJob::ShutdownCluster() {
  // Every task is told, whatever the others answer; those that joined
  // too, not those that left.
  const std::vector<WorkerTask*> workers = membership_->Present();
  BoundedForEach(static_cast<int>(workers.size()), options_.startup_concurrency,
                 [&](int w) {
                   if (absl::Status s = workers[w]->Shutdown("job finished");
                       !s.ok()) {
                     LOG(WARNING) << s;
                   }
                   return absl::OkStatus();
                 })
      .IgnoreError();
  BoundedForEach(static_cast<int>(ps_.size()), options_.startup_concurrency,
                 [&](int k) {
                   if (absl::Status s = ps_[k]->Shutdown("job finished");
                       !s.ok()) {
                     LOG(WARNING) << s;
                   }
                   return absl::OkStatus();
                 })
      .IgnoreError();
}

absl::Status TrainingJob::Run() {
  const absl::Time start = absl::Now();
  absl::Status status = RunJob();
  joins_->Close();
  bool lost_output = false;
  if (status.ok()) {
    const std::vector<std::string> failures = metrics_->write_failures();
    if (!failures.empty()) {
      lost_output = true;
      status = absl::DataLossError(absl::StrCat(
          metrics_->failed_writes(),
          " writes of metrics or checkpoints failed, so the run's output is "
          "incomplete; the first: ",
          failures.front()));
    }
  }
  board_.Update([&](JobStatus* s) {
    s->set_state(status.ok() ? "done"
                             : absl::StrCat("failed: ", status.message()));
  });
  control_.End(status);
  // Training itself succeeded when only writes failed: its figures still
  // go to the terminal, before the error.
  // An --evaluate_only run printed its evaluation: it trained nothing to
  // tabulate.
  if ((status.ok() || lost_output) && !options_.evaluate_only) {
    JobSummary summary;
    summary.results = loop_->results();
    summary.wall = absl::Now() - start;
    summary.steps_rerun =
        coordinator_->steps_rerun() + loop_->earlier_steps_rerun();
    summary.resumed_epochs = loop_->resumed_epochs();
    summary.best_auc = setup_->best_auc();
    summary.has_accuracy = has_accuracy_;
    summary.lockstep = mode_.lockstep();
    // What the parameter servers hold by their own accounting, as sizing
    // a cluster needs; asked now.
    health_->Refresh();
    for (const ServerState& server : health_->ServerStates()) {
      summary.server_bytes.push_back(server.up() ? server.resident_bytes()
                                                 : -1);
      summary.server_used_bytes.push_back(server.used_bytes());
    }
    PrintSummary(out_, summary);
  }
  PrintMembershipChanges(out_, this->status(),
                         static_cast<int>(workers_.size()));
  // Tests: a kill once the job's result is complete, before the cluster
  // is shut down (the chaos test's after_summary moment).
  FaultPoint("summary");
  if (options_.shutdown_cluster) ShutdownCluster();
  return status;
}

}  // namespace tessera
