// Elastic jobs on loopback (issue #35): while a real job trains, a worker
// joins (tessera_local --join), a worker drains (tessera_ctl drain) or a
// worker dies for good (kill -9, no restart, removed after
// --worker_recovery_timeout_s), in async and sync mode, on Fashion-MNIST
// IDX files and on the same images streamed from TFRecord files. Every
// epoch must train on each example exactly once (metrics.jsonl), the job
// must end cleanly, and the change must show in the coordinator's end
// report. Synchronous epochs must equal the undisturbed run's: training
// loss and accuracy and test accuracy bit for bit, the test loss to 1e-6
// of itself (its float sums over evaluation slices follow the workers
// active then). A
// global step keeps the parts (one per shard) that the plan gave it
// whichever worker runs them, so any step that read the wrong examples,
// ran twice or was lost would change the losses and accuracies.

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/example_digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/kept_folder.h"
#include "tests/kept_tfrecords.h"
#include "tests/scratch_dir.h"
#include "tests/shell_command.h"
#include "tests/skip_unless_required.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";
constexpr int kEpochs = 3;
constexpr int64_t kTrain = 6000;
constexpr int64_t kTest = 1000;
// Async steps of 32 examples, sync global steps of 64 (2 parts of 32):
// about 94 steps per worker and epoch either way. The change comes early
// in the second epoch: both workers stop themselves at a fault point in
// their kTriggerStep-th step, the worker joins or drains, and they go on
// once the coordinator has taken the change, so it lands inside the job
// whatever the machine's load (a count of steps.jsonl lines raced the
// job's end).
constexpr int kTriggerStep = 110;
// The steps worker 1 takes before it dies in the "die" cases.
constexpr int kDieAfterSteps = 60;
constexpr char kHidden[] = "512,512";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path Dir(const std::string& name) {
  return ScratchDir(absl::StrCat("tessera_elastic_", getpid(), "_", name));
}

std::string IdxFlags() {
  return absl::StrCat(" --train_examples=", kTrain, " --test_examples=", kTest,
                      " --hidden_units=", kHidden);
}

// The first kTrain training and kTest test images as gzipped TFRecord
// files (6 and 2), and a job file that streams them.
std::string TfRecordFlags() {
  static const std::string flags = [] {
    const std::string train_flags =
        absl::StrCat(" --from=idx --images=", kData,
                     "/train-images-idx3-ubyte.gz --labels=", kData,
                     "/train-labels-idx1-ubyte.gz --examples=", kTrain,
                     " --shards=6 --gzip");
    const std::string test_flags = absl::StrCat(
        " --from=idx --images=", kData,
        "/t10k-images-idx3-ubyte.gz --labels=", kData,
        "/t10k-labels-idx1-ubyte.gz --examples=", kTest, " --shards=2 --gzip");
    return KeptTfRecordJob(
        train_flags, test_flags,
        "model { kind: \"mlp\" input_dim: 784 hidden_units: 512 "
        "hidden_units: 512 num_classes: 10 }\n");
  }();
  return flags;
}

struct JobRun {
  int launcher_exit = -1;
  int event_exit = -1;  // the joining launcher's, or tessera_ctl drain's
  std::string output;   // the launcher's console (the coordinator's log)
  std::string event_output;
  std::string status;                   // tessera_ctl status after a drain
  std::vector<nlohmann::json> metrics;  // metrics.jsonl, in order
  bool fault_hit = false;               // a fault point was reached
  bool both_stopped = false;  // join, drain: both workers stopped for it
  std::string chief_log;      // run/chief.log, every chief's
  bool chief_hit = false;     // the chief reached its fault point
};

int ExitAfter(const std::string& text, const std::string& key) {
  int code = -1;
  const size_t at = text.find(key);
  if (at != std::string::npos) {
    absl::SimpleAtoi(text.substr(at + key.size(), 3), &code);
  }
  return code;
}

// Trains kEpochs with 2 parameter servers and 2 workers; while both are
// stopped in their kTriggerStep-th step, `event` happens: "join" (a third
// worker joins), "drain" (worker 1 drains); or "die" (worker 1 is killed
// in its kDieAfterSteps-th step and never restarted), or nothing ("").
// The shell lines that make a join or a drain land while both workers
// stand stopped at their `step` fault point, then let them go on and wait
// for the job. Echoes both_stopped (the moment was made), launcher_exit=
// and event_exit=. With `status_out`, tessera_ctl status after a drain;
// `then`: shell lines run once the workers go on again.
std::string MembershipEventScript(const std::string& event, const fs::path& rd,
                                  const fs::path& faults,
                                  const std::string& local,
                                  const std::string& event_out,
                                  const std::string& launcher_out,
                                  const std::string& status_out,
                                  const std::string& then = "") {
  std::string script;
  // "replace": worker 2 joins and worker 1 drains in the same stop.
  const bool joins = event == "join" || event == "replace";
  const bool drains = event == "drain" || event == "replace";
  const std::string hit0 = (faults / "worker-0.step.hit").string();
  const std::string hit1 = (faults / "worker-1.step.hit").string();
  if (joins || drains) {
    // Both workers stopped at their fault point (or the job ended).
    absl::StrAppend(&script, "for i in $(seq 1 2400); do [ -e ", hit0,
                    " ] && [ -e ", hit1,
                    " ] && break; kill -0 $launcher 2>/dev/null || break; "
                    "sleep 0.05; done\n[ -e ",
                    hit0, " ] && [ -e ", hit1, " ] && echo both_stopped\n");
  }
  const std::string ctl =
      absl::StrCat(BuildDir(), "/coordinator/tessera_ctl --coordinator=$chief",
                   " --job_token_file=", rd.string(), "/job.token ");
  if (joins) {
    // The workers go on once the coordinator says the newcomer joined
    // (or could not).
    absl::StrAppend(
        &script, local, " --join=", rd.string(), " --num_workers=1 > ",
        event_out, ".join 2>&1 &\njoiner=$!\n",
        "for i in $(seq 1 2400); do grep -q 'worker 2 (.*) \\(joined on\\|"
        "could not join\\)' ",
        launcher_out, " && break; sleep 0.05; done\n");
  }
  if (drains) {
    absl::StrAppend(&script, "chief=$(grep -A1 '\"chief\"' ", rd.string(),
                    "/cluster.json | tail -1 | tr -d ' \",')\n", ctl,
                    "drain 1 > ", event_out, " 2>&1; echo event_exit=$?\n");
    if (!status_out.empty()) {
      absl::StrAppend(&script, ctl, "status > ", status_out, " 2>&1\n");
    }
  }
  if (joins || drains) {
    absl::StrAppend(&script, "kill -CONT $(cat ", rd.string(),
                    "/pids/worker-0) $(cat ", rd.string(), "/pids/worker-1)\n");
  }
  absl::StrAppend(&script, then, "wait $launcher; echo launcher_exit=$?\n");
  if (joins) {
    absl::StrAppend(&script, "wait $joiner; echo event_exit=$?\n");
    absl::StrAppend(&script, "cat ", event_out, ".join >> ", event_out, "\n");
  }
  return script;
}

JobRun Train(const std::string& name, const std::string& mode,
             const std::string& data_flags, const std::string& event) {
  JobRun run;
  const fs::path dir = Dir(name);
  const fs::path rd = dir / "run";
  const std::string local = BuildDir() + "/deploy/local/tessera_local";
  std::string script;
  const fs::path faults = dir / "faults";
  fs::create_directories(faults);
  if (event == "join" || event == "drain") {
    for (const char* worker : {"worker-0", "worker-1"}) {
      std::ofstream(faults / absl::StrCat(worker, ".step"))
          << "stop " << kTriggerStep - 1;
    }
    script =
        absl::StrCat("export TESSERA_FAULT_POINTS=", faults.string(), "\n");
  }
  if (event == "die") {
    // Worker 1 dies inside its 61st step, at a fault point: inside the
    // job whatever the machine's load (it takes about 90 steps an epoch),
    // where a kill after a count of lines in steps.jsonl could land after
    // the job's end.
    std::ofstream(faults / "worker-1.step") << "kill " << kDieAfterSteps;
    script =
        absl::StrCat("export TESSERA_FAULT_POINTS=", faults.string(), "\n");
  }
  absl::StrAppend(
      &script, local, " --num_ps=2 --num_workers=2 --elastic --max_restarts=0",
      " --run_dir=", rd.string(), " -- --mode=", mode, " --epochs=", kEpochs,
      " --batch_size=", mode == "sync" ? 64 : 32,
      " --worker_recovery_timeout_s=1", data_flags, " > ",
      (dir / "launcher.out").string(), " 2>&1 &\nlauncher=$!\n");
  const std::string event_out = (dir / "event.out").string();
  absl::StrAppend(&script,
                  MembershipEventScript(event, rd, faults, local, event_out,
                                        (dir / "launcher.out").string(),
                                        (dir / "status.out").string()));
  const fs::path script_path = dir / "run.sh";
  std::ofstream(script_path) << script;
  ShellResult shell = Shell("bash " + script_path.string());
  run.output = ReadFile(dir / "launcher.out");
  run.event_output = ReadFile(event_out);
  run.status = ReadFile(dir / "status.out");
  run.fault_hit = fs::exists(dir / "faults" / "worker-1.step.hit");
  run.both_stopped = shell.output.find("both_stopped") != std::string::npos;
  run.launcher_exit = ExitAfter(shell.output, "launcher_exit=");
  run.event_exit = ExitAfter(shell.output, "event_exit=");
  std::ifstream metrics(rd / "metrics.jsonl");
  std::string line;
  while (std::getline(metrics, line)) {
    run.metrics.push_back(nlohmann::json::parse(line));
  }
  return run;
}

// The undisturbed run `train` makes, `job` naming it. ctest runs each
// case in a process of its own: the run's metrics are kept in the
// temporary folder for the binaries it ran with (their modification times
// name it), so the cases of one job share one run.
std::vector<nlohmann::json> KeptBaseline(const std::string& job,
                                         const std::function<JobRun()>& train) {
  std::string key = job;
  for (const char* binary :
       {"/worker/tessera_worker", "/coordinator/tessera_coordinator",
        "/ps_server/tessera_ps"}) {
    std::error_code error;
    const auto mtime = fs::last_write_time(BuildDir() + binary, error);
    absl::StrAppend(&key, ":", mtime.time_since_epoch().count());
  }
  const fs::path kept = fs::path(::testing::TempDir()) /
                        absl::StrCat("tessera_elastic_baseline_",
                                     std::hash<std::string>()(key), ".jsonl");
  std::vector<nlohmann::json> metrics;
  std::ifstream in(kept);
  std::string line;
  while (std::getline(in, line)) metrics.push_back(nlohmann::json::parse(line));
  if (metrics.size() == static_cast<size_t>(kEpochs)) return metrics;
  JobRun run = train();
  EXPECT_EQ(run.launcher_exit, 0) << run.output;
  if (run.launcher_exit == 0) {
    std::ofstream out(kept);
    for (const nlohmann::json& m : run.metrics) out << m.dump() << "\n";
  }
  return run.metrics;
}

// The undisturbed synchronous run on `flags`' data.
std::vector<nlohmann::json> SyncBaseline(const std::string& flags) {
  return KeptBaseline(absl::StrCat("sync", flags),
                      [&] { return Train("baseline", "sync", flags, ""); });
}

using Case = std::tuple<std::string, std::string, std::string>;

class ElasticTest : public ::testing::TestWithParam<Case> {
 public:
  void SetUp() override {
    if (!fs::exists(kData))
      TESSERA_SKIP_UNLESS_REQUIRED(kRequireData)
          << kData << " is not installed";
  }
};

TEST_P(ElasticTest, EveryEpochTrainsEveryExampleOnce) {
  const auto& [event, mode, data] = GetParam();
  const std::string flags = data == "idx" ? IdxFlags() : TfRecordFlags();
  JobRun run =
      Train(absl::StrCat(event, "_", mode, "_", data), mode, flags, event);
  ASSERT_EQ(run.launcher_exit, 0) << run.output;
  ASSERT_EQ(run.metrics.size(), static_cast<size_t>(kEpochs)) << run.output;
  std::string counts;
  for (int e = 0; e < kEpochs; ++e) {
    EXPECT_EQ(run.metrics[e]["epoch"].get<int>(), e + 1);
    EXPECT_EQ(run.metrics[e]["examples"].get<int64_t>(), kTrain)
        << "epoch " << e + 1 << "\n"
        << run.output;
    // By identity, not only by count. TFRecord shards are streams: their
    // examples are (shard, position), which the coordinator checks itself.
    if (data == "idx") {
      EXPECT_EQ(run.metrics[e]["example_digest"],
                DigestText(DigestOfIndices(0, kTrain)))
          << "epoch " << e + 1;
    }
    absl::StrAppend(&counts, e == 0 ? "" : " ",
                    run.metrics[e]["examples"].get<int64_t>());
  }
  const double accuracy = run.metrics.back()["test_accuracy"].get<double>();
  // Three epochs over 6,000 images: an MLP is well past chance (0.1).
  EXPECT_GT(accuracy, 0.6);
  if (event == "join" || event == "drain") {
    EXPECT_TRUE(run.both_stopped)
        << "the workers never reached step " << kTriggerStep;
  }
  if (event == "join") {
    EXPECT_EQ(run.event_exit, 0) << run.event_output;
    EXPECT_THAT(run.output, HasSubstr("asked to join"));
    // The newcomer took steps: the end report's line for worker 2.
    const size_t at = run.output.find("  worker 2 ");
    ASSERT_NE(at, std::string::npos) << run.output;
    const std::string row =
        run.output.substr(at, run.output.find('\n', at) - at);
    EXPECT_THAT(row, MatchesRegex(".* active +[1-9][0-9]* steps")) << row;
  } else if (event == "drain") {
    EXPECT_EQ(run.event_exit, 0) << run.event_output;
    EXPECT_THAT(run.output, HasSubstr("worker 1 drained"));
    // tessera_ctl status shows the membership and its history.
    EXPECT_THAT(run.status, HasSubstr("membership (at least 1 worker):"));
    EXPECT_THAT(run.status, MatchesRegex("(.|\n)* worker 1 [^\n]* "
                                         "draining finishes the steps it "
                                         "holds\n(.|\n)*"));
    EXPECT_THAT(run.output, HasSubstr("worker 1 exited cleanly (it drained"));
    EXPECT_THAT(
        run.output,
        MatchesRegex("(.|\n)*  worker 1 [^\n]* drained +[0-9]+ steps(.|\n)*"));
  } else {
    EXPECT_TRUE(run.fault_hit) << "worker 1 never reached its fault point";
    EXPECT_THAT(run.output, HasSubstr("removed from the job"));
    EXPECT_THAT(
        run.output,
        MatchesRegex("(.|\n)*  worker 1 [^\n]* removed +[0-9]+ steps(.|\n)*"));
  }
  if (mode == "sync") {
    const std::vector<nlohmann::json> base = SyncBaseline(flags);
    ASSERT_EQ(base.size(), static_cast<size_t>(kEpochs));
    for (int e = 0; e < kEpochs; ++e) {
      for (const char* key : {"examples", "steps", "train_loss",
                              "train_accuracy", "test_accuracy"}) {
        EXPECT_EQ(run.metrics[e][key], base[e][key])
            << "epoch " << e + 1 << " " << key;
      }
      // The test loss is summed, in batches of floats, over the evaluating
      // workers' slices, which follow the workers active then: the same
      // model, its losses added in other batches, differs in float's last
      // bits.
      const double test_loss = base[e]["test_loss"].get<double>();
      EXPECT_NEAR(run.metrics[e]["test_loss"].get<double>(), test_loss,
                  1e-6 * test_loss)
          << "epoch " << e + 1;
    }
  }
  std::printf("[elastic] %s %s %s: examples per epoch %s; test accuracy %.4f\n",
              event.c_str(), mode.c_str(), data.c_str(), counts.c_str(),
              accuracy);
}

INSTANTIATE_TEST_SUITE_P(
    Elastic, ElasticTest,
    ::testing::Combine(::testing::Values("join", "drain", "die"),
                       ::testing::Values("async", "sync", "ssp:2"),
                       ::testing::Values("idx", "tfrecord")),
    [](const ::testing::TestParamInfo<Case>& info) {
      // "ssp:2" -> "ssp2": a test's name has no ':'.
      return absl::StrReplaceAll(
          absl::StrCat(std::get<0>(info.param), "_", std::get<1>(info.param),
                       "_", std::get<2>(info.param)),
          {{":", ""}});
    });

// Elastic mirrored and hybrid (#48 item 5): while a job of two workers
// trains its second epoch, a worker joins ("join") or worker 1 drains
// ("drain"); at the next round boundary the chief re-forms the all-reduce
// ring (three members, or one) and copies a member's replica onto a
// newcomer, and the rounds from then on have a part per member. Every
// epoch still trains each example once, by identity, and the newcomer
// takes steps or the drained worker leaves. A round then holds another
// number of parts, so the model is not the undisturbed run's after the
// change (both are printed); before it, it is, bit for bit.
JobRun TrainReplicas(const std::string& name, const std::string& mode,
                     const std::string& event) {
  JobRun run;
  const fs::path dir = Dir(name);
  const fs::path rd = dir / "run";
  const std::string local = BuildDir() + "/deploy/local/tessera_local";
  std::string script;
  const fs::path faults = dir / "faults";
  fs::create_directories(faults);
  script = absl::StrCat("export TESSERA_FAULT_POINTS=", faults.string(), "\n");
  if (event == "die") {
    // Worker 1 dies for good in its 111th step (epoch 2), at a fault
    // point; --elastic removes it after --worker_recovery_timeout_s.
    std::ofstream(faults / "worker-1.step") << "kill 110";
  } else if (!event.empty()) {
    // Both workers stop themselves in their 111th step while the worker
    // joins or drains (a count of steps.jsonl lines raced the job's end).
    for (const char* worker : {"worker-0", "worker-1"}) {
      std::ofstream(faults / absl::StrCat(worker, ".step")) << "stop 110";
    }
  }
  // "join_restart": once the ring re-formed with the newcomer, the chief
  // dies at its fault point `step` 5 steps later and is restarted.
  const bool restart = event == "join_restart";
  std::string then;
  if (restart) {
    then = absl::StrCat(
        "for i in $(seq 1 2400); do grep -q 'ring re-formed with workers 0, "
        "1, 2' ",
        rd.string(), "/chief.log && break; kill -0 $launcher || break; ",
        "sleep 0.05; done\necho kill 5 > ", (faults / "chief-0.step").string(),
        "\n");
  }
  absl::StrAppend(
      &script, local, " --num_ps=", mode == "mirrored" ? 0 : 2,
      " --num_workers=2 --max_restarts=", restart ? 1 : 0,
      event == "die" ? " --elastic" : "", " --run_dir=", rd.string(),
      " -- --mode=", mode, " --epochs=", kEpochs,
      " --batch_size=64 --worker_recovery_timeout_s=1 --checkpoint_dir=",
      rd.string(), "/checkpoints", IdxFlags(), " > ",
      (dir / "launcher.out").string(), " 2>&1 &\nlauncher=$!\n");
  const std::string event_out = (dir / "event.out").string();
  absl::StrAppend(&script,
                  MembershipEventScript(
                      restart ? "join" : event, rd, faults, local, event_out,
                      (dir / "launcher.out").string(), "", then));
  const fs::path script_path = dir / "run.sh";
  std::ofstream(script_path) << script;
  ShellResult shell = Shell("bash " + script_path.string());
  run.output = ReadFile(dir / "launcher.out");
  run.chief_log = ReadFile(rd / "chief.log");
  run.chief_hit = fs::exists(faults / "chief-0.step.hit");
  run.event_output = ReadFile(event_out);
  run.launcher_exit = ExitAfter(shell.output, "launcher_exit=");
  run.event_exit = ExitAfter(shell.output, "event_exit=");
  run.fault_hit = fs::exists(dir / "faults" / "worker-1.step.hit");
  run.both_stopped = shell.output.find("both_stopped") != std::string::npos;
  std::ifstream metrics(rd / "metrics.jsonl");
  std::string line;
  while (std::getline(metrics, line)) {
    run.metrics.push_back(nlohmann::json::parse(line));
  }
  return run;
}

// The undisturbed mirrored or hybrid run of TrainReplicas, kept.
std::vector<nlohmann::json> ReplicaBaseline(const std::string& mode) {
  return KeptBaseline(absl::StrCat("replicas ", mode, IdxFlags()), [&] {
    return TrainReplicas(
        absl::StrCat(absl::StrReplaceAll(mode, {{":", ""}}), "_baseline"), mode,
        "");
  });
}

// One epoch's line of an undisturbed run and of one with `event`.
void PrintEpoch(const std::string& mode, const std::string& event,
                const nlohmann::json& m) {
  std::printf(
      "[elastic] %s %-11s epoch %d: steps %lld train_loss %.6f "
      "train_accuracy %.4f test_loss %.6f test_accuracy %.4f\n",
      mode.c_str(), event.c_str(), m["epoch"].get<int>(),
      static_cast<long long>(m["steps"].get<int64_t>()),
      m["train_loss"].get<double>(), m["train_accuracy"].get<double>(),
      m["test_loss"].get<double>(), m["test_accuracy"].get<double>());
}

using ReplicaCase = std::tuple<std::string, std::string>;

class ElasticReplicasTest : public ::testing::TestWithParam<ReplicaCase> {
 public:
  void SetUp() override {
    if (!fs::exists(kData))
      TESSERA_SKIP_UNLESS_REQUIRED(kRequireData)
          << kData << " is not installed";
  }
};

class ElasticRingTest : public ::testing::Test {
 public:
  void SetUp() override {
    if (!fs::exists(kData))
      TESSERA_SKIP_UNLESS_REQUIRED(kRequireData)
          << kData << " is not installed";
  }
};

TEST_P(ElasticReplicasTest,
       TheRingIsReformedAndEveryEpochTrainsEachExampleOnce) {
  const auto& [event, mode] = GetParam();
  const std::string tag = absl::StrReplaceAll(mode, {{":", ""}});
  const std::vector<nlohmann::json> base = ReplicaBaseline(mode);
  const JobRun run =
      TrainReplicas(absl::StrCat(event, "_", tag, "_idx"), mode, event);
  ASSERT_EQ(run.launcher_exit, 0) << run.output;
  if (event != "die") {
    EXPECT_EQ(run.event_exit, 0) << run.event_output;
    EXPECT_TRUE(run.both_stopped) << "the workers never reached step 111";
  }
  ASSERT_EQ(run.metrics.size(), static_cast<size_t>(kEpochs)) << run.output;
  ASSERT_EQ(base.size(), static_cast<size_t>(kEpochs));
  EXPECT_THAT(run.output,
              MatchesRegex(absl::StrCat(
                  "(.|\n)*global step [0-9]+: the all-reduce ring re-formed "
                  "with workers ",
                  event == "join" ? "0, 1, 2" : "0", " in (.|\n)*")));
  for (int e = 0; e < kEpochs; ++e) {
    EXPECT_EQ(run.metrics[e]["examples"].get<int64_t>(), kTrain)
        << "epoch " << e + 1;
    EXPECT_EQ(run.metrics[e]["example_digest"],
              DigestText(DigestOfIndices(0, kTrain)))
        << "epoch " << e + 1;
    PrintEpoch(mode, "undisturbed", base[e]);
    PrintEpoch(mode, event, run.metrics[e]);
  }
  // Before the change the rounds are the undisturbed run's, bit for bit.
  EXPECT_EQ(run.metrics[0]["train_loss"], base[0]["train_loss"]);
  EXPECT_EQ(run.metrics[0]["test_accuracy"], base[0]["test_accuracy"]);
  EXPECT_GT(run.metrics.back()["test_accuracy"].get<double>(), 0.6);
  if (event == "join") {
    EXPECT_THAT(run.output, HasSubstr("asked to join"));
    // The newcomer took steps: the end report's line for worker 2.
    const size_t at = run.output.find("  worker 2 ");
    ASSERT_NE(at, std::string::npos) << run.output;
    const std::string row =
        run.output.substr(at, run.output.find('\n', at) - at);
    EXPECT_THAT(row, MatchesRegex(".* active +[1-9][0-9]* steps")) << row;
  } else if (event == "die") {
    EXPECT_TRUE(run.fault_hit) << "worker 1 never reached its fault point";
    EXPECT_THAT(run.output, HasSubstr("removed from the job"));
    EXPECT_THAT(
        run.output,
        MatchesRegex("(.|\n)*  worker 1 [^\n]* removed +[0-9]+ steps(.|\n)*"));
  } else {
    EXPECT_THAT(run.output, HasSubstr("worker 1 drained and told to exit"));
    EXPECT_THAT(
        run.output,
        MatchesRegex("(.|\n)*  worker 1 [^\n]* drained +[0-9]+ steps(.|\n)*"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    ElasticReplicas, ElasticReplicasTest,
    ::testing::Combine(::testing::Values("join", "drain", "die"),
                       ::testing::Values("mirrored", "hybrid:sync")),
    [](const ::testing::TestParamInfo<ReplicaCase>& info) {
      return absl::StrReplaceAll(
          absl::StrCat(std::get<0>(info.param), "_", std::get<1>(info.param)),
          {{":", ""}});
    });

// A change that keeps the ring's size keeps the rounds' parts: worker 2
// joins and worker 1 drains in the same stop, the ring re-forms with
// workers 0 and 2 (worker 2 given worker 0's replica), and every round
// still averages two parts in the plan's order. So a hybrid:sync job
// stays the undisturbed run with the same number of parts, every epoch
// bit for bit, through the copy of the replica and the ring's change.
TEST_F(ElasticRingTest, ARingOfTheSameSizeKeepsHybridSyncBitForBit) {
  const std::vector<nlohmann::json> base = ReplicaBaseline("hybrid:sync");
  const JobRun run =
      TrainReplicas("replace_hybridsync", "hybrid:sync", "replace");
  ASSERT_EQ(run.launcher_exit, 0) << run.output;
  EXPECT_EQ(run.event_exit, 0) << run.event_output;
  EXPECT_TRUE(run.both_stopped) << "the workers never reached step 111";
  EXPECT_THAT(run.output,
              MatchesRegex("(.|\n)*global step [0-9]+: the all-reduce ring "
                           "re-formed with workers 0, 2 in (.|\n)*"));
  EXPECT_THAT(run.output, HasSubstr("worker 1 drained and told to exit"));
  EXPECT_THAT(run.output,
              MatchesRegex("(.|\n)*  worker 2 [^\n]* active +[1-9][0-9]* "
                           "steps(.|\n)*"));
  ASSERT_EQ(run.metrics.size(), static_cast<size_t>(kEpochs)) << run.output;
  ASSERT_EQ(base.size(), static_cast<size_t>(kEpochs));
  for (int e = 0; e < kEpochs; ++e) {
    PrintEpoch("hybrid:sync", "undisturbed", base[e]);
    PrintEpoch("hybrid:sync", "replace", run.metrics[e]);
    EXPECT_EQ(run.metrics[e]["example_digest"],
              DigestText(DigestOfIndices(0, kTrain)))
        << "epoch " << e + 1;
    for (const char* key : {"examples", "steps", "train_loss", "train_accuracy",
                            "test_loss", "test_accuracy"}) {
      EXPECT_EQ(run.metrics[e][key], base[e][key])
          << "epoch " << e + 1 << " " << key;
    }
  }
}

// A chief restarted after a ring join knows only its cluster spec's
// workers, whose ring still holds the newcomer: its configuration puts
// them back on the spec's ring (rank w of 2, TrainingWorker::Configure),
// where they were refused before ("all-reduce group was started as rank 0
// of 3"). The chief dies at its fault point `step` 5 steps after the ring
// re-formed with workers 0, 1, 2, resumes from its last checkpoint, and
// the job completes with every epoch once, each example once.
TEST_F(ElasticRingTest, AChiefRestartedAfterARingJoinPutsTheRingBack) {
  const JobRun run =
      TrainReplicas("join_restart_mirrored", "mirrored", "join_restart");
  ASSERT_EQ(run.launcher_exit, 0) << run.output << run.chief_log;
  EXPECT_TRUE(run.both_stopped) << "the workers never reached step 111";
  EXPECT_THAT(run.chief_log,
              HasSubstr("the all-reduce ring re-formed with workers 0, 1, 2"));
  EXPECT_TRUE(run.chief_hit) << "the chief never reached its fault point";
  EXPECT_THAT(run.chief_log, HasSubstr("=== restart 1"));
  EXPECT_THAT(run.chief_log, Not(HasSubstr("was started as rank")));
  ASSERT_EQ(run.metrics.size(), static_cast<size_t>(kEpochs)) << run.output;
  for (int e = 0; e < kEpochs; ++e) {
    PrintEpoch("mirrored", "join_restart", run.metrics[e]);
    EXPECT_EQ(run.metrics[e]["epoch"].get<int>(), e + 1);
    EXPECT_EQ(run.metrics[e]["examples"].get<int64_t>(), kTrain)
        << "epoch " << e + 1;
    EXPECT_EQ(run.metrics[e]["example_digest"],
              DigestText(DigestOfIndices(0, kTrain)))
        << "epoch " << e + 1;
  }
  EXPECT_GT(run.metrics.back()["test_accuracy"].get<double>(), 0.6);
}

}  // namespace
}  // namespace tessera
