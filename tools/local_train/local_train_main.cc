// Trains any job file in one process with no network (tools/local_train/
// local_trainer.h): the reference a distributed run of the same job is
// held to, and a quick way to try a model description.
//
//   build/worker/tools/tessera_local_train --epochs=1
//       --job_file=deploy/jobs/cnn_fashion_mnist.textproto
//
// Prints one line per epoch (train and test loss and accuracy, AUC and log
// loss for a click model, examples/s) and a progress line on stderr. Exit
// codes as every tool's (common/exit_code.h): 2 for a bad job or a data
// file that is not there (nothing trained), 1 for a failure a retry might
// fix.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/command_line.h"
#include "common/exit_code.h"
#include "common/job_file.h"
#include "common/progress_line.h"
#include "gflags/gflags.h"
#include "tools/local_train/local_trainer.h"
#include "worker/backend/cpu/cpu_backend.h"

DEFINE_string(job_file, "", "A text-format JobConfig (proto/job.proto).");
DEFINE_string(data_dir, "",
              "Read the job's data format from this folder instead (the "
              "four IDX files, or train.tsv and test.tsv).");
DEFINE_int32(epochs, 0, "Epochs to train (0: the job's).");
DEFINE_int32(batch_size, 0, "Examples per step (0: the job's).");
DEFINE_int64(train_examples, -1,
             "Use only the first N training examples (-1: the job's cap).");
DEFINE_int64(test_examples, -1,
             "Use only the first N test examples (-1: the job's cap).");
DEFINE_string(init_checkpoint, "",
              "Start from the newest checkpoint under this root (e.g. "
              "tessera_keras import --checkpoint_out: a Keras model's own "
              "initial values) instead of the job's initializers.");
DEFINE_bool(step_losses, false,
            "Also print every step's mean loss (before its update) as "
            "\"step <n> loss <x>\" with 9 significant digits, to hold the "
            "steps to another trainer's (Keras: keras_training_check.sh).");
DEFINE_string(checkpoint_dir, "",
              "Write a checkpoint of the trained model under this root after "
              "the last epoch (one parameter server's layout), for "
              "tessera_export and tessera_predict.");

namespace tessera {
namespace {

int Fail(const absl::Status& status) {
  return ExitWith("tessera_local_train", status);
}

int Run() {
  if (FLAGS_job_file.empty()) {
    return Fail(absl::InvalidArgumentError("--job_file is required"));
  }
  absl::StatusOr<JobConfig> job = ReadJobFile(FLAGS_job_file);
  if (!job.ok()) return Fail(job.status());
  if (!FLAGS_data_dir.empty()) SetDataDir(FLAGS_data_dir, job->mutable_data());
  ScheduleConfig* schedule = job->mutable_schedule();
  if (FLAGS_epochs > 0) schedule->set_epochs(FLAGS_epochs);
  if (FLAGS_batch_size > 0) schedule->set_batch_size(FLAGS_batch_size);
  if (FLAGS_train_examples >= 0) {
    job->mutable_data()->set_train_examples(FLAGS_train_examples);
  }
  if (FLAGS_test_examples >= 0) {
    job->mutable_data()->set_test_examples(FLAGS_test_examples);
  }
  if (schedule->epochs() < 1) schedule->set_epochs(1);
  if (schedule->batch_size() < 1) schedule->set_batch_size(64);
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<LocalTrainer>> trainer =
      LocalTrainer::Create(*job, &cpu);
  if (!trainer.ok()) return Fail(trainer.status());
  if (!FLAGS_init_checkpoint.empty()) {
    if (absl::Status s = (*trainer)->WarmStart(FLAGS_init_checkpoint);
        !s.ok()) {
      return Fail(absl::Status(
          s.code(), absl::StrCat("--init_checkpoint: ", s.message())));
    }
  }
  int64_t steps = 0;
  const int64_t total = (*trainer)->train_size();
  std::printf(
      "epoch  train_loss  train_acc  test_loss  test_acc     auc  log_loss  "
      "   ex/s\n");
  // Redrawn on a terminal; plain lines in a log file or a Slurm output.
  ProgressLine progress_line(stderr);
  for (int epoch = 1; epoch <= schedule->epochs(); ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    auto progress = [&](int64_t done, double loss) {
      const double secs = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count();
      if (FLAGS_step_losses) {
        std::printf("step %lld loss %.9g\n", static_cast<long long>(++steps),
                    (*trainer)->last_step_loss());
        std::fflush(stdout);
      }
      const double rate = done / std::max(secs, 1e-9);
      progress_line.Update(
          absl::StrFormat("epoch %d %6.1f%%  %8.0f ex/s  loss %.4f  ETA %4.0fs",
                          epoch, 100.0 * done / std::max<int64_t>(1, total),
                          rate, loss, (total - done) / std::max(rate, 1.0)));
    };
    absl::StatusOr<LocalEpoch> r = (*trainer)->RunEpoch(epoch, progress);
    progress_line.Finish();
    if (!r.ok()) return Fail(r.status());
    std::printf(
        "%-5d  %10.4f  %9.4f  %9.4f  %8.4f  %6s  %8s  %7.0f\n", epoch,
        r->train_loss, r->train_accuracy, r->test_loss, r->test_accuracy,
        r->auc >= 0 ? std::to_string(r->auc).substr(0, 6).c_str() : "-",
        r->log_loss >= 0 ? std::to_string(r->log_loss).substr(0, 6).c_str()
                         : "-",
        r->examples / std::max(r->seconds, 1e-9));
    std::fflush(stdout);
  }
  if (!FLAGS_checkpoint_dir.empty()) {
    absl::StatusOr<std::string> saved =
        (*trainer)->SaveCheckpoint(FLAGS_checkpoint_dir, schedule->epochs());
    if (!saved.ok()) return Fail(saved.status());
    std::printf("checkpoint %s\n", saved->c_str());
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage("Trains a job file in one process with no network");
  tessera::ParseCommandLineOrExit(&argc, &argv);
  return tessera::Run();
}
