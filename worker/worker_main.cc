// tessera_worker: computes gradients for the steps the coordinator sends
// it, pulling parameters from and pushing gradients to the parameter
// servers. Needs only the cluster spec: the coordinator sends the rest.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/process/cluster_flags.h"
#include "common/process/process_start.h"
#include "common/process/security_flags.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/server_shutdown_grace.h"
#include "common/shutdown_signal.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "grpcpp/server.h"
#include "worker/backend/device_choice.h"
#include "worker/backend/gpu_probe.h"
#include "worker/collective/negotiated_all_reducer.h"
#include "worker/collective/ring_allreduce.h"
#include "worker/join/join_job.h"
#include "worker/join/join_watch.h"
#include "worker/training_worker.h"
#include "worker/worker_service.h"

DEFINE_string(device, "auto",
              "Where to compute: auto (when this build has CUDA and a GPU "
              "answers, the GPU of this worker's local rank on its host, "
              "TESSERA_LOCAL_RANK or SLURM_LOCALID, modulo the GPUs it sees; "
              "else the CPU), cpu, cuda (= cuda:0) or cuda:N (the N-th GPU "
              "that CUDA_VISIBLE_DEVICES leaves visible).");

DEFINE_string(data_plane, "tcp",
              "How dense tensors and embedding rows travel between this "
              "worker and the parameter servers: tcp (the TCP data plane "
              "each server announces, authenticated with the job token, and "
              "TLS with --tls_*; docs/design.md, \"Bytes and control "
              "travel apart\") or grpc (the ParameterServer calls, the "
              "fallback).");

DEFINE_string(join, "",
              "HOST:PORT of the coordinator of a running job to join: the "
              "worker asks it for its index and the cluster (no cluster "
              "flags then), and the coordinator configures it and gives it "
              "steps from the next step boundary (async, ssp, sync; "
              "docs/operations.md, \"Growing and shrinking a job\"). Needs "
              "the job's token and --join_address.");
DEFINE_string(join_address, "",
              "With --join: HOST:PORT where this worker serves, as the "
              "coordinator and the parameter servers reach it.");
DEFINE_double(join_timeout_s, 300,
              "With --join: how long to keep asking a coordinator that does "
              "not answer yet, or whose job is still starting.");
DEFINE_bool(inflate_gzip_data, true,
            "Read gzipped IDX and Criteo files through a plain copy that "
            "the first worker of this machine inflates and the others share "
            "(--inflated_data_dir): a gzip stream cannot be entered in the "
            "middle, so each worker would otherwise inflate the file up to "
            "its shard.");
DEFINE_string(inflated_data_dir, "",
              "Where --inflate_gzip_data keeps the inflated copies (one per "
              "file version); empty: $TMPDIR (or /tmp)/tessera-inflated-UID.");

namespace {

// The backend of --device, logged; with auto, the CPU when the GPU that
// answered cannot be used. *choice says what was chosen.
absl::StatusOr<std::unique_ptr<tessera::Backend>> MakeWorkerBackend(
    tessera::DeviceChoice* choice) {
  absl::StatusOr<tessera::DeviceChoice> chosen =
      tessera::ChooseDeviceForFlag(FLAGS_device);
  if (!chosen.ok()) return chosen.status();
  *choice = *chosen;
  absl::StatusOr<std::unique_ptr<tessera::Backend>> backend =
      tessera::MakeBackend(*choice);
  if (!backend.ok() && FLAGS_device == "auto") {
    LOG(WARNING) << "device: " << choice->device
                 << " answered but cannot be used (" << backend.status()
                 << "); auto falls back to the CPU";
    choice->cuda = false;
    choice->device = "cpu";
    choice->reason = "auto: the GPU could not be used";
    backend = tessera::MakeBackend(*choice);
  }
  if (backend.ok()) {
    LOG(INFO) << "device: " << (*backend)->device_name() << " ("
              << choice->reason << ")";
  }
  return backend;
}

// The data plane of --data_plane, logged.
absl::StatusOr<tessera::DataPlaneKind> DataPlane(
    const tessera::ChannelSecurity& security) {
  absl::StatusOr<tessera::DataPlaneKind> data_plane =
      tessera::ParseDataPlaneKind(FLAGS_data_plane);
  if (!data_plane.ok()) return data_plane.status();
  LOG(INFO) << "data plane: " << tessera::DataPlaneName(*data_plane)
            << (*data_plane == tessera::DataPlaneKind::kTcp &&
                        security.tls.has_value()
                    ? " (TLS)"
                    : "");
  return data_plane;
}

// How this worker reaches the parameter servers.
tessera::PsClientOptions PsOptions(tessera::DataPlaneKind data_plane,
                                   const tessera::ChannelSecurity& security) {
  tessera::PsClientOptions ps_options;
  ps_options.chunk_bytes = FLAGS_chunk_bytes;
  ps_options.timeout_s = FLAGS_rpc_timeout_s;
  ps_options.data_plane = data_plane;
  ps_options.job_token = security.job_token;
  ps_options.tls = security.tls;
  ps_options.tls_target_name_override = security.tls_target_name_override;
  return ps_options;
}

// This worker's rank in the all-reduce group of mirrored training. It
// serves on the worker's own port; only mirrored jobs use it.
absl::StatusOr<std::unique_ptr<tessera::RingAllReduce>> MakeRing(
    const tessera::ClusterSpec& cluster, tessera::DataPlaneKind data_plane,
    const tessera::ChannelSecurity& security) {
  tessera::RingAllReduceOptions ring_options;
  ring_options.chunk_bytes = FLAGS_chunk_bytes;
  ring_options.timeout_s = FLAGS_rpc_timeout_s;
  ring_options.security = security;
  ring_options.data_plane = data_plane;
  const std::vector<std::string>& peers = cluster.tasks("worker");
  absl::StatusOr<std::unique_ptr<tessera::RingAllReduce>> ring =
      tessera::RingAllReduce::Create(
          cluster.task().index, static_cast<int>(peers.size()), ring_options);
  if (!ring.ok()) return ring.status();
  if (absl::Status s = (*ring)->SetPeers(peers); !s.ok()) return s;
  return ring;
}

// A worker that joined a running job stops, as if signalled, once that
// job no longer counts it, or its coordinator has not answered for a
// minute (nobody else would tell it: a restarted coordinator knows only
// its cluster spec's workers). Null for a worker of the cluster spec.
std::unique_ptr<tessera::JoinWatch> WatchTheJoinedJob(
    const tessera::ChannelSecurity& security) {
  if (FLAGS_join.empty()) return nullptr;
  tessera::JoinOptions join;
  join.chief = FLAGS_join;
  join.address = FLAGS_join_address;
  join.security = security;
  join.timeout = absl::Minutes(1);
  return std::make_unique<tessera::JoinWatch>(
      join, absl::Seconds(2), [](const std::string& why) {
        LOG(WARNING) << "stopping: " << why;
        kill(getpid(), SIGTERM);  // to the process: the signal thread
      });
}

}  // namespace

int main(int argc, char** argv) {
  tessera::ProcessStart start = tessera::StartProcess(
      &argc, &argv,
      "tessera_worker: training worker. The cluster comes from TF_CONFIG, "
      "--tf_config, --ps_hosts/--worker_hosts/--chief_host with "
      "--task_type=worker --task_index=N, or (under srun) --slurm_jobs; a "
      "worker joining a running job gets it from --join=HOST:PORT.",
      "worker", [](const tessera::ChannelSecurity& security) {
        if (FLAGS_join.empty()) return tessera::ResolveClusterSpec();
        tessera::JoinOptions join;
        join.chief = FLAGS_join;
        join.address = FLAGS_join_address;
        join.security = security;
        join.timeout = absl::Seconds(std::max(0.0, FLAGS_join_timeout_s));
        return tessera::JoinRunningJob(join);
      });
  if (!start.cluster) return start.exit_code;
  const tessera::ClusterSpec& cluster = *start.cluster;
  tessera::DeviceChoice choice;
  absl::StatusOr<std::unique_ptr<tessera::Backend>> backend =
      MakeWorkerBackend(&choice);
  if (!backend.ok()) {
    LOG(ERROR) << backend.status().message();
    return 2;
  }
  const int task_index = cluster.task().index;
  const std::string address = cluster.own_address();

  absl::StatusOr<tessera::DataPlaneKind> data_plane = DataPlane(start.security);
  if (!data_plane.ok()) {
    LOG(ERROR) << data_plane.status().message();
    return 2;
  }
  absl::StatusOr<std::unique_ptr<tessera::RingAllReduce>> ring =
      MakeRing(cluster, *data_plane, start.security);
  if (!ring.ok()) {
    LOG(ERROR) << ring.status().message();
    return 2;
  }
  // Every call to this worker (Worker and Collective) must carry the
  // job's token; StartProcess has checked that it can be read.
  absl::StatusOr<tessera::RpcAuth> auth = tessera::RpcAuthFromFlags();
  if (!auth.ok()) {
    LOG(ERROR) << auth.status().message();
    return 2;
  }
  // Mirrored jobs sum through NCCL when every worker has a GPU: the first
  // all-reduce asks the others, through the ring.
  tessera::NegotiatedAllReducer all_reducer(
      ring->get(), tessera::DefaultNcclChoice(choice.cuda ? choice.ordinal : -1,
                                              FLAGS_rpc_timeout_s));
  tessera::TrainingWorker worker(
      cluster, *std::move(backend), PsOptions(*data_plane, start.security),
      &all_reducer, start.security,
      FLAGS_inflate_gzip_data ? (FLAGS_inflated_data_dir.empty()
                                     ? tessera::InflatedFiles::DefaultDir()
                                     : FLAGS_inflated_data_dir)
                              : "");
  tessera::WorkerService service(&worker, task_index, *std::move(auth));

  std::unique_ptr<grpc::Server> server = tessera::StartServer(
      address, &service, start.server,
      [&](grpc::ServerBuilder* builder) { (*ring)->RegisterService(builder); });
  if (server == nullptr) return 1;
  LOG(INFO) << "worker " << task_index << " serving at " << address;
  std::unique_ptr<tessera::JoinWatch> watch = WatchTheJoinedJob(start.security);
  const std::string why =
      tessera::WaitForShutdown(&service.shutdown_requested(), "request");
  LOG(INFO) << "worker " << task_index << " stopping (" << why << ")";
  // A step waiting in an all-reduce for a ring that will not finish (the
  // chief restarted, a neighbour stopped first) would hold the executor,
  // and so the exit, until the all-reduce deadline: end it now.
  all_reducer.Shutdown(absl::CancelledError(
      absl::StrCat("worker ", task_index, " is stopping (", why, ")")));
  watch.reset();
  tessera::ShutdownServer(server.get(), tessera::kServerShutdownGrace);
  return 0;
}
