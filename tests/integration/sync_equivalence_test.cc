// The golden test of synchronous training with tables (#30): N workers of
// batch b in sync mode train exactly what one process training the global
// batch N * b trains. Two parameter servers and two workers run through
// tessera_local (real processes, real gRPC and TCP data plane on loopback)
// on generated click data; the one-process trainer (tools/local_train/
// local_trainer.h, the parameter servers' own shards and optimizers) is fed
// the same global batches, which the coordinator's data plan rebuilt here
// gives. Every global step's loss must agree: dense layers (Adam) and table
// rows (Adagrad) are both updated before the next step's loss is taken, so a
// row or dense update that differs shows in the losses that follow.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job_file.h"
#include "common/model/model_presets.h"
#include "coordinator/data_plan.h"
#include "coordinator/global_steps.h"
#include "data/example_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/scratch_dir.h"
#include "tests/shell_command.h"
#include "tools/local_train/local_trainer.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr int kWorkers = 2;
constexpr int64_t kBatch = 128;  // global: 64 per worker of two
constexpr int kEpochs = 2;
// 12 full global steps and a last one of 41 + 40 examples per epoch: the
// parts of that one differ, and the coordinator's sync_scale must weigh
// every example alike for the next epoch's losses to agree.
constexpr int64_t kExamples = kBatch * 12 + 81;
constexpr int64_t kStepsPerEpoch = 13;
// Float tolerance of a step's mean loss, relative. The cluster computes
// each worker's part of the batch apart and the servers average the parts
// in double; one process sums the global batch at once. Measured: at most
// 5e-8 (float rounding of the loss) over 26 steps of DLRM and DeepFM.
constexpr double kTolerance = 1e-6;

// (job file, mode): sync keeps every variable on the servers; hybrid:sync
// all-reduces the dense ones between the workers' replicas and aggregates
// the rows on the servers. Both must train what one process trains.
class SyncEquivalenceTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  const std::string& Job() const { return std::get<0>(GetParam()); }
  const std::string& Mode() const { return std::get<1>(GetParam()); }

  void SetUp() override {
    std::string mode = Mode();
    std::replace(mode.begin(), mode.end(), ':', '_');
    dir_ = ScratchDir(
        absl::StrCat("tessera_sync_eq_", getpid(), "_", Job(), "_", mode));
    ShellResult gen = Shell(absl::StrCat(
        BuildDir(), "/worker/tessera_ctr_gen --out_dir=", Data().string(),
        " --train_examples=", kExamples, " --test_examples=512",
        " --vocab_size=500 --interaction_fields=8 --interaction_scale=2",
        " --zipf_s=1.2 --weight_decay_rank=5 --threads=1"));
    ASSERT_EQ(gen.exit_code, 0) << gen.output;
  }

  fs::path Data() const { return dir_ / "data"; }
  std::string JobFile() const {
    return absl::StrCat(TESSERA_SOURCE_DIR, "/deploy/jobs/", Job(),
                        ".textproto");
  }

  // Step id -> the part's mean loss and examples.
  using Parts = std::map<int64_t, std::pair<double, int64_t>>;
  // Runs the job in the mode with `workers` workers (and the clipping flag
  // `global_clip_norm`, 0: none) into `run_dir`; *parts from its step log.
  void RunCluster(int workers, double global_clip_norm, const fs::path& run_dir,
                  Parts* parts);
  void Compare(int workers, double global_clip_norm);

  fs::path dir_;
};

void SyncEquivalenceTest::RunCluster(int workers, double global_clip_norm,
                                     const fs::path& run_dir, Parts* parts) {
  ShellResult run = Shell(absl::StrCat(
      BuildDir(), "/deploy/local/tessera_local --num_ps=2 --num_workers=",
      workers, " --run_dir=", run_dir.string(), " -- --job_file=", JobFile(),
      " --data_dir=", Data().string(), " --mode=", Mode(),
      " --epochs=", kEpochs, " --batch_size=", kBatch,
      " --train_examples=", kExamples, " --test_examples=512",
      global_clip_norm > 0
          ? absl::StrCat(" --global_clip_norm=", global_clip_norm)
          : std::string()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream steps(run_dir / "steps.jsonl");
  for (std::string line; std::getline(steps, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    (*parts)[j["step"].get<int64_t>()] = {j["loss"].get<double>(),
                                          j["examples"].get<int64_t>()};
  }
  ASSERT_EQ(parts->size(),
            static_cast<size_t>(kEpochs * kStepsPerEpoch * workers))
      << run.output;
}

// Runs the cluster (RunCluster) and holds every global step's loss to
// one process's on the same global batches, trained with the same
// clipping; with clipping, the one process's losses must also differ from
// an unclipped run's, so the comparison tests the clipping.
void SyncEquivalenceTest::Compare(int workers, double global_clip_norm) {
  // The cluster: the mode's synchronous steps, two epochs.
  Parts parts;
  ASSERT_NO_FATAL_FAILURE(
      RunCluster(workers, global_clip_norm, dir_ / "run", &parts));

  // One process on the same global batches.
  absl::StatusOr<JobConfig> job = ReadJobFile(JobFile());
  ASSERT_TRUE(job.ok()) << job.status();
  SetDataDir(Data().string(), job->mutable_data());
  job->mutable_data()->set_train_examples(kExamples);
  job->mutable_data()->set_test_examples(512);
  job->mutable_schedule()->set_batch_size(kBatch);
  // The unclipped job, then the clipping as the flag sets it: every
  // optimizer's.
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<LocalTrainer>> unclipped =
      LocalTrainer::Create(*job, &cpu);
  ASSERT_TRUE(unclipped.ok()) << unclipped.status();
  if (global_clip_norm > 0) {
    GradientClipping clipping;
    clipping.set_global_norm(static_cast<float>(global_clip_norm));
    *job->mutable_optimizer()->mutable_clipping() = clipping;
    if (job->has_embedding_optimizer()) {
      *job->mutable_embedding_optimizer()->mutable_clipping() = clipping;
    }
    for (auto& [table, optimizer] : *job->mutable_table_optimizers()) {
      *optimizer.mutable_clipping() = clipping;
    }
  }
  absl::StatusOr<std::unique_ptr<LocalTrainer>> trainer =
      LocalTrainer::Create(*job, &cpu);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  absl::StatusOr<ModelDef> model = JobModel(*job);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<ExampleSet>> examples =
      LoadExamples(job->data(), *model, /*train=*/true, 0, kExamples);
  ASSERT_TRUE(examples.ok()) << examples.status();
  // The coordinator's plan: each worker's shard, batches of kBatch / N.
  absl::StatusOr<DataPlan> plan = DataPlan::Create(
      kExamples, workers, kBatch / workers, 0, job->schedule().seed());
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::vector<PlannedStep>> rounds;
  for (int e = 0; e < kEpochs; ++e) {
    std::vector<std::vector<PlannedStep>> epoch =
        GroupIntoGlobalSteps(plan->NextEpoch(), workers, false);
    ASSERT_EQ(epoch.size(), static_cast<size_t>(kStepsPerEpoch));
    for (auto& round : epoch) rounds.push_back(std::move(round));
  }

  double worst = 0, clipping_changed = 0;
  int64_t id = 0;  // step ids run through the rounds in order
  const int64_t total = static_cast<int64_t>(rounds.size());
  for (int64_t g = 0; g < total; ++g) {
    std::vector<int64_t> ids;
    double loss_sum = 0;
    for (const PlannedStep& part : rounds[g]) {
      ids.insert(ids.end(), part.example_ids.begin(), part.example_ids.end());
      const auto& [loss, n] = parts[id++];
      ASSERT_EQ(n, static_cast<int64_t>(part.example_ids.size()));
      loss_sum += loss * n;
    }
    const double cluster = loss_sum / static_cast<double>(ids.size());
    HostBatch batch;
    ASSERT_TRUE((*examples)->Gather(ids, &batch).ok());
    absl::StatusOr<GraphResult> r = (*trainer)->TrainBatch(batch);
    ASSERT_TRUE(r.ok()) << r.status();
    const double one = r->loss_sum / static_cast<double>(ids.size());
    absl::StatusOr<GraphResult> u = (*unclipped)->TrainBatch(batch);
    ASSERT_TRUE(u.ok()) << u.status();
    clipping_changed =
        std::max(clipping_changed, std::abs(u->loss_sum - r->loss_sum) /
                                       std::max(1e-3, r->loss_sum));
    const double diff = std::abs(cluster - one) / std::max(1e-3, std::abs(one));
    worst = std::max(worst, diff);
    if (g < 2 || g % kStepsPerEpoch >= kStepsPerEpoch - 1 ||
        g % kStepsPerEpoch == 0) {
      std::printf(
          "%s %s step %2lld (%zu examples): cluster %.7f  one process "
          "%.7f  rel %.2e\n",
          Job().c_str(), Mode().c_str(), static_cast<long long>(g), ids.size(),
          cluster, one, diff);
    }
    EXPECT_LE(diff, kTolerance) << "global step " << g << ": " << Mode() << " "
                                << cluster << ", one process " << one;
  }
  std::printf("%s %s: %lld global steps, largest relative difference %.2e\n",
              Job().c_str(), Mode().c_str(), static_cast<long long>(total),
              worst);
  if (global_clip_norm > 0) {
    std::printf("%s %s: clipping changed one process's losses by up to %.2e\n",
                Job().c_str(), Mode().c_str(), clipping_changed);
    EXPECT_GT(clipping_changed, 1e-4) << "the clipping did nothing here";
  }
}

TEST_P(SyncEquivalenceTest, SyncStepsEqualOneProcessOnTheGlobalBatch) {
  Compare(kWorkers, 0);
}

// Issue #44: in sync the servers clip each global step by the global
// batch's norm (here one worker's); in hybrid:sync the replica clips the
// dense variables after the all-reduce and the servers the tables. The
// cluster trains what one process trains with the same --global_clip_norm
// (dense layers and tables are each their optimizer's group).
TEST_P(SyncEquivalenceTest, OneWorkerWithGlobalClipNormEqualsOneProcess) {
  Compare(1, 0.05);
}

// Issue #44: with two workers the global norm is still the global batch's
// gradient's, each variable's shards spread over two servers: the servers'
// partial squared norms of a global step meet at the coordinator before
// any server applies the step (coordinator/step_norm_exchange.h), so the
// cluster trains what one process clipping the global batch trains. 0.05
// binds on every step here (the one process's losses move by up to 4e-2).
TEST_P(SyncEquivalenceTest, TwoWorkersWithGlobalClipNormEqualOneProcess) {
  Compare(kWorkers, 0.05);
}

// The same clipped run twice gives the same losses bit for bit: each
// server's partial norms are summed in shard order (rows by id), the
// servers' in server order, all in double.
TEST_P(SyncEquivalenceTest, GlobalClipNormRunsAreBitIdentical) {
  if (Job() != "dlrm") GTEST_SKIP() << "one model is enough";
  Parts first, second;
  ASSERT_NO_FATAL_FAILURE(RunCluster(kWorkers, 0.05, dir_ / "a", &first));
  ASSERT_NO_FATAL_FAILURE(RunCluster(kWorkers, 0.05, dir_ / "b", &second));
  for (const auto& [step, part] : first) {
    ASSERT_TRUE(second.count(step)) << "step " << step;
    EXPECT_EQ(part.first, second[step].first) << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(
    JobFilesAndModes, SyncEquivalenceTest,
    ::testing::Combine(::testing::Values("dlrm", "deepfm"),
                       ::testing::Values("sync", "hybrid:sync")),
    [](const ::testing::TestParamInfo<SyncEquivalenceTest::ParamType>& info) {
      std::string mode = std::get<1>(info.param);
      std::replace(mode.begin(), mode.end(), ':', '_');
      return std::get<0>(info.param) + "_" + mode;
    });

}  // namespace
}  // namespace tessera
