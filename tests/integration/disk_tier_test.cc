// The disk tier for rows in a real job (issue #43 item 6): a sync job with
// a growing fp16 table on two parameter servers whose --row_memory_budget
// is far below the table, so rows go to disk and come back all along,
// ends with the bits of the same job with every row in memory, also when
// ps-1 is killed in the middle of a spill (rows written to disk, not yet
// freed in memory; common/process/fault_point.h) in the second epoch,
// restarted with an empty tier and restored from the first epoch's
// checkpoint, which it saved with most of its rows on disk.

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/scratch_dir.h"
#include "tests/shell_command.h"
#include "tools/export/trained_model.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class DiskTierJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ScratchDir(absl::StrCat("tessera_disk_tier_", getpid()));
    for (const char* split : {"train", "test"}) {
      std::ofstream csv(dir_ / absl::StrCat(split, ".csv"));
      csv << "big,x_0,x_1,label\n";
      const bool train = split[1] == 'r';
      uint32_t state = train ? 4242u : 99u;
      auto next = [&] {
        state = state * 1664525u + 1013904223u;
        return static_cast<double>(state >> 8) / (1 << 24);
      };
      for (int i = 0; i < (train ? 8192 : 256); ++i) {
        // 20,000 ids: about 3,300 rows per server, 50 per stripe of its
        // table, where a stripe's first block holds 16.
        const int64_t id = static_cast<int64_t>(20000 * next());
        double logit = (id % 3) * 0.5 - 0.5;
        csv << id * 1000003 + 17;
        for (int k = 0; k < 2; ++k) {
          const double x = next() * 2 - 1;
          logit += (k + 1) * x;
          csv << "," << x;
        }
        csv << "," << (next() < 1 / (1 + std::exp(-logit)) ? 1 : 0) << "\n";
      }
    }
    std::ofstream(dir_ / "job.textproto") << absl::StrCat(
        R"pb(
          model_def {
            inputs {
              name: "big"
              sparse {}
            }
            inputs {
              name: "x"
              dense { shape: [ 2 ] }
            }
            label { kind: BINARY }
            layers {
              name: "grown"
              inputs: "big"
              embedding_bag { dim: 4 }
            }
            layers {
              name: "hidden"
              inputs: [ "grown", "x" ]
              dense { units: 8 activation: RELU }
            }
            layers {
              name: "out"
              inputs: "hidden"
              dense { units: 1 }
            }
            loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
          }
          data { format: "csv" label_feature: "label"
                 csv { sparse_type: "int" }
                 shuffle_buffer: 1)pb",
        "\n train_files: \"", (dir_ / "train.csv").string(), "\"",
        "\n test_files: \"", (dir_ / "test.csv").string(), "\"\n}\n",
        "optimizer { learning_rate: 0.01 adam { beta1: 0.9 beta2: 0.999 "
        "epsilon: 1e-7 } }\n",
        "embedding_optimizer { learning_rate: 0.1 rowwise_adagrad { "
        "initial_accumulator_value: 0.1 } }\n",
        "table_precision: ROW_FP16\n",
        "schedule { epochs: 2 batch_size: 64 seed: 42 }\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // One sync run. `budget`: the servers' --row_memory_budget ("" for
  // none). With `kill_spill` > 0, ps-1 dies at that many spills.
  TrainedModel Train(const std::string& name, const std::string& budget,
                     int kill_spill = 0) {
    const fs::path run_dir = dir_ / name;
    std::string env;
    const fs::path faults = dir_ / (name + "_faults");
    if (kill_spill > 0) {
      fs::create_directories(faults);
      std::ofstream(faults / "ps-1.spill") << "kill " << kill_spill;
      env = absl::StrCat("TESSERA_FAULT_POINTS=", faults.string(), " ");
    }
    ShellResult run = Shell(absl::StrCat(
        env, "TMPDIR=", dir_.string(), " ", BuildDir(),
        "/deploy/local/tessera_local --max_restarts=2 --run_dir=",
        run_dir.string(), " --num_ps=2 --num_workers=2",
        budget.empty() ? "" : " --row_memory_budget=", budget,
        " -- --mode=sync --expected_rows_per_shard=1 --checkpoint_dir=",
        (run_dir / "checkpoints").string(),
        " --job_file=", (dir_ / "job.textproto").string()));
    EXPECT_EQ(run.exit_code, 0) << run.output;
    if (kill_spill > 0) {
      EXPECT_TRUE(fs::exists(faults / "ps-1.spill.hit"))
          << "ps-1 never spilled " << kill_spill << " times\n"
          << run.output;
      // In the second epoch: the restore reads the first epoch's
      // checkpoint, saved with most rows on disk.
      EXPECT_NE(run.output.find("resuming epoch 2"), std::string::npos)
          << run.output;
    }
    absl::StatusOr<TrainedModel> model =
        LoadTrainedModel((run_dir / "checkpoints").string());
    EXPECT_TRUE(model.ok()) << model.status() << run.output;
    return model.ok() ? *std::move(model) : TrainedModel();
  }

  fs::path dir_;
};

TEST_F(DiskTierJobTest, ServerKilledMidSpillTrainsTheInMemoryBits) {
  const TrainedModel in_memory = Train("in_memory", "");
  // The least budget tessera_ps takes, below the server's own resident
  // memory: every block past a stripe's first is refused, rows spill.
  const TrainedModel killed = Train("killed", "8M", /*kill_spill=*/4000);
  ASSERT_FALSE(in_memory.variables.empty());
  ASSERT_EQ(in_memory.variables.size(), killed.variables.size());
  for (size_t v = 0; v < in_memory.variables.size(); ++v) {
    const TrainedVariable& a = in_memory.variables[v];
    const TrainedVariable& b = killed.variables[v];
    ASSERT_EQ(a.name, b.name);
    ASSERT_EQ(a.values.size(), b.values.size()) << a.name;
    EXPECT_EQ(std::memcmp(a.values.data(), b.values.data(),
                          a.values.size() * sizeof(float)),
              0)
        << a.name
        << " differs between the in-memory run and the run with a disk "
           "tier whose ps-1 was killed mid-spill";
  }
  // The killed server's tier was a cache: nothing of it is left behind.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().rfind("tessera_rows.", 0),
              std::string::npos)
        << entry.path() << " outlived its job";
  }
}

}  // namespace
}  // namespace tessera
