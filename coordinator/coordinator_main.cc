// tessera_coordinator: the chief. Creates the job's variables on the
// parameter servers, hands each worker its dataset shard, schedules the
// steps of every epoch, joins at epoch boundaries and evaluates.

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "common/exit_code.h"
#include "common/model/model_support.h"
#include "common/model/table_placement.h"
#include "common/process/cluster_flags.h"
#include "common/process/process_start.h"
#include "common/process/security_flags.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/server_shutdown_grace.h"
#include "common/shutdown_signal.h"
#include "common/training_mode.h"
#include "coordinator/control/coordinator_service.h"
#include "coordinator/dry_run.h"
#include "coordinator/job_cluster.h"
#include "coordinator/job_config.h"
#include "coordinator/job_flags.h"
#include "coordinator/learning_rates.h"
#include "coordinator/remote_worker.h"
#include "coordinator/training_job.h"
#include "coordinator/variable_plan.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "tools/torch/init_weights.h"

DEFINE_bool(dry_run, false,
            "Print the model with every default written out, each layer's "
            "output shape and parameters, and every variable's shards "
            "(rows, bytes, owning parameter server); exit without training.");
DEFINE_bool(check_data, true,
            "--dry_run: read the first training and test examples and check "
            "them against the model; false for a job whose data section is "
            "still a placeholder (tessera_keras import).");
DEFINE_bool(print_job, false, "Print the job as a text-format JobConfig.");
DEFINE_string(run_dir, "", "Folder for metrics.jsonl (created if missing).");
DEFINE_double(cluster_wait_s, 60,
              "How long to wait for every parameter server and worker.");
DEFINE_int32(startup_concurrency, 32,
             "How many workers (and parameter servers) the coordinator "
             "waits for, configures and stops at once (>= 1; 1: one after "
             "another).");
DEFINE_double(worker_recovery_timeout_s, 300,
              "How long a failed worker may take to come back (then the job "
              "fails, or with --remove_lost_workers the worker is removed).");
DEFINE_bool(remove_lost_workers, false,
            "A worker that is not back within --worker_recovery_timeout_s is "
            "removed from the job and its steps go to the others, instead of "
            "failing the job (async, ssp and sync; docs/operations.md, "
            "\"Growing and shrinking a job\").");
DEFINE_int32(min_workers, 1,
             "The fewest workers the job goes on with: a removal that leaves "
             "fewer fails the job, and tessera_ctl drain refuses to go below.");
DEFINE_double(step_retry_timeout_s, 60,
              "How long a step that failed on a worker that still answers, "
              "because it could not reach a parameter server (UNAVAILABLE, "
              "DEADLINE_EXCEEDED: a network partition, a lost connection), "
              "is run again before the job fails (0: never).");
DEFINE_int32(steps_per_call, 8,
             "Asynchronous mode: steps a worker runs per call from the "
             "coordinator (as Keras' steps_per_execution): fewer round trips "
             "for small steps; a failure re-runs only the failed step and "
             "those after it.");
DEFINE_bool(prefetch_parameters, false,
            "Workers pull the next step's parameters while the current step "
            "computes (asynchronous mode: one more step of staleness).");
DEFINE_string(checkpoint_dir, "",
              "Folder of the job's checkpoints (shared by the coordinator and "
              "every parameter server). Set: the job resumes from the newest "
              "valid checkpoint there (see --restore), writes one after every "
              "--checkpoint_every_epochs epochs, and recovers from a failed "
              "parameter server. Empty: no checkpoints.");
DEFINE_int32(checkpoint_every_epochs, 1,
             "Epochs between checkpoints (the last epoch always writes one).");
DEFINE_int64(checkpoint_every_steps, 0,
             "Also a checkpoint inside an epoch every this many steps (global "
             "steps in sync, hybrid and mirrored modes), at a step boundary "
             "that every parameter server holds whole; a lost parameter "
             "server then costs at most this many steps. 0: none.");
DEFINE_double(checkpoint_every_seconds, 0,
              "Also a checkpoint inside an epoch at the first step boundary "
              "this many seconds after the last checkpoint. 0: none.");
DEFINE_int32(keep_checkpoints, 3, "Complete checkpoints kept (>= 1).");
DEFINE_bool(restore, true,
            "Resume from the newest valid checkpoint in --checkpoint_dir.");
DEFINE_string(init_checkpoint, "",
              "A checkpoint root whose newest valid checkpoint gives the "
              "variables their first values, when the job has no checkpoint "
              "of its own to resume: a warm start at step 0 on any number of "
              "parameter servers (tessera_keras import --checkpoint_out).");
DEFINE_string(init_weights, "",
              "A safetensors file of the variables' first values: a PyTorch "
              "state_dict (tessera_torch import --weights_out, the module's "
              "names and layouts) or tensors named as the variables. Written "
              "as a step-0 checkpoint in <file>.checkpoint and started from "
              "as --init_checkpoint (a job with no checkpoint of its own).");
DEFINE_bool(evaluate_only, false,
            "Evaluate the newest valid checkpoint in --checkpoint_dir on the "
            "whole test set and end, training nothing.");
DEFINE_double(ps_recovery_timeout_s, 300,
              "How long a failed parameter server may take to come back.");
DEFINE_double(heartbeat_s, 1,
              "Seconds between health checks of every parameter server "
              "(0: none; failed calls still reveal a failure).");
DEFINE_bool(wait_for_commands, false,
            "After the epochs, keep the cluster and wait for tessera_ctl "
            "(schedule more steps, checkpoint, stop) instead of ending.");
DEFINE_bool(shutdown_cluster, true,
            "Stop the parameter servers and workers when the job ends.");

namespace {

// The job as the command line and the cluster make it, checked against each
// other before anything starts.
struct PlannedJob {
  tessera::JobConfig job;
  tessera::VariablePlan plan;
  tessera::TrainingMode mode;
  std::vector<tessera::TablePlan> tables;
  std::string mode_note;
  std::vector<tessera::VariableValues> init_weights;
};

// An error every restart would repeat: logged as is, exit 2.
absl::Status UserError(absl::string_view prefix, const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat(prefix, s.message()));
}

absl::Status ReadJob(PlannedJob* planned) {
  absl::StatusOr<tessera::JobConfig> job = tessera::JobConfigFromFlags();
  if (job.ok()) {
    if (absl::Status s = tessera::ValidateJobConfig(*job); !s.ok()) job = s;
  }
  if (!job.ok()) return UserError("bad job: ", job.status());
  planned->job = *std::move(job);
  if (FLAGS_init_weights.empty()) return absl::OkStatus();
  if (!FLAGS_init_checkpoint.empty()) {
    return absl::InvalidArgumentError(
        "--init_weights and --init_checkpoint both give the first values: "
        "name one");
  }
  absl::StatusOr<std::vector<tessera::VariableValues>> read =
      tessera::ReadInitWeights(planned->job, FLAGS_init_weights);
  if (!read.ok()) return UserError("--init_weights: ", read.status());
  planned->init_weights = std::move(*read);
  std::printf("--init_weights=%s: %zu variables of the model\n",
              FLAGS_init_weights.c_str(), planned->init_weights.size());
  return absl::OkStatus();
}

// The mode this cluster gives the job (none of its parameter servers:
// mirrored), checked against the model before anything starts: a worker
// refusing it at configuration would cost the whole start-up.
absl::Status ResolveMode(const tessera::ClusterSpec& cluster,
                         PlannedJob* planned) {
  const int num_ps = cluster.num_tasks("ps");
  absl::StatusOr<tessera::TrainingMode> mode =
      tessera::ModeForCluster(planned->job.mode(), num_ps, &planned->mode_note);
  if (!mode.ok()) return UserError("bad job: ", mode.status());
  absl::StatusOr<std::vector<tessera::TablePlan>> tables =
      tessera::PlaceTables(planned->plan.variables, planned->job, *mode);
  if (!tables.ok()) return UserError("bad job: ", tables.status());
  if (absl::Status s = tessera::CheckModeFits(
          planned->plan.variables, *mode, tessera::ReplicatedTables(*tables));
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad job: ", s.message(),
        num_ps == 0
            ? "; the cluster has no parameter servers, so the job would "
              "train mirrored: start some (tessera_local --num_ps=2)"
            : ""));
  }
  // What the workers' count decides is refused here too, before the dry
  // run's plan: found after the cluster started, it cost the whole start-up
  // and read as a failed job.
  if (absl::Status s = tessera::ValidateJobForWorkers(
          planned->job, *mode, cluster.num_tasks("worker"),
          FLAGS_remove_lost_workers);
      !s.ok()) {
    return UserError("bad job: ", s);
  }
  planned->mode = *mode;
  planned->tables = *std::move(tables);
  return absl::OkStatus();
}

absl::StatusOr<PlannedJob> PlanJob(const tessera::ClusterSpec& cluster) {
  PlannedJob planned;
  if (absl::Status s = ReadJob(&planned); !s.ok()) return s;
  if (FLAGS_print_job) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(planned.job, &text);
    std::printf("%s", text.c_str());
  }
  // Mirrored jobs place nothing; the plan still lists the variables.
  absl::StatusOr<tessera::VariablePlan> plan =
      tessera::PlanVariables(planned.job, std::max(1, cluster.num_tasks("ps")));
  if (!plan.ok()) {
    return UserError("cannot place the variables: ", plan.status());
  }
  planned.plan = *std::move(plan);
  if (absl::Status s = ResolveMode(cluster, &planned); !s.ok()) return s;
  // The linear scaling rule needs the mode and the workers; applied once
  // here, every server and worker gets the scaled rates.
  absl::StatusOr<std::string> scaled = tessera::ApplyLearningRateScaling(
      planned.mode, cluster.num_tasks("worker"), &planned.job);
  if (!scaled.ok()) return UserError("bad job: ", scaled.status());
  if (!scaled->empty()) std::printf("%s\n", scaled->c_str());
  return planned;
}

int RunDryRun(const PlannedJob& planned, const tessera::ClusterSpec& cluster) {
  const tessera::VariablePlan served = tessera::ServedPlan(
      planned.plan, planned.mode, tessera::ReplicatedTables(planned.tables));
  tessera::DryRunOptions dry_run;
  dry_run.mode_note = planned.mode_note;
  if (const std::string idle = tessera::IdleServersNote(
          planned.mode, served, cluster.num_tasks("ps"));
      !idle.empty()) {
    dry_run.mode_note = idle;
  }
  dry_run.check_data = FLAGS_check_data;
  dry_run.dense_on_workers = planned.mode.replicates_dense();
  dry_run.tables = planned.tables;
  if (absl::Status s =
          tessera::DryRun(planned.job, cluster, served, dry_run, stdout);
      !s.ok()) {
    std::fflush(stdout);
    LOG(ERROR) << "bad job: " << s.message();
    return 2;
  }
  return 0;
}

// Durations: a negative or NaN one would make deadlines in the past (the
// job fails at once with a misleading timeout) or never.
absl::Status CheckDurationFlags() {
  for (const auto& [name, value, zero_ok] :
       {std::tuple<const char*, double, bool>{"cluster_wait_s",
                                              FLAGS_cluster_wait_s, false},
        {"worker_recovery_timeout_s", FLAGS_worker_recovery_timeout_s, true},
        {"step_retry_timeout_s", FLAGS_step_retry_timeout_s, true},
        {"ps_recovery_timeout_s", FLAGS_ps_recovery_timeout_s, true},
        {"heartbeat_s", FLAGS_heartbeat_s, true}}) {
    if (!std::isfinite(value) || value < 0 || (value == 0 && !zero_ok)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " must be a finite number of seconds ",
                       zero_ok ? ">= 0" : "> 0", ", got ", value));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCheckpointFlags() {
  if (FLAGS_keep_checkpoints < 1 || FLAGS_checkpoint_every_epochs < 1) {
    return absl::InvalidArgumentError(
        "--keep_checkpoints and --checkpoint_every_epochs must be >= 1");
  }
  // Written so that NaN fails too.
  if (FLAGS_checkpoint_every_steps < 0 ||
      !(FLAGS_checkpoint_every_seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_every_steps and --checkpoint_every_seconds must be >= 0 "
        "(0: no checkpoints inside epochs), got ",
        FLAGS_checkpoint_every_steps, " and ", FLAGS_checkpoint_every_seconds));
  }
  if ((FLAGS_checkpoint_every_steps > 0 ||
       FLAGS_checkpoint_every_seconds > 0) &&
      FLAGS_checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        "--checkpoint_every_steps and --checkpoint_every_seconds need "
        "--checkpoint_dir");
  }
  return absl::OkStatus();
}

// The job's options from the flags, every one checked (a user error).
absl::StatusOr<tessera::TrainingJobOptions> OptionsFromFlags() {
  if (absl::Status s = CheckDurationFlags(); !s.ok()) return s;
  if (FLAGS_startup_concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--startup_concurrency must be >= 1, got ", FLAGS_startup_concurrency));
  }
  if (FLAGS_steps_per_call < 1 || FLAGS_steps_per_call > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--steps_per_call must be between 1 and 1024, got ",
                     FLAGS_steps_per_call));
  }
  if (FLAGS_min_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min_workers must be >= 1, got ", FLAGS_min_workers));
  }
  if (absl::Status s = CheckCheckpointFlags(); !s.ok()) return s;
  tessera::TrainingJobOptions options;
  options.run_dir = FLAGS_run_dir;
  options.cluster_wait = absl::Seconds(FLAGS_cluster_wait_s);
  options.startup_concurrency = FLAGS_startup_concurrency;
  options.shutdown_cluster = FLAGS_shutdown_cluster;
  options.prefetch_parameters = FLAGS_prefetch_parameters;
  options.coordinator.steps_per_call = FLAGS_steps_per_call;
  options.coordinator.worker_recovery_timeout =
      absl::Seconds(FLAGS_worker_recovery_timeout_s);
  options.coordinator.step_retry_timeout =
      absl::Seconds(FLAGS_step_retry_timeout_s);
  options.coordinator.remove_lost_workers = FLAGS_remove_lost_workers;
  options.coordinator.min_workers = FLAGS_min_workers;
  options.checkpoint_dir = FLAGS_checkpoint_dir;
  options.checkpoint_every_epochs = FLAGS_checkpoint_every_epochs;
  options.checkpoint_every_steps = FLAGS_checkpoint_every_steps;
  options.checkpoint_every = absl::Seconds(FLAGS_checkpoint_every_seconds);
  options.keep_checkpoints = FLAGS_keep_checkpoints;
  options.restore = FLAGS_restore;
  options.init_checkpoint = FLAGS_init_checkpoint;
  options.evaluate_only = FLAGS_evaluate_only;
  options.ps_recovery_timeout = absl::Seconds(FLAGS_ps_recovery_timeout_s);
  options.heartbeat_interval = absl::Seconds(FLAGS_heartbeat_s);
  options.wait_for_commands = FLAGS_wait_for_commands;
  return options;
}

// Serves tessera_ctl's service while the job trains; the process's exit
// code.
int TrainAndServe(tessera::TrainingJob& training,
                  const tessera::ClusterSpec& cluster,
                  const tessera::ServerOptions& server_options) {
  absl::StatusOr<tessera::RpcAuth> auth = tessera::RpcAuthFromFlags();
  if (!auth.ok()) {
    LOG(ERROR) << auth.status().message();
    return 2;
  }
  tessera::CoordinatorService service(
      [&training] { return training.status(); }, training.control(),
      [&training](const std::string& reason) { training.Stop(reason); },
      *std::move(auth), &training);
  std::unique_ptr<grpc::Server> server =
      tessera::StartServer(cluster.own_address(), &service, server_options);
  if (server == nullptr) return 1;

  absl::Status result;
  absl::Notification finished;
  std::thread runner([&] {
    result = training.Run();
    finished.Notify();
  });
  const std::string why = tessera::WaitForShutdown(&finished, "done");
  if (!finished.HasBeenNotified()) {
    // Steps in flight block on remote calls; do not wait for them.
    std::fprintf(stderr, "coordinator interrupted (%s)\n", why.c_str());
    std::fflush(nullptr);
    _exit(tessera::kExitInterrupted);
  }
  runner.join();
  tessera::ShutdownServer(server.get(), tessera::kCoordinatorShutdownGrace);
  if (!result.ok()) {
    LOG(ERROR) << "training failed: " << result;
    // Bad input (a data file that is not there, a data set smaller than
    // asked for, a wrong shape) fails the same way however often the job is
    // restarted: the user's error code, which launchers do not restart.
    return tessera::ExitCodeFor(result);
  }
  // Stopped by an operator before the epochs were all trained: not a
  // failure, but no launcher may take it for a finished job either.
  if (training.stopped_early()) return tessera::kExitStopped;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::ProcessStart start = tessera::StartProcess(
      &argc, &argv,
      "tessera_coordinator: the chief of a training job. The cluster comes "
      "from TF_CONFIG, --tf_config, --ps_hosts/--worker_hosts/--chief_host "
      "with --task_type=chief, or (under srun) --slurm_jobs.",
      "chief");
  if (!start.cluster) return start.exit_code;
  const tessera::ClusterSpec& cluster = *start.cluster;
  // A chief and workers without parameter servers train mirrored, as a
  // TF cluster without ps tasks would with MirroredStrategy.
  const bool mirrored_cluster = cluster.num_tasks("ps") == 0 &&
                                cluster.num_tasks("chief") == 1 &&
                                cluster.num_tasks("worker") >= 1;
  if (absl::Status s = cluster.ValidateForParameterServerTraining();
      !s.ok() && !mirrored_cluster) {
    LOG(ERROR) << s.message();
    return 2;
  }
  absl::StatusOr<PlannedJob> planned = PlanJob(cluster);
  if (!planned.ok()) {
    LOG(ERROR) << planned.status().message();
    return 2;
  }
  if (FLAGS_dry_run) return RunDryRun(*planned, cluster);
  if (!FLAGS_run_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(FLAGS_run_dir, error);
    if (error) {
      LOG(ERROR) << "cannot create --run_dir " << FLAGS_run_dir << ": "
                 << error.message();
      return 2;
    }
  }
  absl::StatusOr<tessera::TrainingJobOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    LOG(ERROR) << options.status().message();
    return 2;
  }
  if (!planned->init_weights.empty()) {
    options->init_checkpoint =
        tessera::InitWeightsCheckpointRoot(FLAGS_init_weights);
    absl::StatusOr<std::string> written = tessera::WriteInitWeightsCheckpoint(
        planned->job, planned->init_weights, options->init_checkpoint);
    if (!written.ok()) {
      LOG(ERROR) << "--init_weights: " << written.status().message();
      return 1;
    }
  }
  if (FLAGS_evaluate_only && FLAGS_checkpoint_dir.empty()) {
    LOG(ERROR) << "--evaluate_only needs --checkpoint_dir (the checkpoint to "
                  "evaluate)";
    return 2;
  }
  tessera::ConnectOptions connect;
  connect.timeout_s = FLAGS_rpc_timeout_s;
  connect.chunk_bytes = FLAGS_chunk_bytes;
  connect.security = start.security;
  // Workers that join later are reached as those of the cluster spec.
  options->connect_worker = [connect](const std::string& address, int index) {
    return std::unique_ptr<tessera::WorkerTask>(
        std::make_unique<tessera::RemoteWorker>(
            address, index, tessera::MakeChannel(address, connect.security),
            connect.timeout_s));
  };
  for (const auto& [name, addresses] : cluster.jobs()) {
    options->cluster_jobs[name] = addresses;
  }
  tessera::TrainingJob training(tessera::ConnectCluster(cluster, connect),
                                planned->job, std::move(planned->plan),
                                *options);
  return TrainAndServe(training, cluster, start.server);
}
