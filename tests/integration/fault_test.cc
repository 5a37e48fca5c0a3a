// Kills a worker, a parameter server and the coordinator with SIGKILL in
// the middle of an epoch of a real job on loopback (the local launcher
// restarts each), and checks that training completes with every example of
// every epoch visited exactly once and the same final accuracy as an
// undisturbed run. Synchronous mode makes the runs reproducible (each step's
// examples and dropout follow from its step number), so "the same" can be
// tight; an asynchronous run checks the same recovery where updates race.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/example_digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/kept_folder.h"
#include "tests/kept_metrics.h"
#include "tests/kept_tfrecords.h"
#include "tests/scratch_dir.h"
#include "tests/shell_command.h"
#include "tests/skip_unless_required.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";
constexpr int kEpochs = 4;
constexpr int64_t kTrain = 12000;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Seconds since midnight of a glog line ("I20261121 10:07:28.614372 ...")
// or of `date +%T.%N` output.
std::optional<double> SecondsOfDay(const std::string& hms) {
  int h = 0, m = 0;
  double s = 0;
  if (std::sscanf(hms.c_str(), "%d:%d:%lf", &h, &m, &s) != 3) {
    return std::nullopt;
  }
  return h * 3600.0 + m * 60.0 + s;
}

// The time of the first line of `log` holding `marker`, in seconds of the
// day, or nullopt.
std::optional<double> FirstLogTime(const std::string& log,
                                   const std::string& marker) {
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find(marker) == std::string::npos) continue;
    if (line.size() < 25 || line[0] != 'I') continue;
    return SecondsOfDay(line.substr(10, 15));
  }
  return std::nullopt;
}

struct JobRun {
  int launcher_exit = -1;
  std::string output;  // the launcher's console
  fs::path dir;
  std::vector<nlohmann::json> metrics;  // metrics.jsonl, in order
  std::optional<double> kill_time;      // seconds of the day
  bool streamed = false;                // data from a job file's streams
};

class FaultTest : public ::testing::Test {
 public:
  void SetUp() override {
    if (!fs::exists(kData))
      TESSERA_SKIP_UNLESS_REQUIRED(kRequireData)
          << kData << " is not installed";
  }

  static fs::path Dir(const std::string& name) {
    return ScratchDir(absl::StrCat("tessera_fault_", getpid(), "_", name));
  }

  // Trains kEpochs over kTrain examples with 2 ps and 2 workers; when
  // `victim` ("worker-1", "ps-1", "chief-0") is set, it dies (SIGKILL at
  // a fault point, common/process/fault_point.h) once the job has done
  // about `kill_after_lines` steps: the chief when it has recorded that
  // many, a worker in its share of them (half), a server at that many
  // pushes (at least one a step). Counting lines of steps.jsonl, which
  // the chief writes in buffered blocks, could land anywhere, or after
  // the job's end. A `point` ("evaluate") names the victim's fault point
  // instead, where it dies after passing it kill_after_lines times.
  static JobRun Train(
      const std::string& name, const std::string& mode,
      const std::string& victim, int kill_after_lines,
      const std::string& data_flags = absl::StrCat(" --train_examples=", kTrain,
                                                   " --test_examples=10000"),
      const std::string& point_name = "") {
    JobRun run;
    run.streamed = absl::StrContains(data_flags, "--job_file=");
    run.dir = Dir(name);
    const fs::path rd = run.dir / "run";
    const fs::path out = run.dir / "launcher.out";
    const fs::path faults = run.dir / "faults";
    std::string point;
    if (!victim.empty()) {
      fs::create_directories(faults);
      const bool worker = absl::StartsWith(victim, "worker");
      point = (faults / absl::StrCat(victim, absl::StartsWith(victim, "ps")
                                                 ? ".push"
                                                 : ".step"))
                  .string();
      if (!point_name.empty()) {
        point = (faults / absl::StrCat(victim, ".", point_name)).string();
      }
      std::ofstream(point) << "kill "
                           << (worker && point_name.empty()
                                   ? kill_after_lines / 2
                                   : kill_after_lines);
    }
    std::string script = absl::StrCat(
        victim.empty() ? "" : "export TESSERA_FAULT_POINTS=",
        victim.empty() ? "" : faults.string() + "\n", BuildDir(),
        "/deploy/local/tessera_local --num_ps=2 --num_workers=2",
        " --max_restarts=2 --run_dir=", rd.string(), " -- --mode=", mode,
        " --epochs=", kEpochs, data_flags, " --checkpoint_dir=", rd.string(),
        "/checkpoints > ", out.string(), " 2>&1 &\nlauncher=$!\n");
    absl::StrAppend(&script, "wait $launcher; echo launcher_exit=$?\n");
    if (!victim.empty()) {
      // When it died: the .hit file's time, to the nanosecond.
      absl::StrAppend(&script, "[ -e ", point,
                      ".hit ] && echo kill_time=$(stat -c %y ", point,
                      ".hit | cut -d' ' -f2)\n");
    }
    const fs::path script_path = run.dir / "run.sh";
    std::ofstream(script_path) << script;
    ShellResult shell = Shell("bash " + script_path.string());
    run.output = ReadFile(out);
    const size_t exit_at = shell.output.find("launcher_exit=");
    if (exit_at != std::string::npos) {
      absl::SimpleAtoi(shell.output.substr(exit_at + 14, 3),
                       &run.launcher_exit);
    }
    // The victim reached its fault point (a kill that never came would
    // leave an undisturbed run to compare).
    if (!victim.empty()) {
      EXPECT_TRUE(fs::exists(point + ".hit")) << victim << " was never killed";
    }
    const size_t kill_at = shell.output.find("kill_time=");
    if (kill_at != std::string::npos) {
      run.kill_time = SecondsOfDay(shell.output.substr(kill_at + 10, 18));
    }
    std::ifstream metrics(rd / "metrics.jsonl");
    std::string line;
    while (std::getline(metrics, line)) {
      run.metrics.push_back(nlohmann::json::parse(line));
    }
    return run;
  }

  // Completed, with exactly one metrics line per epoch, each a full pass.
  // `max_late`: gradients that may be dropped as late in all.
  static void ExpectCompleteAndExact(const JobRun& run, int64_t max_late = 0) {
    ASSERT_EQ(run.launcher_exit, 0) << run.output;
    ASSERT_EQ(run.metrics.size(), static_cast<size_t>(kEpochs)) << run.output;
    int64_t late = 0;
    // Exactly once by identity: each epoch's examples are the first kTrain
    // of the training set, each once (a count would pass one example
    // trained twice and another missed). Streamed examples are (file
    // shard, position), which the coordinator checks against its plan: here
    // every epoch must be the same set.
    const std::string one_pass =
        run.streamed ? run.metrics[0]["example_digest"].get<std::string>()
                     : DigestText(DigestOfIndices(0, kTrain));
    for (int e = 0; e < kEpochs; ++e) {
      EXPECT_EQ(run.metrics[e]["epoch"].get<int>(), e + 1);
      EXPECT_EQ(run.metrics[e]["examples"].get<int64_t>(), kTrain)
          << "epoch " << e + 1;
      EXPECT_EQ(run.metrics[e]["example_digest"], one_pass)
          << "epoch " << e + 1;
      late += run.metrics[e]["late_shards"].get<int64_t>();
    }
    // Without backup workers a gradient is dropped as late only when a
    // killed worker had pushed part of its step: the re-run's copy of that
    // part is then late. A restored server must take every resumed step.
    EXPECT_LE(late, max_late);
  }

  static double FinalAccuracy(const JobRun& run) {
    if (run.metrics.empty()) {
      ADD_FAILURE() << "the job wrote no metrics";
      return std::nan("");
    }
    return run.metrics.back()["test_accuracy"].get<double>();
  }

  // Seconds from the kill to the first chief.log line with `marker`.
  static double RecoverySeconds(const JobRun& run, const std::string& marker) {
    const std::optional<double> back =
        FirstLogTime(ReadFile(run.dir / "run" / "chief.log"), marker);
    if (!run.kill_time || !back) return -1;
    return *back - *run.kill_time;
  }

  // The undisturbed run of `mode` on `data_flags` (Train's): its metrics
  // lines, trained once per build for all cases and passes
  // (tests/kept_metrics.h), each epoch a full pass.
  static std::vector<nlohmann::json> Undisturbed(
      const std::string& mode,
      const std::string& data_flags = absl::StrCat(" --train_examples=", kTrain,
                                                   " --test_examples=10000")) {
    // The flags name this process's data folder (tessera_fault_<pid>_...),
    // whose files every process writes the same.
    const std::string job = absl::StrReplaceAll(
        absl::StrCat("fault_test ", mode, " --epochs=", kEpochs, data_flags),
        {{absl::StrCat("tessera_fault_", getpid(), "_"), "tessera_fault_"}});
    return KeptMetrics(job, kEpochs, [&] {
      std::string tag = absl::StrCat(mode, "_baseline");
      std::replace(tag.begin(), tag.end(), ':', '_');
      JobRun run = Train(tag, mode, "", 0, data_flags);
      ExpectCompleteAndExact(run);
      return run.metrics;
    });
  }

  // The undisturbed synchronous run the others are compared with: its
  // metrics lines.
  static const std::vector<nlohmann::json>& BaselineMetrics() {
    static const std::vector<nlohmann::json>* metrics =
        new std::vector<nlohmann::json>(Undisturbed("sync"));
    return *metrics;
  }
  static double Baseline() {
    const std::vector<nlohmann::json>& m = BaselineMetrics();
    return m.empty() ? -1.0 : m.back()["test_accuracy"].get<double>();
  }

  // A synchronous run despite a fault trains the undisturbed run's model,
  // bit for bit: every epoch's counts, losses and accuracies are equal.
  // The test loss alone is summed over the evaluating workers' slices,
  // which follow the workers up then: the same model's losses added in
  // other batches differ in float's last bits.
  static void ExpectSameEpochs(const std::vector<nlohmann::json>& metrics) {
    const std::vector<nlohmann::json>& base = BaselineMetrics();
    ASSERT_EQ(metrics.size(), base.size());
    for (size_t e = 0; e < base.size(); ++e) {
      for (const char* key : {"epoch", "examples", "steps", "train_loss",
                              "train_accuracy", "test_accuracy"}) {
        EXPECT_EQ(metrics[e][key], base[e][key])
            << "epoch " << e + 1 << " " << key;
      }
      const double test_loss = base[e]["test_loss"].get<double>();
      EXPECT_NEAR(metrics[e]["test_loss"].get<double>(), test_loss,
                  1e-6 * test_loss)
          << "epoch " << e + 1;
    }
  }

  // Global steps of 64 examples over 2 workers: 2 lines per global step.
  static constexpr int kLinesPerEpoch = 2 * ((kTrain + 63) / 64);
  static constexpr int kMidSecondEpoch = kLinesPerEpoch + kLinesPerEpoch / 2;
};

// Kills `victim` in the middle of the second epoch of a synchronous run
// and checks the run against the undisturbed one. `restarted` is what the
// launcher says of it, `recovered` the coordinator's log line that marks
// the end of the recovery and `resumed` (optional) what the console shows.
void ExpectSameRunDespite(const std::string& victim,
                          const std::string& restarted,
                          const std::string& recovered,
                          const std::string& resumed, int64_t max_late) {
  const double baseline = FaultTest::Baseline();
  JobRun run =
      FaultTest::Train(victim, "sync", victim, FaultTest::kMidSecondEpoch);
  FaultTest::ExpectCompleteAndExact(run, max_late);
  EXPECT_THAT(run.output,
              HasSubstr(restarted + " died (signal 9); restarting"));
  if (!resumed.empty()) EXPECT_THAT(run.output, HasSubstr(resumed));
  const double seconds = FaultTest::RecoverySeconds(run, recovered);
  EXPECT_GT(seconds, 0) << ReadFile(run.dir / "run" / "chief.log");
  std::printf(
      "[fault] %s killed: '%s' %.2f s after the kill; final accuracy "
      "%.4f, undisturbed %.4f\n",
      victim.c_str(), recovered.c_str(), seconds, FaultTest::FinalAccuracy(run),
      baseline);
  FaultTest::ExpectSameEpochs(run.metrics);
}

TEST_F(FaultTest, KilledWorkerIsRestartedAndItsStepRerun) {
  // Each server holds 4 shards; a step cut short pushed at most those.
  ExpectSameRunDespite("worker-1", "worker 1", "worker 1 is back", "", 8);
}

TEST_F(FaultTest, KilledParameterServerIsRestoredFromTheLastCheckpoint) {
  ExpectSameRunDespite("ps-1", "ps 1", "recovered in", "resuming epoch 2", 0);
}

TEST_F(FaultTest, KilledCoordinatorResumesFromTheLastCheckpoint) {
  ExpectSameRunDespite("chief-0", "coordinator", "resuming from",
                       "epoch 2, worker step", 0);
}

TEST_F(FaultTest, AsynchronousTrainingSurvivesAParameterServerKill) {
  JobRun run = Train("async_ps", "async", "ps-0", kLinesPerEpoch / 2 * 3);
  ASSERT_NO_FATAL_FAILURE(ExpectCompleteAndExact(run));
  EXPECT_THAT(run.output, HasSubstr("recovered in"));
  std::printf(
      "[fault] async, ps-0 killed: resumed after %.2f s; accuracy "
      "%.4f\n",
      RecoverySeconds(run, "recovered in"), FinalAccuracy(run));
  // Asynchronous runs differ by update order, so no exact comparison; a
  // lost or corrupted shard would leave the model near chance.
  EXPECT_GT(FinalAccuracy(run), 0.78);
  // Issue #42: the steps done since the checkpoint, rolled back and
  // trained again, are re-run steps ("2 steps re-run" once, while 45,824
  // examples were trained again): steps.jsonl has a line for each step
  // done, those the epochs' own steps (metrics.jsonl) and those again.
  const size_t at = run.output.find(" steps re-run");
  ASSERT_NE(at, std::string::npos) << run.output;
  const size_t from = run.output.rfind(' ', at - 1) + 1;
  int64_t rerun = 0;
  ASSERT_TRUE(absl::SimpleAtoi(run.output.substr(from, at - from), &rerun));
  int64_t planned = 0, lines = 0;
  for (const nlohmann::json& m : run.metrics) {
    planned += m["steps"].get<int64_t>();
  }
  std::ifstream steps(run.dir / "run" / "steps.jsonl");
  for (std::string line; std::getline(steps, line);) ++lines;
  std::printf(
      "[fault] async, ps-0 killed: %lld steps re-run, %lld done "
      "twice by steps.jsonl\n",
      static_cast<long long>(rerun), static_cast<long long>(lines - planned));
  EXPECT_GE(rerun, lines - planned);
}

// The lost job (#31): the chief restarted, and while the new chief
// configured the workers one of them was killed; the chief ended the job
// ("Configure: Socket closed"). Now the worker is waited for, with the
// backoff every other wait uses, and the job completes. The chief is
// killed once epoch 2's line is written, so it resumes at epoch 3: the
// final line must count the job's 4 epochs, not the 2 this chief trained.
TEST_F(FaultTest, WorkerKilledWhileARestartedChiefConfiguresIsWaitedFor) {
  const double baseline = Baseline();
  const fs::path dir = Dir("configure");
  const fs::path rd = dir / "run";
  const fs::path out = dir / "launcher.out";
  const fs::path faults = dir / "faults";
  fs::create_directories(faults);
  // Worker 1 dies inside the Configure of the restarted chief, at a fault
  // point, not at a moment a sleep hopes for: its file is laid before the
  // chief is killed, and only a chief's Configure passes the point (the
  // first chief's came before the file).
  std::string script = absl::StrCat(
      "export TESSERA_FAULT_POINTS=", faults.string(), "\n", BuildDir(),
      "/deploy/local/tessera_local --num_ps=2 --num_workers=2",
      " --max_restarts=2 --run_dir=", rd.string(),
      " -- --mode=sync --epochs=", kEpochs, " --train_examples=", kTrain,
      " --test_examples=10000", " --checkpoint_dir=", rd.string(),
      "/checkpoints > ", out.string(), " 2>&1 &\nlauncher=$!\n");
  // Polls until `file` holds at least `n` lines matching `pattern`.
  auto wait_for = [&](const std::string& file, const std::string& pattern,
                      int n) {
    return absl::StrCat("for i in $(seq 1 6000); do\n  n=$(grep -c '", pattern,
                        "' ", file, " 2>/dev/null)\n  [ \"${n:-0}\" -ge ", n,
                        " ] && break; sleep 0.01\ndone\n");
  };
  absl::StrAppend(&script,
                  wait_for((rd / "metrics.jsonl").string(), "epoch", 2),
                  "echo kill > ", (faults / "worker-1.configure").string(),
                  "\nkill -9 $(cat ", rd.string(), "/pids/chief-0)\n",
                  "wait $launcher; echo launcher_exit=$?\n");
  std::ofstream(dir / "run.sh") << script;
  ShellResult shell = Shell("bash " + (dir / "run.sh").string());
  const std::string output = ReadFile(out);
  ASSERT_THAT(shell.output, HasSubstr("launcher_exit=0")) << output;
  EXPECT_THAT(output, HasSubstr("coordinator died (signal 9); restarting"));
  EXPECT_THAT(output, HasSubstr("worker 1 died (signal 9); restarting"));
  EXPECT_TRUE(fs::exists(faults / "worker-1.configure.hit")) << output;
  EXPECT_THAT(output, HasSubstr("worker 1 could not be configured")) << output;
  // Every epoch once, each a full pass (the last line of each epoch).
  std::map<int, nlohmann::json> epochs;
  std::ifstream metrics(rd / "metrics.jsonl");
  std::string line;
  while (std::getline(metrics, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    epochs[j["epoch"].get<int>()] = j;
  }
  ASSERT_EQ(epochs.size(), static_cast<size_t>(kEpochs)) << output;
  std::vector<nlohmann::json> last_lines;
  for (const auto& [epoch, j] : epochs) {
    EXPECT_EQ(j["examples"].get<int64_t>(), kTrain) << "epoch " << epoch;
    last_lines.push_back(j);
  }
  EXPECT_EQ(epochs[kEpochs]["test_accuracy"].get<double>(), baseline);
  ExpectSameEpochs(last_lines);
  // The summary counts the job.
  EXPECT_THAT(output,
              HasSubstr(absl::StrCat("after ", kEpochs,
                                     " epochs (epochs 1-2 "
                                     "before the coordinator restarted); ",
                                     kEpochs * kTrain, " examples")));
  const size_t final_at = output.find("final test accuracy");
  if (final_at != std::string::npos) {
    std::printf("[fault] after a chief restart: %s\n",
                output.substr(final_at, output.find('\n', final_at) - final_at)
                    .c_str());
  }
}

// A parameter server paused past its heartbeat (stopped until the chief
// logs the failed heartbeat, then SIGCONT) answers again with all its shards by
// the time the recovery asks; the steps it cut short still ended the epoch. It
// used to end the job ("training failed: UNAVAILABLE: heartbeat: ps 1 ... does
// not answer", the chaos soak's seeds 2001 and 2004); now every server goes
// back to the newest checkpoint and the job ends as an undisturbed one.
TEST_F(FaultTest, ParameterServerPausedPastItsHeartbeatIsRestored) {
  const double baseline = Baseline();
  const fs::path dir = Dir("paused_ps");
  const fs::path rd = dir / "run";
  const fs::path out = dir / "launcher.out";
  // The server stops itself at a fault point, at its push in the middle of
  // epoch 2 (a part of each global step reaches it: 376 an epoch), where a
  // stop after epoch 1's line and a sleep could land after the job's end;
  // it stays stopped until the chief logs its failed heartbeat, then goes
  // on.
  const fs::path faults = dir / "faults";
  fs::create_directories(faults);
  constexpr int kPushesPerEpoch = 2 * ((kTrain + 63) / 64);
  std::ofstream(faults / "ps-1.push")
      << "stop " << kPushesPerEpoch + kPushesPerEpoch / 2;
  const std::string hit = (faults / "ps-1.push.hit").string();
  const std::string script = absl::StrCat(
      "export TESSERA_FAULT_POINTS=", faults.string(), "\n", BuildDir(),
      "/deploy/local/tessera_local --num_ps=2 --num_workers=2",
      " --run_dir=", rd.string(), " -- --mode=sync --epochs=", kEpochs,
      " --train_examples=", kTrain, " --test_examples=10000",
      " --checkpoint_dir=", rd.string(), "/checkpoints > ", out.string(),
      " 2>&1 &\nlauncher=$!\n", "for i in $(seq 1 6000); do [ -e ", hit,
      " ] && break; kill -0 $launcher 2>/dev/null || break; sleep 0.02; "
      "done\n[ -e ",
      hit, " ] && echo ps_stopped\n",
      // Stopped until the chief has seen its heartbeat fail (its log line),
      // not for a time that may or may not outlast the heartbeat.
      "for i in $(seq 1 6000); do grep -q 'heartbeat: ' ", rd.string(),
      "/chief.log 2>/dev/null && echo heartbeat_missed && break; ",
      "kill -0 $launcher 2>/dev/null || break; sleep 0.02; done\n",
      "kill -CONT $(cat ", rd.string(),
      "/pids/ps-1)\nwait $launcher; echo launcher_exit=$?\n");
  std::ofstream(dir / "run.sh") << script;
  ShellResult shell = Shell("bash " + (dir / "run.sh").string());
  JobRun run;
  run.output = ReadFile(out);
  run.launcher_exit =
      shell.output.find("launcher_exit=0") != std::string::npos ? 0 : 1;
  std::ifstream metrics(rd / "metrics.jsonl");
  std::string line;
  while (std::getline(metrics, line)) {
    run.metrics.push_back(nlohmann::json::parse(line));
  }
  EXPECT_THAT(shell.output, HasSubstr("ps_stopped"))
      << "ps 1 never reached its fault point";
  EXPECT_THAT(shell.output, HasSubstr("heartbeat_missed"))
      << "the chief never logged ps 1's failed heartbeat";
  ASSERT_NO_FATAL_FAILURE(ExpectCompleteAndExact(run));
  EXPECT_THAT(run.output, HasSubstr("missed its heartbeat and answers again"));
  EXPECT_THAT(run.output, HasSubstr("recovered in"));
  EXPECT_EQ(FinalAccuracy(run), baseline);
  ExpectSameEpochs(run.metrics);
}

// The first kTrain Fashion-MNIST training images as 6 gzipped TFRecord
// files and the test set as 2, written by tessera_to_tfrecord, and a job
// file that streams them: the flags that make Train use it.
std::string StreamedTfRecordFlags() {
  static const std::string flags = [] {
    const std::string train_flags =
        absl::StrCat(" --from=idx --images=", kData,
                     "/train-images-idx3-ubyte.gz --labels=", kData,
                     "/train-labels-idx1-ubyte.gz --examples=", kTrain,
                     " --shards=6 --gzip");
    const std::string test_flags =
        absl::StrCat(" --from=idx --images=", kData,
                     "/t10k-images-idx3-ubyte.gz --labels=", kData,
                     "/t10k-labels-idx1-ubyte.gz --shards=2 --gzip");
    return KeptTfRecordJob(
        train_flags, test_flags,
        "model { kind: \"mlp\" input_dim: 784 hidden_units: 128 "
        "num_classes: 10 }\n");
  }();
  return flags;
}

// Streamed input keeps the promise of the in-memory path: a worker or a
// parameter server killed mid-epoch, every epoch still trains on each of
// the kTrain streamed examples exactly once (their positions are re-run or
// replayed from the checkpoint's epoch).
TEST_F(FaultTest, StreamedTfRecordKeepsExactlyOnceWhenAWorkerDies) {
  JobRun run = Train("tfrecord_worker", "sync", "worker-1", kMidSecondEpoch,
                     StreamedTfRecordFlags());
  ASSERT_NO_FATAL_FAILURE(ExpectCompleteAndExact(run, 8));
  EXPECT_THAT(run.output, HasSubstr("worker 1 died (signal 9); restarting"));
  std::printf("[fault] tfrecord, worker-1 killed: accuracy %.4f\n",
              FinalAccuracy(run));
  EXPECT_GT(FinalAccuracy(run), 0.78);
}

TEST_F(FaultTest, StreamedTfRecordKeepsExactlyOnceWhenAServerDies) {
  JobRun run = Train("tfrecord_ps", "async", "ps-1", kMidSecondEpoch,
                     StreamedTfRecordFlags());
  ASSERT_NO_FATAL_FAILURE(ExpectCompleteAndExact(run));
  EXPECT_THAT(run.output, HasSubstr("recovered in"));
  std::printf("[fault] tfrecord, ps-1 killed: accuracy %.4f\n",
              FinalAccuracy(run));
  EXPECT_GT(FinalAccuracy(run), 0.78);
}

TEST_F(FaultTest, StreamedTfRecordKeepsExactlyOnceWhenTheCoordinatorDies) {
  JobRun run = Train("tfrecord_chief", "sync", "chief-0", kMidSecondEpoch,
                     StreamedTfRecordFlags());
  ASSERT_NO_FATAL_FAILURE(ExpectCompleteAndExact(run));
  EXPECT_THAT(run.output, HasSubstr("resuming from"));
  std::printf("[fault] tfrecord, coordinator killed: accuracy %.4f\n",
              FinalAccuracy(run));
  EXPECT_GT(FinalAccuracy(run), 0.78);
}

// Generated click data (kTrain examples) and the DLRM job file: a model
// with growing embedding tables, Adagrad on the rows and Adam on the dense
// layers, each with a learning-rate schedule and the dense one with weight
// decay (#44): a server applies the rate of its update's t, which its
// checkpoint keeps, so a restored job goes on with the schedule where it
// was, and the lockstep modes still repeat the undisturbed run bit for bit
// (a schedule restarted at t = 1, or run on another count, would not). The
// flags that make Train use it, with global steps of 64.
std::string ClickTableFlags() {
  static const std::string flags = [] {
    const fs::path dir = ProgramScratchDir(
        absl::StrCat("tessera_fault_", getpid(), "_click_data"));
    ShellResult gen = Shell(absl::StrCat(
        BuildDir(), "/worker/tessera_ctr_gen --out_dir=", dir.string(),
        " --train_examples=", kTrain, " --test_examples=2000",
        " --vocab_size=500 --interaction_fields=8 --interaction_scale=2",
        " --zipf_s=1.2 --weight_decay_rank=5 --threads=1"));
    EXPECT_EQ(gen.exit_code, 0) << gen.output;
    return absl::StrCat(" --job_file=", TESSERA_SOURCE_DIR,
                        "/deploy/jobs/dlrm.textproto --data_dir=", dir.string(),
                        " --batch_size=64",
                        " --lr_schedule=cosine,warmup_steps=40,decay_steps=600,"
                        "alpha=0.2 --weight_decay=0.004",
                        " --embedding_lr_schedule=exponential,decay_steps=100,"
                        "decay_rate=0.8");
  }();
  return flags;
}

// The undisturbed run of `mode` on the click data, trained once per build
// and mode (tests/kept_metrics.h).
std::vector<nlohmann::json> TableBaseline(const std::string& mode) {
  return FaultTest::Undisturbed(mode, ClickTableFlags());
}

// Embedding tables in sync, hybrid:sync and hybrid (#30, #31): a worker, a
// parameter server or the chief killed mid-epoch, and every epoch trains
// every example once. In sync and hybrid:sync every epoch's metrics line
// equals the undisturbed run's bit for bit (train loss, test loss, AUC,
// log loss): a sync step is applied exactly once on every server whatever
// dies when (ps_server/sync_steps.h), and a hybrid job's replicas go back
// with the servers to the last checkpoint, whose replica file holds the
// dense variables and their optimizer state (worker/params/
// replica_checkpoint.h). hybrid pushes rows asynchronously, so its runs
// differ by update order: its AUC stays near the undisturbed run's, as
// ssp:2's and hybrid:ssp:2's do (#48: bounded staleness under kills).
class TableFaultTest : public FaultTest,
                       public ::testing::WithParamInterface<
                           std::tuple<const char*, const char*>> {};

TEST_P(TableFaultTest, EveryEpochOnceAndTheModelOfTheUndisturbedRun) {
  const std::string mode = std::get<0>(GetParam());
  const std::string victim = std::get<1>(GetParam());
  const std::vector<nlohmann::json> baseline = TableBaseline(mode);
  ASSERT_EQ(baseline.size(), static_cast<size_t>(kEpochs));
  std::string tag = absl::StrCat(mode, "_", victim);
  std::replace(tag.begin(), tag.end(), ':', '_');
  JobRun run = Train(absl::StrCat("table_", tag), mode, victim, kMidSecondEpoch,
                     ClickTableFlags());
  ASSERT_NO_FATAL_FAILURE(ExpectCompleteAndExact(run));
  EXPECT_THAT(run.output, HasSubstr("(signal 9); restarting"));
  ASSERT_EQ(run.metrics.size(), baseline.size());
  // The lockstep modes repeat the undisturbed run; the others (rows pushed
  // as they come) differ by update order.
  const bool exact = mode == "sync" || mode == "hybrid:sync";
  for (size_t e = 0; e < run.metrics.size(); ++e) {
    // The rates shown are the servers' too: counted out of the rounds a
    // restore undid, they are the undisturbed run's.
    for (const char* key : {"train_loss", "test_loss", "auc", "log_loss",
                            "learning_rate", "embedding_learning_rate"}) {
      ASSERT_TRUE(run.metrics[e].contains(key)) << run.metrics[e].dump();
      if (!exact) continue;
      EXPECT_EQ(run.metrics[e][key].get<double>(),
                baseline[e][key].get<double>())
          << mode << ", " << victim << " killed: epoch " << e + 1 << " " << key;
    }
  }
  if (!exact) {
    EXPECT_NEAR(run.metrics.back()["auc"].get<double>(),
                baseline.back()["auc"].get<double>(), 0.01);
  }
  std::printf("[fault] %s with tables, %s killed%s: epoch examples",
              mode.c_str(), victim.c_str(),
              absl::StrContains(run.output, "every replica copied from worker")
                  ? " (its round ran again)"
                  : "");
  for (const nlohmann::json& m : run.metrics) {
    std::printf(" %lld", static_cast<long long>(m["examples"].get<int64_t>()));
  }
  std::printf(", AUCs");
  for (const nlohmann::json& m : run.metrics) {
    std::printf(" %.9f", m["auc"].get<double>());
  }
  std::printf("; undisturbed");
  for (const nlohmann::json& m : baseline) {
    std::printf(" %.9f", m["auc"].get<double>());
  }
  std::printf("\n");
}

INSTANTIATE_TEST_SUITE_P(
    ModesAndVictims, TableFaultTest,
    ::testing::Combine(::testing::Values("sync", "hybrid:sync", "hybrid",
                                         "ssp:2", "hybrid:ssp:2"),
                       ::testing::Values("worker-1", "ps-1", "chief-0")),
    [](const ::testing::TestParamInfo<std::tuple<const char*, const char*>>&
           i) {
      std::string name =
          absl::StrCat(std::get<0>(i.param), "_", std::get<1>(i.param));
      name.erase(std::remove_if(name.begin(), name.end(),
                                [](char c) { return c == ':' || c == '-'; }),
                 name.end());
      return name;
    });

// hybrid:ssp:2 leaves a worker's last 2 row pushes in flight after its
// steps end. Worker 1 dies in its 2nd Evaluate call: the settle of those
// pushes before the checkpoint after epoch 1 (the 1st evaluated epoch 1's
// test slice; the job's first checkpoint, at step 0, settles nothing), so
// its pushes in flight went with it. That checkpoint cannot count epoch 1 as
// trained: the job goes back to its last checkpoint (step 0) and trains
// epoch 1 again, each epoch still once. It used to end with DATA_LOSS
// after training every epoch (the chaos soak's seed 48125).
TEST_F(FaultTest, HybridSspWorkerKilledWithRowPushesInFlightIsRecovered) {
  JobRun run = Train("hybrid_ssp_settle", "hybrid:ssp:2", "worker-1", 1,
                     ClickTableFlags(), "evaluate");
  ASSERT_NO_FATAL_FAILURE(ExpectCompleteAndExact(run));
  EXPECT_THAT(run.output, HasSubstr("row pushes in flight were lost; "
                                    "training paused"));
  EXPECT_THAT(run.output, HasSubstr("resuming epoch 1 at step 0"));
  // Epoch 1's steps, trained twice, are counted as re-run: the summary
  // ends "; <n> worker steps re-run".
  const size_t rerun = run.output.find(" steps re-run");
  ASSERT_NE(rerun, std::string::npos) << run.output;
  const size_t from = run.output.rfind("; ", rerun) + 2;
  int64_t steps_rerun = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      run.output.substr(from, run.output.find(' ', from) - from), &steps_rerun))
      << run.output;
  EXPECT_EQ(steps_rerun, run.metrics[0]["steps"].get<int64_t>());
  EXPECT_EQ(run.metrics[0].value("steps_rerun", int64_t{0}), steps_rerun);
  std::printf(
      "[fault] hybrid:ssp:2, worker-1 killed settling its row "
      "pushes: back to step 0, %lld steps re-run, epoch examples",
      static_cast<long long>(steps_rerun));
  for (const nlohmann::json& m : run.metrics) {
    std::printf(" %lld", static_cast<long long>(m["examples"].get<int64_t>()));
  }
  std::printf("\n");
}

// A mirrored worker killed mid-epoch costs the round it was in: the
// survivors' replica is copied onto every worker and the round runs again
// (ReplicaRepair), so the job trains the undisturbed run's model, bit for
// bit. (When the victim dies after its all-reduce, the survivors applied
// the round and the job goes back to its last checkpoint instead, with the
// same result.)
TEST_F(FaultTest, MirroredWorkerKilledMidEpochTrainsTheUndisturbedModel) {
  JobRun baseline;
  baseline.metrics = Undisturbed("mirrored");
  ASSERT_EQ(baseline.metrics.size(), static_cast<size_t>(kEpochs));
  JobRun run =
      Train("mirrored_worker", "mirrored", "worker-1", kMidSecondEpoch);
  ASSERT_NO_FATAL_FAILURE(ExpectCompleteAndExact(run));
  EXPECT_THAT(run.output, HasSubstr("(signal 9); restarting"));
  ASSERT_EQ(run.metrics.size(), baseline.metrics.size());
  for (size_t e = 0; e < run.metrics.size(); ++e) {
    for (const char* key : {"train_loss", "test_loss", "test_accuracy"}) {
      EXPECT_EQ(run.metrics[e][key].get<double>(),
                baseline.metrics[e][key].get<double>())
          << "epoch " << e + 1 << " " << key;
    }
  }
  const bool repaired =
      absl::StrContains(run.output, "every replica copied from worker");
  EXPECT_TRUE(repaired || absl::StrContains(run.output, "recovered in"))
      << run.output;
  std::printf("[fault] mirrored, worker-1 killed: %s; test losses",
              repaired ? "its round ran again" : "back to the last checkpoint");
  for (const nlohmann::json& m : run.metrics) {
    std::printf(" %.9f", m["test_loss"].get<double>());
  }
  std::printf(", undisturbed");
  for (const nlohmann::json& m : baseline.metrics) {
    std::printf(" %.9f", m["test_loss"].get<double>());
  }
  std::printf("\n");
}

// Evaluation is not a step: a worker killed while it evaluates its slice
// of the test set used to fail the job. Epochs of 2 steps and 10,000 test
// images make evaluation most of each epoch, and worker-1 is killed three
// times just after an epoch ended, so at least one kill is all but certain
// to land in an evaluation; the job must end with every epoch evaluated.
TEST_F(FaultTest, WorkerKilledWhileEvaluatingIsReplaced) {
  const fs::path dir = Dir("evaluate");
  const fs::path rd = dir / "run";
  const fs::path out = dir / "launcher.out";
  constexpr int kShortEpochs = 30;
  // Worker 1 dies inside its 5th evaluation, three times (each restarted
  // worker counts again), at a fault point: a kill after a count of
  // metrics lines could miss the evaluation it aimed at (a run printed
  // "0 evaluation slices evaluated elsewhere" and passed).
  const fs::path faults = dir / "faults";
  fs::create_directories(faults);
  const std::string point = (faults / "worker-1.evaluate").string();
  std::string script =
      absl::StrCat("export TESSERA_FAULT_POINTS=", faults.string(),
                   "\necho 'kill 4' > ", point, "\n", BuildDir(),
                   "/deploy/local/tessera_local --num_ps=2 --num_workers=2",
                   " --max_restarts=3 --run_dir=", rd.string(),
                   " -- --epochs=", kShortEpochs,
                   " --steps_per_epoch=2 --test_examples=10000 > ",
                   out.string(), " 2>&1 &\nlauncher=$!\n");
  for (int kill = 1; kill <= 3; ++kill) {
    absl::StrAppend(&script, "for i in $(seq 1 6000); do\n  [ -e ", point,
                    ".hit ] && break; sleep 0.01\ndone\n", "[ -e ", point,
                    ".hit ] && echo hit=", kill, "\nrm -f ", point, ".hit\n");
    if (kill < 3) absl::StrAppend(&script, "echo 'kill 4' > ", point, "\n");
  }
  absl::StrAppend(&script, "wait $launcher; echo launcher_exit=$?\n");
  std::ofstream(dir / "run.sh") << script;
  ShellResult shell = Shell("bash " + (dir / "run.sh").string());
  const std::string output = ReadFile(out);
  EXPECT_THAT(shell.output, HasSubstr("launcher_exit=0")) << output;
  std::ifstream metrics(rd / "metrics.jsonl");
  std::string line;
  int epochs = 0;
  while (std::getline(metrics, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j["epoch"].get<int>(), ++epochs);
    EXPECT_GT(j["test_accuracy"].get<double>(), 0.1);
  }
  EXPECT_EQ(epochs, kShortEpochs) << output;
  const std::string chief = ReadFile(rd / "chief.log");
  size_t replaced = 0;
  for (size_t at = chief.find("evaluated by worker 0"); at != std::string::npos;
       at = chief.find("evaluated by worker 0", at + 1)) {
    ++replaced;
  }
  EXPECT_THAT(shell.output, HasSubstr("hit=3")) << output;
  // Each slice worker 1 held when it died went to worker 0.
  EXPECT_GE(replaced, 3u) << chief;
  std::printf(
      "[fault] worker-1 killed 3 times: %zu evaluation slices "
      "evaluated elsewhere\n",
      replaced);
}

TEST_F(FaultTest, DamagedCheckpointIsNamedAndTheJobResumesOnMoreServers) {
  const fs::path dir = Dir("reshard");
  const std::string checkpoints = (dir / "checkpoints").string();
  const std::string launcher =
      BuildDir() + "/deploy/local/tessera_local --num_workers=2";
  const std::string job =
      absl::StrCat(" -- --epochs=%d --train_examples=6000 --test_examples=2000",
                   " --checkpoint_dir=", checkpoints);
  // Two epochs on 2 servers: checkpoints at steps 0, 94 and 188.
  ShellResult first = Shell(
      absl::StrCat(launcher, " --num_ps=2 --run_dir=", (dir / "a").string(),
                   absl::StrReplaceAll(job, {{"%d", "2"}})));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // Damage the newest checkpoint's second file.
  const fs::path damaged =
      fs::path(checkpoints) / "ckpt-0000000188" / "ps-1.shards";
  ASSERT_TRUE(fs::exists(damaged));
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(200);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x5a;
    f.seekp(200);
    f.write(&c, 1);
  }
  // Four epochs on 3 servers: the damage is named, the previous checkpoint
  // (after epoch 1) is re-sharded onto 3 servers, and epochs 2-4 run.
  ShellResult second = Shell(
      absl::StrCat(launcher, " --num_ps=3 --run_dir=", (dir / "b").string(),
                   absl::StrReplaceAll(job, {{"%d", "4"}})));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_THAT(second.output, HasSubstr("checkpoint rejected"));
  EXPECT_THAT(second.output, HasSubstr("ckpt-0000000188/ps-1.shards"));
  EXPECT_THAT(second.output, HasSubstr("ckpt-0000000094: epoch 2, step 94"));
  EXPECT_THAT(second.output, HasSubstr("onto 3"));
  // The damaged checkpoint was set aside, and step 188 saved again after
  // the re-run epoch 2 (it used to be refused as already there).
  EXPECT_TRUE(fs::exists(fs::path(checkpoints) / "ckpt-0000000188.rejected"));
  EXPECT_TRUE(
      fs::exists(fs::path(checkpoints) / "ckpt-0000000188" / "manifest"));
  std::ifstream metrics(dir / "b" / "metrics.jsonl");
  std::string line;
  std::vector<int> epochs;
  double accuracy = 0;
  while (std::getline(metrics, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    epochs.push_back(j["epoch"].get<int>());
    accuracy = j["test_accuracy"].get<double>();
  }
  EXPECT_THAT(epochs, ::testing::ElementsAre(2, 3, 4));
  EXPECT_GT(accuracy, 0.75);

  // A fresh start in the same directory would mix two runs' checkpoints.
  ShellResult fresh = Shell(absl::StrCat(
      launcher, " --num_ps=2 --max_restarts=0 --run_dir=", (dir / "c").string(),
      absl::StrReplaceAll(job, {{"%d", "1"}}), " --restore=false"));
  EXPECT_NE(fresh.exit_code, 0) << fresh.output;
  EXPECT_THAT(fresh.output, HasSubstr("holds checkpoints of an earlier run"));
}

}  // namespace
}  // namespace tessera
