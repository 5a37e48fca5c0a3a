// Checkpoints inside an epoch (--checkpoint_every_steps, issue #44): in
// every mode a job takes them at step boundaries that every parameter server
// (and replica) holds whole, and a process killed between two of them costs
// the steps since the last one, not the epoch: the job resumes the epoch at
// that checkpoint, trains every example of every epoch once, and in the
// lockstep modes ends with the model of the undisturbed run that took the
// same checkpoints, bit for bit.

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/example_digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/kept_metrics.h"
#include "tests/scratch_dir.h"
#include "tests/shell_command.h"
#include "tests/skip_unless_required.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";
constexpr int kEpochs = 2;
constexpr int64_t kTrain = 6000;
// Steps (global steps in the lockstep modes) between checkpoints.
constexpr int kEvery = 15;
constexpr int kWorkers = 2;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path Dir(const std::string& name) {
  return ScratchDir(absl::StrCat("tessera_step_ckpt_", getpid(), "_", name));
}

// Generated click data and the DLRM job file (tables on the servers,
// dense layers in the replicas of the hybrid modes).
std::string ClickFlags() {
  static const std::string flags = [] {
    const fs::path dir = ProgramScratchDir(
        absl::StrCat("tessera_step_ckpt_", getpid(), "_click_data"));
    ShellResult gen = Shell(absl::StrCat(
        BuildDir(), "/worker/tessera_ctr_gen --out_dir=", dir.string(),
        " --train_examples=", kTrain, " --test_examples=2000",
        " --vocab_size=500 --interaction_fields=8 --interaction_scale=2",
        " --zipf_s=1.2 --weight_decay_rank=5 --threads=1"));
    EXPECT_EQ(gen.exit_code, 0) << gen.output;
    return absl::StrCat(" --job_file=", TESSERA_SOURCE_DIR,
                        "/deploy/jobs/dlrm.textproto --data_dir=", dir.string(),
                        " --batch_size=64");
  }();
  return flags;
}

struct JobRun {
  int exit_code = -1;
  std::string output;  // the launcher's console
  fs::path dir;
  std::vector<nlohmann::json> metrics;
  int64_t steps_logged = 0;  // steps.jsonl's lines
  bool killed = false;       // the victim reached its fault point
};

// Trains kEpochs with a checkpoint every kEvery steps on 2 servers and 2
// workers; `victim` ("ps-1", "chief-0"; empty: none) is killed at its
// `kill_at`-th push (a server) or recorded step (the chief).
JobRun Train(const std::string& name, const std::string& mode, bool click,
             const std::string& victim, int kill_at) {
  JobRun run;
  run.dir = Dir(name);
  const fs::path rd = run.dir / "run";
  const fs::path faults = run.dir / "faults";
  fs::create_directories(faults);
  std::string point;
  if (!victim.empty()) {
    point = (faults / absl::StrCat(victim, absl::StartsWith(victim, "ps")
                                               ? ".push"
                                               : ".step"))
                .string();
    std::ofstream(point) << "kill " << kill_at;
  }
  const std::string data = click ? ClickFlags()
                                 : absl::StrCat(" --train_examples=", kTrain,
                                                " --test_examples=2000");
  ShellResult shell = Shell(absl::StrCat(
      "TESSERA_FAULT_POINTS=", faults.string(), " ", BuildDir(),
      "/deploy/local/tessera_local --num_ps=2 --num_workers=", kWorkers,
      " --max_restarts=2 --run_dir=", rd.string(), " -- --mode=", mode,
      " --epochs=", kEpochs, data, " --checkpoint_dir=", rd.string(),
      "/checkpoints --checkpoint_every_steps=", kEvery, " > ",
      (run.dir / "launcher.out").string(), " 2>&1"));
  run.exit_code = shell.exit_code;
  run.output = ReadFile(run.dir / "launcher.out");
  run.killed = !point.empty() && fs::exists(point + ".hit");
  std::ifstream metrics(rd / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    run.metrics.push_back(nlohmann::json::parse(line));
  }
  std::ifstream steps(rd / "steps.jsonl");
  for (std::string line; std::getline(steps, line);) ++run.steps_logged;
  return run;
}

// The summary's "N steps re-run" (or "N worker steps re-run"), or -1.
int64_t StepsRerun(const std::string& output) {
  const size_t at = output.find(" steps re-run");
  if (at == std::string::npos) return -1;
  size_t from = output.rfind(' ', at - 1) + 1;
  if (output.compare(from, 6, "worker") == 0) {
    from = output.rfind(' ', from - 2) + 1;
  }
  int64_t n = -1;
  if (!absl::SimpleAtoi(output.substr(from, output.find(' ', from) - from),
                        &n)) {
    return -1;
  }
  return n;
}

struct ModeCase {
  const char* mode;
  bool click;          // the DLRM job on click data, else an MLP on images
  const char* victim;  // mirrored keeps no variables on servers
  bool exact;          // the lockstep modes repeat the undisturbed run
  // Steps handed out past a boundary at most: async and ssp keep
  // 4 * workers + 4 queued, the lockstep modes 2 rounds (hybrid).
  int in_flight;
};

// CTest's test names show the mode, not the struct's bytes.
void PrintTo(const ModeCase& c, std::ostream* os) { *os << c.mode; }

class StepCheckpointTest : public ::testing::TestWithParam<ModeCase> {
 public:
  void SetUp() override {
    if (!fs::exists(kData))
      TESSERA_SKIP_UNLESS_REQUIRED(kRequireData)
          << kData << " is not installed";
  }
};

TEST_P(StepCheckpointTest, AKillBetweenTwoCheckpointsCostsTheSteps) {
  const ModeCase& c = GetParam();
  std::string tag = c.mode;
  std::replace(tag.begin(), tag.end(), ':', '_');
  const bool lockstep =
      !absl::StrContains(c.mode, "async") && !absl::StartsWith(c.mode, "ssp");
  // About 130 steps in: inside the first epoch in the lockstep modes
  // (188 worker steps each), inside the second in the others (94 steps).
  JobRun run = Train(tag, c.mode, c.click, c.victim, 130);
  SCOPED_TRACE(run.output);
  ASSERT_TRUE(run.killed) << c.victim << " was never killed";
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.output, HasSubstr("(signal 9); restarting"));
  // Checkpoints were taken inside the epochs and rotated as ever (3 kept).
  EXPECT_THAT(ReadFile(run.dir / "run" / "chief.log"),
              HasSubstr("inside epoch 1 after"));
  int kept = 0;
  for (const fs::directory_entry& e :
       fs::directory_iterator(run.dir / "run" / "checkpoints")) {
    kept += absl::StartsWith(e.path().filename().string(), "ckpt-") &&
            fs::exists(e.path() / "manifest");
  }
  EXPECT_EQ(kept, 3);
  // The job went back to a checkpoint inside the epoch, not its start.
  EXPECT_THAT(run.output, HasSubstr("steps of the epoch already done)"));
  // Every epoch once, by identity.
  ASSERT_EQ(run.metrics.size(), static_cast<size_t>(kEpochs));
  const std::string one_pass = DigestText(DigestOfIndices(0, kTrain));
  int64_t planned = 0;
  for (const nlohmann::json& m : run.metrics) {
    EXPECT_EQ(m["examples"].get<int64_t>(), kTrain) << m.dump();
    EXPECT_EQ(m["example_digest"], one_pass) << m.dump();
    planned += m["steps"].get<int64_t>();
  }
  // What the kill cost: the steps done since the last checkpoint, at most
  // the interval and the steps in flight (in worker steps).
  const int64_t bound =
      lockstep ? (kEvery + c.in_flight) * kWorkers : kEvery + c.in_flight;
  const int64_t twice = run.steps_logged - planned;
  const int64_t rerun = StepsRerun(run.output);
  EXPECT_LE(twice, bound);
  EXPECT_LE(rerun, bound);
  // A server's loss is counted (a restarted chief counts from its
  // checkpoint on).
  if (absl::StartsWith(c.victim, "ps")) EXPECT_GE(rerun, twice);
  std::printf(
      "[step checkpoints] %s, %s killed, a checkpoint every %d %s: %lld "
      "steps re-run, %lld done twice by steps.jsonl (bound %lld)\n",
      c.mode, c.victim, kEvery, lockstep ? "global steps" : "steps",
      static_cast<long long>(rerun), static_cast<long long>(twice),
      static_cast<long long>(bound));
  if (!c.exact) return;
  // The undisturbed run with the same checkpoints: the same model. Kept
  // for the build (tests/kept_metrics.h): CI runs this label twice.
  JobRun base;
  base.metrics = KeptMetrics(
      absl::StrCat("step_checkpoint_test ", c.mode, c.click ? " click" : "",
                   " --epochs=", kEpochs, " --train_examples=", kTrain,
                   " --checkpoint_every_steps=", kEvery),
      kEpochs, [&] {
        JobRun undisturbed =
            Train(tag + "_undisturbed", c.mode, c.click, "", 0);
        EXPECT_EQ(undisturbed.exit_code, 0) << undisturbed.output;
        return undisturbed.metrics;
      });
  ASSERT_EQ(base.metrics.size(), run.metrics.size());
  for (size_t e = 0; e < base.metrics.size(); ++e) {
    for (const char* key :
         {"epoch", "examples", "steps", "train_loss", "train_accuracy",
          "test_accuracy", "auc", "log_loss"}) {
      EXPECT_EQ(run.metrics[e].value(key, nlohmann::json()),
                base.metrics[e].value(key, nlohmann::json()))
          << "epoch " << e + 1 << " " << key;
    }
    // Summed over the evaluating workers' slices, which may differ.
    const double loss = base.metrics[e]["test_loss"].get<double>();
    EXPECT_NEAR(run.metrics[e]["test_loss"].get<double>(), loss, 1e-6 * loss);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, StepCheckpointTest,
    ::testing::Values(ModeCase{"async", false, "ps-1", false, 12},
                      ModeCase{"ssp:2", false, "ps-1", false, 12},
                      ModeCase{"sync", false, "ps-1", true, 1},
                      ModeCase{"hybrid", true, "ps-1", false, 2},
                      // The cut waits for the row pushes left in flight.
                      ModeCase{"hybrid:ssp:2", true, "ps-1", false, 2},
                      ModeCase{"hybrid:sync", true, "ps-1", true, 1},
                      ModeCase{"mirrored", false, "chief-0", true, 1}),
    [](const ::testing::TestParamInfo<ModeCase>& i) {
      std::string name = i.param.mode;
      name.erase(std::remove(name.begin(), name.end(), ':'), name.end());
      return name;
    });

// tessera_ctl checkpoint inside an epoch is taken at the next step
// boundary, not at the epoch's end. Both workers stop themselves in their
// 21st step (SIGSTOP at the fault point "step"), so the job is inside epoch
// 1 of 3 (94 steps each) whatever the load; the operator's request, sent
// with a short wait, is then registered once tessera_ctl returns, and the
// workers go on.
TEST(OperatorCheckpointTest, IsTakenAtTheNextStepBoundaryInsideAnEpoch) {
  if (!fs::exists(kData))
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireData) << kData << " is not installed";
  const fs::path dir = Dir("ctl");
  const fs::path rd = dir / "run";
  const fs::path out = dir / "launcher.out";
  const fs::path faults = dir / "faults";
  fs::create_directories(faults);
  for (const char* worker : {"worker-0", "worker-1"}) {
    std::ofstream(faults / absl::StrCat(worker, ".step")) << "stop 20";
  }
  const std::string hit0 = (faults / "worker-0.step.hit").string();
  const std::string hit1 = (faults / "worker-1.step.hit").string();
  const std::string script = absl::StrCat(
      "export TESSERA_FAULT_POINTS=", faults.string(), "\n", BuildDir(),
      "/deploy/local/tessera_local --num_ps=2 --num_workers=2 --run_dir=",
      rd.string(), " -- --epochs=3 --train_examples=", kTrain,
      " --test_examples=1000 --checkpoint_dir=", rd.string(), "/checkpoints > ",
      out.string(), " 2>&1 &\nlauncher=$!\n",
      "for i in $(seq 1 1200); do [ -e ", hit0, " ] && [ -e ", hit1,
      " ] && break; sleep 0.05; done\n", "[ -e ", hit0, " ] && [ -e ", hit1,
      " ] && echo both_stopped\n", "addr=$(awk '$1 == \"chief\" {print $2}' ",
      out.string(), ")\n", "export TESSERA_JOB_TOKEN=$(cat ", rd.string(),
      "/job.token)\n", BuildDir(),
      "/coordinator/tessera_ctl --coordinator=$addr --wait_s=0.5",
      " checkpoint; echo ctl_exit=$?\n", "kill -CONT $(cat ", rd.string(),
      "/pids/worker-0) $(cat ", rd.string(), "/pids/worker-1)\n",
      "wait $launcher; echo launcher_exit=$?\n");
  std::ofstream(dir / "run.sh") << script;
  ShellResult run = Shell("bash " + (dir / "run.sh").string());
  const std::string chief = ReadFile(rd / "chief.log");
  SCOPED_TRACE(run.output + "\n--- launcher ---\n" + ReadFile(out));
  EXPECT_THAT(run.output, HasSubstr("both_stopped"));
  // The workers were stopped: no boundary came within the wait.
  EXPECT_THAT(run.output, HasSubstr("no checkpoint yet"));
  EXPECT_THAT(run.output, HasSubstr("launcher_exit=0"));
  // Taken inside epoch 1, after the workers' 40 steps and before its 94.
  const size_t at = chief.find("inside epoch 1 after ");
  ASSERT_NE(at, std::string::npos) << chief;
  int64_t done = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      chief.substr(at + 21, chief.find(' ', at + 21) - at - 21), &done));
  EXPECT_GE(done, 40);
  EXPECT_LT(done, 94);
}

}  // namespace
}  // namespace tessera
