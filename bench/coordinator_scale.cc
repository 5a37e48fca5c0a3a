// bench/coordinator_scale: the chief's scheduling at 8 to 1,024 workers.
// The real StepRunner and ClusterCoordinator run an epoch's steps (planned
// by DataPlan, scheduled with the pause window TrainingJob uses) on
// in-process fake workers (the WorkerStub seam) whose steps take
// --step_us of sleep and no CPU, so what the process spends is the chief's
// own work: its scheduling, one thread per worker, the futures, the
// figures. Per row: steps scheduled per second, the chief's CPU
// microseconds per step (getrusage over the epoch), its resident memory,
// and the heartbeat's traffic.
//
// The heartbeat asks every parameter server (not the workers) once per
// --heartbeat_s; with --ps_per_worker servers per worker its traffic is
// computed from the Health messages' serialized sizes (payload only, no
// gRPC framing): a worker adds no heartbeat traffic of its own.
//
//   bench_coordinator_scale [--workers=8,32,128,512,1024] [--mode=async]

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_main.h"
#include "common/training_mode.h"
#include "coordinator/cluster_coordinator.h"
#include "coordinator/control/job_status_board.h"
#include "coordinator/data_plan.h"
#include "coordinator/report/epoch_result.h"
#include "coordinator/report/metrics_writer.h"
#include "coordinator/step_plan.h"
#include "coordinator/step_runner.h"
#include "coordinator/worker_stub.h"
#include "gflags/gflags.h"
#include "proto/health.pb.h"

DEFINE_string(workers, "8,32,128,512,1024", "Worker counts, one row each.");
DEFINE_string(mode, "async",
              "Training modes (async, sync, ssp:S), comma-separated.");
DEFINE_int32(steps_per_worker, 40, "Steps per worker in the epoch.");
DEFINE_int32(steps_per_call, 8,
             "Async: steps a worker takes per call (the coordinator's "
             "default).");
DEFINE_int32(step_us, 500,
             "Each fake step's duration (a sleep: no CPU of the chief).");
DEFINE_double(ps_per_worker, 0.1,
              "Parameter servers per worker, for the heartbeat's traffic "
              "(0.1: 100 servers for 1,000 workers).");
DEFINE_double(heartbeat_s, 1, "Seconds between heartbeats (the default).");

namespace tessera {
namespace {

constexpr int kBatch = 4;

// A worker that trains nothing: each step sleeps --step_us and reports its
// examples.
class FakeWorker : public WorkerStub {
 public:
  absl::Status RunStep(const StepRequest& request,
                       StepResponse* response) override {
    if (FLAGS_step_us > 0) absl::SleepFor(absl::Microseconds(FLAGS_step_us));
    const int64_t n =
        static_cast<int64_t>(request.example_ids().size() / sizeof(int64_t));
    response->set_examples(n);
    response->set_correct(n / 2);
    response->set_loss(0.5f);
    return absl::OkStatus();
  }
  WorkerHealth Probe() override { return WorkerHealth::kReady; }
  absl::Status Restore() override { return absl::OkStatus(); }
};

double CpuSeconds() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// VmRSS of this process, in MiB.
double ResidentMiB() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) {
      int64_t kb = 0;
      std::vector<std::string> parts =
          absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kb)) {
        return kb / 1024.0;
      }
    }
  }
  return -1;
}

// One heartbeat's payload bytes per server: the request and a server's
// full answer.
int64_t HeartbeatBytesPerServer() {
  HealthResponse response;
  response.set_task_type("ps");
  response.set_task_index(99);
  response.set_uptime_ms(int64_t{3600} * 1000);
  response.set_num_shards(64);
  response.set_resident_bytes(int64_t{8} << 30);
  response.set_pulls_served(int64_t{1} << 30);
  response.set_pushes_served(int64_t{1} << 30);
  response.set_data_plane_port(40000);
  return static_cast<int64_t>(HealthRequest().ByteSizeLong() +
                              response.ByteSizeLong());
}

struct Row {
  int workers = 0;
  int64_t steps = 0;
  double seconds = 0;
  double cpu_seconds = 0;
  double rss_mib = 0;
};

absl::StatusOr<Row> RunOnce(int workers, const TrainingMode& mode) {
  std::vector<std::unique_ptr<WorkerStub>> stubs;
  for (int w = 0; w < workers; ++w) {
    stubs.push_back(std::make_unique<FakeWorker>());
  }
  // As TrainingJob sets them for the mode.
  CoordinatorOptions options;
  if (mode.kind == TrainingMode::Kind::kSsp) {
    options.max_staleness = mode.staleness;
  }
  options.steps_per_call =
      mode.kind == TrainingMode::Kind::kAsync ? FLAGS_steps_per_call : 1;
  ClusterCoordinator coordinator(std::move(stubs), options);
  JobStatusBoard board;
  std::FILE* devnull = std::fopen("/dev/null", "w");
  if (devnull == nullptr) return absl::InternalError("cannot open /dev/null");
  MetricsWriter metrics("", mode.ToString(), devnull);
  StepRunnerOptions runner_options;
  runner_options.mode = mode;
  runner_options.num_workers = workers;
  runner_options.epochs = 1;
  runner_options.steps_per_call = options.steps_per_call;
  StepRunner runner(&coordinator, runner_options, &board, &metrics, devnull);

  const int64_t steps = int64_t{workers} * FLAGS_steps_per_worker;
  // Sync: the global batch is kBatch per worker.
  absl::StatusOr<DataPlan> plan =
      DataPlan::Create(steps * kBatch, workers, kBatch, 0, 42);
  if (!plan.ok()) return plan.status();
  std::unique_ptr<StepPlan> data = PlanOfExamples(*std::move(plan));
  std::vector<PlannedStep> epoch = data->NextEpoch();

  Row row;
  row.workers = workers;
  row.steps = static_cast<int64_t>(epoch.size());
  const double cpu = CpuSeconds();
  const absl::Time start = absl::Now();
  EpochResult result;
  std::vector<PlannedStep> not_run;
  // With a pause, as TrainingJob runs its epochs (it keeps a window of
  // steps queued instead of the whole epoch).
  absl::Status s = runner.Run(
      std::move(epoch), 1, *data, "bench", &result, [] { return false; },
      &not_run);
  row.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  row.cpu_seconds = CpuSeconds() - cpu;
  row.rss_mib = ResidentMiB();
  std::fclose(devnull);
  if (!s.ok()) return s;
  if (result.examples != row.steps * kBatch) {
    return absl::InternalError(absl::StrCat("the epoch trained ",
                                            result.examples, " examples of ",
                                            row.steps * kBatch));
  }
  return row;
}

absl::Status Run() {
  std::vector<int> counts;
  for (absl::string_view part :
       absl::StrSplit(FLAGS_workers, ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--workers: \"", part, "\" is not a worker count"));
    }
    counts.push_back(n);
  }
  const int64_t heartbeat_bytes = HeartbeatBytesPerServer();
  std::printf(
      "fake steps of %d us, %d steps per worker, async steps_per_call %d; "
      "heartbeat: %.2f servers per worker every %.1f s, %lld payload bytes "
      "per server; %u CPU cores\n\n",
      FLAGS_step_us, FLAGS_steps_per_worker, FLAGS_steps_per_call,
      FLAGS_ps_per_worker, FLAGS_heartbeat_s,
      static_cast<long long>(heartbeat_bytes),
      std::thread::hardware_concurrency());
  std::printf(
      "| mode | workers | steps | steps/s | chief CPU us/step | RSS MiB | "
      "heartbeat calls/s | heartbeat bytes/s |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
  for (absl::string_view name :
       absl::StrSplit(FLAGS_mode, ',', absl::SkipEmpty())) {
    absl::StatusOr<TrainingMode> mode = ParseTrainingMode(std::string(name));
    if (!mode.ok()) return mode.status();
    for (int workers : counts) {
      absl::StatusOr<Row> row = RunOnce(workers, *mode);
      if (!row.ok()) return row.status();
      const double servers =
          std::max(1.0, std::ceil(workers * FLAGS_ps_per_worker));
      std::printf("| %s | %d | %lld | %.0f | %.1f | %.0f | %.0f | %.0f |\n",
                  mode->ToString().c_str(), workers,
                  static_cast<long long>(row->steps),
                  row->steps / std::max(1e-9, row->seconds),
                  row->cpu_seconds * 1e6 / std::max<int64_t>(1, row->steps),
                  row->rss_mib, servers / FLAGS_heartbeat_s,
                  servers * heartbeat_bytes / FLAGS_heartbeat_s);
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::BenchMain(
      argc, argv, "bench_coordinator_scale",
      "The chief's scheduling with 8 to 1,024 in-process fake workers.",
      tessera::Run);
}
