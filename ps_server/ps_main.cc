// tessera_ps: a parameter server. It serves the shards the coordinator
// creates on it until the coordinator (or a signal) tells it to stop.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/data_plane/descriptor_limit.h"
#include "common/data_plane/socket.h"
#include "common/process/process_start.h"
#include "common/process/security_flags.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/server_shutdown_grace.h"
#include "common/shutdown_signal.h"
#include "glog/logging.h"
#include "ps_server/data_plane/dense_plane_server.h"
#include "ps_server/ps_service.h"
#include "ps_server/rocksdb_library.h"
#include "ps_server/row_memory_budget.h"
#include "ps_server/shard_store.h"

DEFINE_string(data_plane_server, "events",
              "how the TCP data plane serves its connections: events (a "
              "fixed pool of threads over epoll, any number of connections) "
              "or threads (a thread per connection, the plane before #46)");
DEFINE_int32(data_plane_threads, 0,
             "the events data plane's pool of threads; 0: one per core");
DEFINE_string(row_memory_budget, "",
              "the resident memory this server keeps within, e.g. 512M or 2G "
              "(K, M, G, T: powers of 1024), counting its rows, its disk "
              "tier's cache and memtables and its own memory; a growing "
              "table's rows beyond it move to a disk tier in --row_disk_dir "
              "and come back when pulled or pushed. Empty: every row in "
              "memory");
DEFINE_string(row_disk_dir, "",
              "where the disk tier of --row_memory_budget lives (a folder "
              "ps-<task index> under it, emptied at start: the tier is a "
              "cache rebuilt from the job's checkpoint). Empty: "
              "$TMPDIR/tessera_rows.<port>, or /tmp/tessera_rows.<port>");

namespace {

// The server's row budget from the flags, its disk folder made and
// emptied, or an error naming the flag (a user's mistake: exit 2).
absl::StatusOr<std::shared_ptr<tessera::RowMemoryBudget>> RowBudgetFromFlags(
    const std::string& address, int task_index) {
  if (FLAGS_row_memory_budget.empty()) {
    if (!FLAGS_row_disk_dir.empty()) {
      return absl::InvalidArgumentError(
          "--row_disk_dir needs --row_memory_budget");
    }
    return nullptr;
  }
  absl::StatusOr<int64_t> bytes =
      tessera::ParseRowMemoryLimit(FLAGS_row_memory_budget);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--row_memory_budget: ", bytes.status().message()));
  }
  // Loaded now, so a node without RocksDB fails at the start (exit 2),
  // not at a table's first spill.
  if (absl::StatusOr<const tessera::RocksDbApi*> rocksdb =
          tessera::LoadRocksDb();
      !rocksdb.ok()) {
    return rocksdb.status();
  }
  std::string root;
  if (FLAGS_row_disk_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    const size_t colon = address.rfind(':');
    root = absl::StrCat(
        tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/tessera_rows.",
        colon == std::string::npos ? address : address.substr(colon + 1));
  } else {
    root = absl::StrCat(FLAGS_row_disk_dir, "/ps-", task_index);
  }
  // What a killed server left is stale: the job's checkpoint restores it.
  std::error_code error;
  std::filesystem::remove_all(root, error);
  if (!error) std::filesystem::create_directories(root, error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--row_disk_dir: cannot empty or make ", root, ": ", error.message()));
  }
  // The budget bounds the whole server: its own memory counts too.
  return std::make_shared<tessera::RowMemoryBudget>(
      *bytes, root, &tessera::ProcessResidentBytes);
}

// How the TCP data plane serves its connections, from
// --data_plane_server and --data_plane_threads, or an error naming the
// flag (a user's mistake: exit 2).
absl::StatusOr<tessera::DataPlaneServing> ServingFromFlags() {
  tessera::DataPlaneServing serving;
  if (FLAGS_data_plane_server == "events") {
    serving = tessera::DataPlaneServing::kEventPool;
  } else if (FLAGS_data_plane_server == "threads") {
    serving = tessera::DataPlaneServing::kThreadPerConnection;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--data_plane_server: \"", FLAGS_data_plane_server,
                     "\" is not one of events, threads"));
  }
  if (FLAGS_data_plane_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data_plane_threads must be >= 0, got ", FLAGS_data_plane_threads));
  }
  return serving;
}

// Every data plane connection holds a descriptor: take all the hard
// limit allows, and say how many that is.
void RaiseDescriptors() {
  absl::StatusOr<tessera::DescriptorLimit> limit =
      tessera::RaiseDescriptorLimit();
  if (limit.ok()) {
    LOG(INFO) << "ps: " << tessera::DescribeDescriptorLimit(*limit);
  } else {
    LOG(WARNING) << "ps: " << limit.status().message();
  }
}

// Tensor bytes may also travel on a TCP data plane, on a port of the
// kernel's choosing that Health announces; workers use it with
// --data_plane=tcp. With --tls_* it runs TLS with the same files and
// trust as the gRPC server.
tessera::DensePlaneServerOptions PlaneOptions(
    const std::string& address, const tessera::ServerOptions& server,
    const std::string& job_token, tessera::DataPlaneServing serving) {
  std::string host;
  int port = 0;
  tessera::DensePlaneServerOptions plane_options;
  if (tessera::SplitHostPort(
          tessera::ListenAddress(address, server.listen_host), &host, &port)
          .ok()) {
    plane_options.host = host;
  }
  plane_options.job_token = job_token;
  plane_options.timeout_s = FLAGS_rpc_timeout_s;
  plane_options.tls = server.tls;
  plane_options.serving = serving;
  plane_options.threads = FLAGS_data_plane_threads;
  return plane_options;
}

// Starts the data plane and the gRPC server for `service`, serves until a
// shutdown request or signal, then stops both. Returns the exit code.
int Serve(const std::string& address,
          const tessera::ServerOptions& server_options,
          const tessera::DensePlaneServerOptions& plane_options,
          tessera::PsCore* core, tessera::ParameterServerService* service,
          int task_index) {
  absl::StatusOr<std::unique_ptr<tessera::DensePlaneServer>> data_plane =
      tessera::DensePlaneServer::Start(core, plane_options);
  if (!data_plane.ok()) {
    LOG(ERROR) << data_plane.status().message();
    return 1;
  }
  std::unique_ptr<grpc::Server> server =
      tessera::StartServer(address, service, server_options);
  if (server == nullptr) return 1;
  LOG(INFO) << "ps " << task_index << " serving at " << address
            << ", data plane on port " << (*data_plane)->port() << " ("
            << ((*data_plane)->pool_threads() > 0
                    ? absl::StrCat((*data_plane)->pool_threads(),
                                   " pool threads")
                    : std::string("a thread per connection"))
            << ")" << (server_options.tls.has_value() ? " (TLS)" : "");
  const std::string why =
      tessera::WaitForShutdown(&service->shutdown_requested(), "request");
  LOG(INFO) << "ps " << task_index << " stopping (" << why << ")";
  tessera::ShutdownServer(server.get(), tessera::kServerShutdownGrace);
  data_plane->reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::ProcessStart start = tessera::StartProcess(
      &argc, &argv,
      "tessera_ps: parameter server. The cluster comes from TF_CONFIG, "
      "--tf_config, --ps_hosts/--worker_hosts/--chief_host with "
      "--task_type=ps --task_index=N, or (under srun) --slurm_jobs.",
      "ps");
  if (!start.cluster) return start.exit_code;
  const tessera::ClusterSpec& cluster = *start.cluster;

  // Every call to this server must carry the job's token.
  absl::StatusOr<tessera::RpcAuth> auth = tessera::RpcAuthFromFlags();
  if (!auth.ok()) {
    LOG(ERROR) << auth.status().message();
    return 2;
  }
  absl::StatusOr<tessera::DataPlaneServing> serving = ServingFromFlags();
  if (!serving.ok()) {
    LOG(ERROR) << serving.status().message();
    return 2;
  }
  RaiseDescriptors();

  absl::StatusOr<std::shared_ptr<tessera::RowMemoryBudget>> row_budget =
      RowBudgetFromFlags(cluster.own_address(), cluster.task().index);
  if (!row_budget.ok()) {
    LOG(ERROR) << row_budget.status().message();
    return 2;
  }
  if (*row_budget != nullptr) {
    LOG(INFO) << "ps: resident memory up to " << (*row_budget)->limit_bytes()
              << " bytes (" << (*row_budget)->tier_memory_bytes()
              << " of them the disk tier's), rows beyond it in "
              << (*row_budget)->disk_root();
    // Rows get what the process and the tier leave of the budget.
    const int64_t own =
        tessera::ProcessResidentBytes() + (*row_budget)->tier_memory_bytes();
    if (own > (*row_budget)->limit_bytes() / 2) {
      LOG(WARNING) << "ps: --row_memory_budget=" << FLAGS_row_memory_budget
                   << " leaves rows at most "
                   << std::max<int64_t>(0, (*row_budget)->limit_bytes() - own)
                   << " bytes: the server itself holds " << own
                   << " (its process and the disk tier's memory)";
    }
  }
  // Destroyed after the store, whose tables remove their own folders.
  absl::Cleanup remove_tier = [&row_budget] {
    if (*row_budget == nullptr) return;
    std::error_code ignored;
    std::filesystem::remove_all((*row_budget)->disk_root(), ignored);
  };
  tessera::ShardStore store(tessera::ShardStoreOptions{*row_budget});
  tessera::PsServiceOptions options;
  options.auth = *std::move(auth);
  options.task_index = cluster.task().index;
  options.chunk_bytes = FLAGS_chunk_bytes;
  tessera::PsCore core(&store);
  tessera::ParameterServerService service(&core, options);

  const std::string address = cluster.own_address();
  return Serve(
      address, start.server,
      PlaneOptions(address, start.server, options.auth.token(), *serving),
      &core, &service, options.task_index);
}
