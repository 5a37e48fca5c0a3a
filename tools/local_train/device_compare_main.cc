// Trains a job file for some steps on the CPU and on the GPU from the same
// seed, batches and dropout masks (tools/local_train/local_trainer.h), and
// prints the largest difference of the per-step losses and of the dense
// parameters after the last step. deploy/gpu_check.sh runs it for every
// job file in deploy/jobs/.
//
//   build/worker/tools/tessera_device_compare --steps=20
//       --job_file=deploy/jobs/cnn_fashion_mnist.textproto
//
// Exit code 0 when both ran and the differences are within --tolerance
// (relative to the largest value), 1 otherwise (no GPU included), 2 for a
// bad job.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/job_file.h"
#include "gflags/gflags.h"
#include "tools/local_train/local_trainer.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/cuda_backend.h"

DEFINE_string(job_file, "", "A text-format JobConfig (proto/job.proto).");
DEFINE_string(data_dir, "", "Read the job's data from this folder instead.");
DEFINE_int64(steps, 20, "Training steps on each device.");
DEFINE_int64(train_examples, 20000, "Examples loaded (0: the job's cap).");
DEFINE_string(against, "cuda",
              "What the CPU is compared with: cuda (cuda:0), or cpu (a second "
              "CPU backend: gpu_check.sh --rehearse, where no GPU is).");
DEFINE_double(tolerance, 1e-3,
              "Largest accepted difference, relative to the largest value.");

namespace tessera {
namespace {

int Fail(int code, const absl::Status& status) {
  std::fprintf(stderr, "tessera_device_compare: %s\n",
               std::string(status.message()).c_str());
  return code;
}

int Run() {
  absl::StatusOr<JobConfig> job = ReadJobFile(FLAGS_job_file);
  if (!job.ok()) return Fail(2, job.status());
  if (!FLAGS_data_dir.empty()) SetDataDir(FLAGS_data_dir, job->mutable_data());
  if (FLAGS_train_examples > 0) {
    job->mutable_data()->set_train_examples(FLAGS_train_examples);
  }
  job->mutable_data()->set_test_examples(1);
  absl::StatusOr<std::unique_ptr<Backend>> gpu =
      FLAGS_against == "cpu" ? absl::StatusOr<std::unique_ptr<Backend>>(
                                   std::make_unique<CpuBackend>())
      : FLAGS_against == "cuda"
          ? NewCudaBackend(0)
          : absl::InvalidArgumentError(absl::StrCat(
                "--against must be cuda or cpu, got \"", FLAGS_against, "\""));
  if (absl::IsInvalidArgument(gpu.status())) return Fail(2, gpu.status());
  if (!gpu.ok()) return Fail(1, gpu.status());
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<LocalTrainer>> on_cpu =
      LocalTrainer::Create(*job, &cpu);
  if (!on_cpu.ok()) return Fail(2, on_cpu.status());
  absl::StatusOr<std::unique_ptr<LocalTrainer>> on_gpu =
      LocalTrainer::Create(*job, gpu->get());
  if (!on_gpu.ok()) return Fail(1, on_gpu.status());
  absl::StatusOr<std::vector<double>> cpu_losses =
      (*on_cpu)->TrainSteps(FLAGS_steps);
  if (!cpu_losses.ok()) return Fail(1, cpu_losses.status());
  absl::StatusOr<std::vector<double>> gpu_losses =
      (*on_gpu)->TrainSteps(FLAGS_steps);
  if (!gpu_losses.ok()) return Fail(1, gpu_losses.status());
  double loss_diff = 0, loss_scale = 1e-30;
  for (size_t i = 0; i < cpu_losses->size(); ++i) {
    loss_diff =
        std::max(loss_diff, std::fabs((*cpu_losses)[i] - (*gpu_losses)[i]));
    loss_scale = std::max(loss_scale, std::fabs((*cpu_losses)[i]));
  }
  const auto a = (*on_cpu)->DenseValues(), b = (*on_gpu)->DenseValues();
  double param_diff = 0, param_scale = 1e-30;
  std::string worst;
  for (size_t v = 0; v < a.size(); ++v) {
    for (size_t j = 0; j < a[v].second.size(); ++j) {
      const double d = std::fabs(a[v].second[j] - b[v].second[j]);
      param_scale = std::max(param_scale, std::fabs(double{a[v].second[j]}));
      if (d > param_diff) {
        param_diff = d;
        worst = a[v].first;
      }
    }
  }
  const bool ok = loss_diff <= FLAGS_tolerance * loss_scale &&
                  param_diff <= FLAGS_tolerance * param_scale;
  std::printf(
      "%s: %zu steps, final loss cpu %.6f %s %.6f; max |loss diff| %.3g; "
      "max |parameter diff| %.3g (%s, largest |value| %.3g): %s\n",
      FLAGS_job_file.c_str(), cpu_losses->size(), cpu_losses->back(),
      FLAGS_against.c_str(), gpu_losses->back(), loss_diff, param_diff,
      worst.c_str(), param_scale, ok ? "OK" : "DIFFERENT");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Trains a job file on the CPU and the GPU and compares the results");
  tessera::ParseCommandLineOrExit(&argc, &argv);
  return tessera::Run();
}
