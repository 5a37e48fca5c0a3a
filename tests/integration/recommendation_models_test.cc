// The four recommendation job files (deploy/jobs: DLRM, DCN-v2, DeepFM,
// Wide & Deep) through the real binaries on loopback: two parameter servers
// and two asynchronous workers train each on a small generated set with
// pairwise interactions and multi-hot fields, and each must beat the
// wide-only baseline (logistic regression) by a clear margin, which can
// learn no interaction. The same job files, unchanged, train on a small
// file in Criteo's own format (8-digit hashes, missing values, negative
// counts). A checkpoint evaluated by one worker and by two gives the same
// exact AUC.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/scratch_dir.h"
#include "tests/shell_command.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string JobFile(const std::string& name) {
  return absl::StrCat(TESSERA_SOURCE_DIR, "/deploy/jobs/", name, ".textproto");
}

// The last line of a run's metrics.jsonl (an empty object if none).
nlohmann::json LastMetrics(const fs::path& run_dir) {
  std::ifstream metrics(run_dir / "metrics.jsonl");
  std::string line, last;
  while (std::getline(metrics, line)) last = line;
  if (last.empty()) return nlohmann::json::object();
  return nlohmann::json::parse(last);
}

class RecommendationModelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  // One data set and one baseline run for the whole suite.
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) /
                        absl::StrCat("tessera_recsys_it_", getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    ShellResult gen = Shell(absl::StrCat(
        BuildDir(), "/worker/tessera_ctr_gen --out_dir=", Data().string(),
        " --train_examples=40000 --test_examples=10000 --vocab_size=500",
        " --interaction_fields=8 --interaction_scale=2 --zipf_s=1.2",
        " --weight_decay_rank=5 --threads=1"));
    ASSERT_EQ(gen.exit_code, 0) << gen.output;
    wide_ = new nlohmann::json(Train("wide_only", Data(), ""));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete wide_;
  }

  static fs::path Data() { return *dir_ / "data"; }

  // Trains deploy/jobs/<name>.textproto on `data` and returns the last
  // metrics line; `flags` go to the coordinator after the job file.
  static nlohmann::json Train(const std::string& name, const fs::path& data,
                              const std::string& flags,
                              std::string* output = nullptr) {
    const fs::path run_dir = *dir_ / absl::StrCat("run_", name, "_", runs_++);
    ShellResult run = Shell(absl::StrCat(
        BuildDir(), "/deploy/local/tessera_local --num_ps=2 --num_workers=2",
        " --run_dir=", run_dir.string(), " -- --job_file=", JobFile(name),
        " --data_dir=", data.string(), " ", flags));
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_THAT(run.output, HasSubstr("test AUC"));
    if (output != nullptr) *output = run.output;
    return LastMetrics(run_dir);
  }

  static fs::path* dir_;
  static nlohmann::json* wide_;
  static int runs_;
};

fs::path* RecommendationModelsTest::dir_ = nullptr;
nlohmann::json* RecommendationModelsTest::wide_ = nullptr;
int RecommendationModelsTest::runs_ = 0;

TEST_P(RecommendationModelsTest, LearnsTheInteractionsTheBaselineCannot) {
  ASSERT_TRUE(wide_->contains("auc")) << *wide_;
  std::string output;
  const nlohmann::json m = Train(GetParam(), Data(), "", &output);
  ASSERT_TRUE(m.contains("auc")) << output;
  const double auc = m["auc"].get<double>();
  const double wide = (*wide_)["auc"].get<double>();
  const double best = m["best_auc"].get<double>();
  std::printf("%s: AUC %.4f, wide-only %.4f, best %.4f\n", GetParam().c_str(),
              auc, wide, best);
  EXPECT_GT(auc, wide + 0.02) << output;
  EXPECT_LE(auc, best + 0.01);
  EXPECT_EQ(m["examples"].get<int64_t>(), 40000);
}

INSTANTIATE_TEST_SUITE_P(JobFiles, RecommendationModelsTest,
                         ::testing::Values("dlrm", "dcn_v2", "deepfm",
                                           "wide_deep"));

// A file in Criteo's own layout: 8-hex-digit hashes (as the Kaggle set),
// missing values in any column, a negative count; multi-hot values in the
// first two fields (the job files read up to 4 ids there).
void WriteCriteoLikeFile(const fs::path& path, int lines, uint32_t seed) {
  std::mt19937 rng(seed);
  std::ofstream out(path);
  for (int i = 0; i < lines; ++i) {
    // Clicks follow C3's id and I1, so there is something to learn.
    const int c3 = static_cast<int>(rng() % 20);
    const int i1 = static_cast<int>(rng() % 10);
    const bool click = (c3 < 6) != (rng() % 10 == 0) || i1 == 9;
    out << (click ? 1 : 0);
    for (int j = 0; j < 13; ++j) {
      out << '\t';
      if (rng() % 10 == 0) continue;  // missing
      if (j == 0) {
        out << i1;
      } else if (j == 1 && rng() % 50 == 0) {
        out << -1;
      } else {
        out << rng() % 1000;
      }
    }
    for (int f = 0; f < 26; ++f) {
      out << '\t';
      if (f != 2 && rng() % 12 == 0) continue;  // missing
      const int ids = f < 2 ? 1 + static_cast<int>(rng() % 3) : 1;
      for (int k = 0; k < ids; ++k) {
        if (k > 0) out << ',';
        const uint32_t value =
            f == 2 ? 0x68fd1e00u + c3 : 0x1000000u * f + rng() % 300;
        out << absl::StrFormat("%08x", value);
      }
    }
    out << '\n';
  }
}

TEST(RecommendationJobFilesTest, RunUnchangedOnCriteoFormatFiles) {
  const fs::path dir =
      ScratchDir(absl::StrCat("tessera_recsys_criteo_", getpid()));
  WriteCriteoLikeFile(dir / "train.tsv", 3000, 1);
  WriteCriteoLikeFile(dir / "test.tsv", 1000, 2);
  for (const char* name : {"dlrm", "dcn_v2", "deepfm", "wide_deep"}) {
    SCOPED_TRACE(name);
    const fs::path run_dir = dir / absl::StrCat("run_", name);
    ShellResult run = Shell(absl::StrCat(
        BuildDir(), "/deploy/local/tessera_local --num_ps=2 --num_workers=2",
        " --run_dir=", run_dir.string(), " -- --job_file=", JobFile(name),
        " --data_dir=", dir.string(), " --epochs=4 --batch_size=32"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    // No meta.json: the best achievable AUC is unknown.
    EXPECT_THAT(run.output, HasSubstr("best achievable unknown"));
    const nlohmann::json m = LastMetrics(run_dir);
    ASSERT_TRUE(m.contains("auc")) << run.output;
    EXPECT_GT(m["auc"].get<double>(), 0.75) << run.output;
    EXPECT_EQ(m["examples"].get<int64_t>(), 3000);
  }
  fs::remove_all(dir);
}

// What the reference models need from the embedding side, in one job:
// tables of different vocabularies (fixed ones split by the partitioner
// and a growing one) and dimensions, one table shared by two fields, a
// mean-combined multi-hot field, and a table with its own optimizer.
TEST(RecommendationJobFilesTest, TablesOfDifferentShapesAndOptimizersTrain) {
  const fs::path dir =
      ScratchDir(absl::StrCat("tessera_recsys_tables_", getpid()));
  ShellResult gen = Shell(absl::StrCat(
      BuildDir(), "/worker/tessera_ctr_gen --out_dir=", (dir / "data").string(),
      " --train_examples=20000 --test_examples=4000 --fields=4 --dense=2",
      " --vocab_size=300 --multi_hot_fields=1 --multi_hot=3 --combiner=mean",
      " --threads=1"));
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  const fs::path job = dir / "tables.textproto";
  std::ofstream(job) << R"pb(
    model_def {
      inputs {
        name: "C1"
        sparse { max_hotness: 3 vocab_size: 5000 }
      }
      inputs {
        name: "C2"
        sparse { vocab_size: 700 }
      }
      inputs {
        name: "C3"
        sparse { vocab_size: 700 }
      }
      inputs {
        name: "C4"
        sparse {}
      }
      inputs {
        name: "dense"
        dense { shape: [ 2 ] }
      }
      label { kind: BINARY }
      layers {
        name: "multi_hot"
        inputs: "C1"
        embedding_bag { dim: 4 combiner: MEAN }
      }
      layers {
        name: "shared"
        inputs: [ "C2", "C3" ]
        embedding_bag { table: "pair" dim: 8 }
      }
      layers {
        name: "shared_flat"
        inputs: "shared"
        flatten {}
      }
      layers {
        name: "hashed"
        inputs: "C4"
        embedding_bag { dim: 2 }
      }
      layers {
        name: "h"
        inputs: [ "multi_hot", "shared_flat", "hashed", "dense" ]
        dense { units: 16 activation: RELU }
      }
      layers {
        name: "logit"
        inputs: "h"
        dense { units: 1 }
      }
      loss { kind: SIGMOID_CROSS_ENTROPY input: "logit" }
      metrics: [ AUC ]
    }
    data { format: "criteo" }
    optimizer {
      learning_rate: 0.003
      adam {}
    }
    embedding_optimizer {
      learning_rate: 0.1
      adagrad {}
    }
    table_optimizers {
      key: "hashed"
      value {
        learning_rate: 0.05
        sgd {}
      }
    }
    partitioner { kind: "fixed" num_shards: 2 }
    schedule { epochs: 3 batch_size: 128 seed: 3 }
  )pb";
  const std::string flags = absl::StrCat(
      " -- --job_file=", job.string(), " --data_dir=", (dir / "data").string());
  ShellResult dry = Shell(absl::StrCat(
      BuildDir(), "/coordinator/tessera_coordinator --job_file=", job.string(),
      " --data_dir=", (dir / "data").string(), " --dry_run",
      " --chief_host=localhost:1 --ps_hosts=localhost:2,localhost:3",
      " --worker_hosts=localhost:4 --task_type=chief --task_index=0"));
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  // Fixed tables split in two by the partitioner, the growing one a shard
  // per server.
  EXPECT_THAT(dry.output, HasSubstr("[2500..5000)  [2500,4]"));
  EXPECT_THAT(dry.output, HasSubstr("[350..700)    [350,8]"));
  EXPECT_THAT(dry.output, HasSubstr("hashed/part_1"));
  EXPECT_THAT(dry.output, HasSubstr("kernel/part_0"));
  // Hybrid (#30): the dense variables stay on the workers; the servers
  // get the tables alone.
  ShellResult hybrid = Shell(absl::StrCat(
      BuildDir(), "/coordinator/tessera_coordinator --job_file=", job.string(),
      " --data_dir=", (dir / "data").string(), " --dry_run --mode=hybrid",
      " --chief_host=localhost:1 --ps_hosts=localhost:2,localhost:3",
      " --worker_hosts=localhost:4 --task_type=chief --task_index=0"));
  ASSERT_EQ(hybrid.exit_code, 0) << hybrid.output;
  EXPECT_THAT(hybrid.output, HasSubstr("replicated on every worker"));
  EXPECT_THAT(hybrid.output, Not(HasSubstr("kernel/part_0")));
  // By size: the 5000 x 4 table (80000 bytes) stays sharded, the 700 x 8
  // one (22400 bytes) is replicated and has no shards; a growing table is
  // always sharded. Each lazy, the default (table_updates).
  EXPECT_THAT(hybrid.output,
              HasSubstr("multi_hot  sharded          80000  lazy     larger "
                        "than 64 KiB (replicate_tables_below)"));
  EXPECT_THAT(hybrid.output,
              HasSubstr("pair       replicated       22400  lazy     at most "
                        "64 KiB (replicate_tables_below)"));
  EXPECT_THAT(hybrid.output,
              HasSubstr("hashed     sharded        growing  lazy"));
  EXPECT_THAT(hybrid.output, HasSubstr("[2500..5000)  [2500,4]"));
  EXPECT_THAT(hybrid.output, Not(HasSubstr("pair/part_0")));
  EXPECT_THAT(hybrid.output, HasSubstr("hashed/part_1"));
  const fs::path run_dir = dir / "run";
  ShellResult run = Shell(absl::StrCat(
      BuildDir(), "/deploy/local/tessera_local --num_ps=2 --num_workers=2",
      " --run_dir=", run_dir.string(), flags));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json m = LastMetrics(run_dir);
  ASSERT_TRUE(m.contains("auc")) << run.output;
  EXPECT_GT(m["auc"].get<double>(), 0.6) << run.output;
  // The same tables in hybrid:sync: one replicated, two sharded, each with
  // its own optimizer.
  const fs::path hybrid_dir = dir / "hybrid";
  ShellResult trained = Shell(absl::StrCat(
      BuildDir(), "/deploy/local/tessera_local --num_ps=2 --num_workers=2",
      " --run_dir=", hybrid_dir.string(), flags, " --mode=hybrid:sync"));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const nlohmann::json h = LastMetrics(hybrid_dir);
  ASSERT_TRUE(h.contains("auc")) << trained.output;
  EXPECT_EQ(h["mode"], "hybrid:sync");
  EXPECT_GT(h["auc"].get<double>(), 0.6) << trained.output;
  fs::remove_all(dir);
}

// The AUC is exact over every test prediction, gathered from all workers
// and sorted once: a checkpoint evaluated by one worker or by two gives the
// same figure to the last digit.
TEST(RecommendationJobFilesTest, CheckpointAucDoesNotDependOnWorkerCount) {
  const fs::path dir =
      ScratchDir(absl::StrCat("tessera_recsys_eval_", getpid()));
  ShellResult gen = Shell(absl::StrCat(
      BuildDir(), "/worker/tessera_ctr_gen --out_dir=", (dir / "data").string(),
      " --train_examples=6000 --test_examples=3001 --vocab_size=300",
      " --interaction_fields=4 --threads=1"));
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  const std::string common = absl::StrCat(
      " -- --job_file=", JobFile("deepfm"),
      " --data_dir=", (dir / "data").string(),
      " --checkpoint_dir=", (dir / "ckpt").string(), " --epochs=1");
  ShellResult train = Shell(absl::StrCat(
      BuildDir(), "/deploy/local/tessera_local --num_ps=2 --num_workers=2",
      common));
  ASSERT_EQ(train.exit_code, 0) << train.output;
  std::map<int, std::string> auc_line;
  for (int workers : {1, 2, 3}) {
    ShellResult eval = Shell(absl::StrCat(
        BuildDir(), "/deploy/local/tessera_local --num_ps=2 --num_workers=",
        workers, common, " --evaluate_only"));
    ASSERT_EQ(eval.exit_code, 0) << eval.output;
    EXPECT_THAT(eval.output,
                HasSubstr(absl::StrCat("on 3001 test examples with ", workers,
                                       " workers")));
    const size_t at = eval.output.find("evaluated: test AUC");
    ASSERT_NE(at, std::string::npos) << eval.output;
    auc_line[workers] = eval.output.substr(at, eval.output.find('\n', at) - at);
  }
  EXPECT_EQ(auc_line[1], auc_line[2]);
  EXPECT_EQ(auc_line[1], auc_line[3]);
  // Nothing to evaluate is an error, not a zero.
  ShellResult empty = Shell(absl::StrCat(
      BuildDir(), "/deploy/local/tessera_local --num_ps=1 --num_workers=1",
      " -- --job_file=", JobFile("deepfm"),
      " --data_dir=", (dir / "data").string(),
      " --checkpoint_dir=", (dir / "none").string(), " --evaluate_only"));
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_THAT(empty.output, HasSubstr("no checkpoint to evaluate"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera
