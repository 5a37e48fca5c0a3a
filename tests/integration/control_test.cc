// tessera_ctl against a real job on loopback: status, schedule, join,
// checkpoint and stop, and the job token it must carry.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "deploy/local/free_ports.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/scratch_dir.h"
#include "tests/shell_command.h"
#include "tests/skip_unless_required.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Incomplete TLS flags are a command-line error (exit 2) naming what is
// missing, before any call (tessera_ctl logged them and tried anyway).
TEST(ControlTest, IncompleteTlsFlagsExitTwo) {
  ShellResult run = Shell(absl::StrCat(
      BuildDir(), "/coordinator/tessera_ctl --coordinator=127.0.0.1:1",
      " --tls_cert=/dev/null status"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("missing --tls_key, --tls_ca"));
}

// "-5" is a count, not a flag: said in the command's words, not as
// "unknown command line flag '5'".
TEST(ControlTest, ANegativeCountIsCalledThat) {
  ShellResult run = Shell(absl::StrCat(
      BuildDir(), "/coordinator/tessera_ctl --coordinator=127.0.0.1:1",
      " schedule -5"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output,
              HasSubstr("the number of steps must be a positive integer, got "
                        "-5"));
  EXPECT_THAT(run.output, Not(HasSubstr("flag")));
}

// Pointed at a parameter server, tessera_ctl says the address is not a
// coordinator's (gRPC's own answer is an empty UNIMPLEMENTED).
TEST(ControlTest, AParameterServerIsNotTakenForACoordinator) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(1);
  ASSERT_TRUE(ports.ok()) << ports.status();
  const std::string address = absl::StrCat("127.0.0.1:", (*ports)[0]);
  const fs::path log = fs::path(::testing::TempDir()) /
                       absl::StrCat("tessera_control_ps_", getpid(), ".log");
  // The server, then tessera_ctl once it serves, then the server stopped.
  ShellResult run = Shell(absl::StrCat(
      "TF_CONFIG='{\"cluster\": {\"ps\": [\"", address,
      "\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}' ", BuildDir(),
      "/ps_server/tessera_ps > ", log.string(), " 2>&1 & ps=$!; ",
      "for i in $(seq 300); do grep -q 'serving at' ", log.string(),
      " && break; sleep 0.1; done; ", BuildDir(),
      "/coordinator/tessera_ctl --coordinator=", address,
      " status 2>&1; rc=$?; kill $ps; wait $ps; exit $rc"));
  EXPECT_EQ(run.exit_code, 2) << run.output << ReadFile(log);
  EXPECT_THAT(run.output,
              HasSubstr(absl::StrCat(
                  address,
                  " does not serve the coordinator's control "
                  "service (is it a parameter server or a worker?")));
  fs::remove(log);
}

TEST(ControlTest, StatusScheduleJoinCheckpointStop) {
  if (!fs::exists(kData))
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireData) << kData << " is not installed";
  const fs::path dir = ScratchDir(absl::StrCat("tessera_control_", getpid()));
  const fs::path rd = dir / "run";
  const fs::path out = dir / "launcher.out";
  const std::string ctl = BuildDir() + "/coordinator/tessera_ctl";
  // Start a job that waits for commands after its one epoch, then drive it.
  const std::string script = absl::StrCat(
      BuildDir(), "/deploy/local/tessera_local --num_ps=2 --num_workers=2",
      " --run_dir=", rd.string(),
      " -- --epochs=1 --train_examples=6000 --test_examples=1000",
      " --checkpoint_dir=", rd.string(), "/checkpoints --wait_for_commands > ",
      out.string(), " 2>&1 &\nlauncher=$!\n",
      "for i in $(seq 1 1200); do grep -q 'waiting for commands' ",
      out.string(), " && break; sleep 0.1; done\n",
      "addr=$(awk '$1 == \"chief\" {print $2}' ", out.string(), ")\n", "ctl=\"",
      ctl, " --coordinator=$addr\"\n", "$ctl status; echo no_token_exit=$?\n",
      "export TESSERA_JOB_TOKEN=$(cat ", rd.string(), "/job.token)\n",
      "$ctl --json status > ", dir.string(),
      "/status.json; echo status_exit=$?\n",
      "$ctl schedule 30; echo schedule_exit=$?\n",
      "$ctl schedule 0; echo bad_schedule_exit=$?\n", "$ctl --json join > ",
      dir.string(), "/join.json; echo join_exit=$?\n",
      "echo checkpoint=$($ctl checkpoint)\n",
      "$ctl stop $'test over\\e[2J'; echo stop_exit=$?\n",
      "wait $launcher; echo launcher_exit=$?\n");
  std::ofstream(dir / "run.sh") << script;
  ShellResult run = Shell("bash " + (dir / "run.sh").string());
  std::stringstream launcher;
  launcher << std::ifstream(out).rdbuf();
  SCOPED_TRACE(run.output + "\n--- launcher ---\n" + launcher.str());

  EXPECT_THAT(run.output, HasSubstr("UNAUTHENTICATED"));
  // A missing token is the caller's to fix, not a failure to retry.
  EXPECT_THAT(run.output, HasSubstr("no_token_exit=2"));
  EXPECT_THAT(run.output, HasSubstr("status_exit=0"));
  EXPECT_THAT(run.output, HasSubstr("schedule_exit=0"));
  EXPECT_THAT(run.output, HasSubstr("bad_schedule_exit=2"));
  EXPECT_THAT(run.output, HasSubstr("join_exit=0"));
  EXPECT_THAT(run.output, HasSubstr("stop_exit=0"));
  EXPECT_THAT(run.output, HasSubstr("launcher_exit=0"));

  std::stringstream status_text, join_text;
  status_text << std::ifstream(dir / "status.json").rdbuf();
  join_text << std::ifstream(dir / "join.json").rdbuf();
  nlohmann::json status =
      nlohmann::json::parse(status_text.str(), nullptr, false);
  nlohmann::json joined =
      nlohmann::json::parse(join_text.str(), nullptr, false);
  ASSERT_FALSE(status.is_discarded());
  ASSERT_FALSE(joined.is_discarded());
  // One epoch of 6000 examples in batches of 64: 94 steps.
  EXPECT_EQ(status["state"], "waiting for commands");
  EXPECT_EQ(std::stoll(status["stepsDone"].get<std::string>()), 94);
  ASSERT_EQ(status["workers"].size(), 2u);
  ASSERT_EQ(status["servers"].size(), 2u);
  for (const auto& server : status["servers"]) {
    EXPECT_TRUE(server["up"].get<bool>());
    EXPECT_EQ(std::stoll(server["numShards"].get<std::string>()), 4);
    EXPECT_GT(std::stoll(server["residentBytes"].get<std::string>()), 0);
    // 94 steps, each pulling from and pushing to both servers.
    EXPECT_GE(std::stoll(server["pushesServed"].get<std::string>()), 94);
    EXPECT_GE(std::stoll(server["pullsServed"].get<std::string>()), 94);
  }
  // Join returned after the 30 scheduled steps ran.
  EXPECT_EQ(std::stoll(joined["stepsDone"].get<std::string>()), 94 + 30);

  const size_t at = run.output.find("checkpoint=");
  ASSERT_NE(at, std::string::npos);
  const std::string path =
      run.output.substr(at + 11, run.output.find('\n', at) - at - 11);
  EXPECT_THAT(path, HasSubstr("ckpt-0000000124"));
  EXPECT_TRUE(fs::exists(fs::path(path) / "manifest")) << path;
  // The reason's terminal escape (clear screen) arrives escaped, not raw.
  EXPECT_THAT(launcher.str(),
              HasSubstr("stopped by the operator (test over\\x1b[2J)"));
  EXPECT_THAT(launcher.str(), Not(HasSubstr("\x1b[2J")));
}

// Issue #33, defect 12: a stop inside an epoch waits for the steps in
// flight, checkpoints at that step, reports what was trained and exits 3;
// the job started again on that checkpoint resumes the epoch where it
// stopped, and the epoch covers every example exactly once (the job would
// fail its coverage check otherwise). Both workers stop themselves
// (SIGSTOP at the fault point "step", common/process/fault_point.h) in
// their 551st step, inside epoch 2 (each takes about 469 steps an epoch),
// and stay stopped while the stop is asked for, so it lands inside epoch 2
// whatever the machine's load: seeing epoch 1's line and then pausing them
// could come too late.
TEST(ControlTest, StopInsideAnEpochCheckpointsThereAndResumes) {
  if (!fs::exists(kData))
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireData) << kData << " is not installed";
  const fs::path dir = ScratchDir(absl::StrCat("tessera_stop_", getpid()));
  const fs::path rd = dir / "run";
  const fs::path out = dir / "launcher.out";
  const std::string ck = (dir / "checkpoints").string();
  const std::string ctl = BuildDir() + "/coordinator/tessera_ctl";
  const std::string local =
      BuildDir() + "/deploy/local/tessera_local --num_ps=2 --num_workers=2";
  // 30000 examples in batches of 32: 938 steps an epoch.
  const std::string job = absl::StrCat(
      " -- --epochs=3 --train_examples=30000 --test_examples=1000"
      " --batch_size=32 --checkpoint_dir=",
      ck);
  const fs::path faults = dir / "faults";
  fs::create_directories(faults);
  for (const char* worker : {"worker-0", "worker-1"}) {
    std::ofstream(faults / absl::StrCat(worker, ".step")) << "stop 550";
  }
  const std::string hit0 = (faults / "worker-0.step.hit").string();
  const std::string hit1 = (faults / "worker-1.step.hit").string();
  const std::string script = absl::StrCat(
      "export TESSERA_FAULT_POINTS=", faults.string(), "\n", local,
      " --run_dir=", rd.string(), job, " > ", out.string(),
      " 2>&1 &\nlauncher=$!\n", "for i in $(seq 1 1200); do [ -e ", hit0,
      " ] && [ -e ", hit1, " ] && break; sleep 0.05; done\n", "[ -e ", hit0,
      " ] && [ -e ", hit1, " ] && echo both_stopped\n",
      "addr=$(awk '$1 == \"chief\" {print $2}' ", out.string(), ")\n",
      "export TESSERA_JOB_TOKEN=$(cat ", rd.string(), "/job.token)\n", ctl,
      " --coordinator=$addr stop 'mid epoch'; echo stop_exit=$?\n",
      "kill -CONT $(cat ", rd.string(), "/pids/worker-0) $(cat ", rd.string(),
      "/pids/worker-1)\n", "wait $launcher; echo launcher_exit=$?\n", "ls ", ck,
      "\n", local, " --run_dir=", rd.string(), "2", job, " > ", dir.string(),
      "/resumed.out 2>&1; echo resumed_exit=$?\n");
  std::ofstream(dir / "run.sh") << script;
  ShellResult run = Shell("bash " + (dir / "run.sh").string());
  std::stringstream launcher, resumed;
  launcher << std::ifstream(out).rdbuf();
  resumed << std::ifstream(dir / "resumed.out").rdbuf();
  SCOPED_TRACE(run.output + "\n--- launcher ---\n" + launcher.str() +
               "\n--- resumed ---\n" + resumed.str());

  // The moment happened: both workers stopped at their fault point.
  EXPECT_THAT(run.output, HasSubstr("both_stopped"));
  EXPECT_THAT(run.output, HasSubstr("stop_exit=0"));
  EXPECT_THAT(run.output, HasSubstr("launcher_exit=3"));
  EXPECT_THAT(launcher.str(),
              HasSubstr("stopped by the operator (mid epoch) at step "));
  EXPECT_THAT(launcher.str(), HasSubstr(" of 938 of epoch 2; checkpoint "));
  EXPECT_THAT(launcher.str(), HasSubstr("resumes the epoch there"));
  EXPECT_THAT(launcher.str(), HasSubstr("2 (stopped)"));
  EXPECT_THAT(launcher.str(),
              HasSubstr("of the 938 steps of epoch 2 (stopped by the "
                        "operator)"));
  EXPECT_THAT(launcher.str(), HasSubstr("stopped by the operator before"));
  // The checkpoint is named after the job's step at the stop.
  const size_t at = launcher.str().find("(job step ");
  ASSERT_NE(at, std::string::npos);
  const long long step = std::stoll(launcher.str().substr(at + 10));
  EXPECT_GT(step, 938);
  EXPECT_LT(step, 2 * 938);
  EXPECT_THAT(run.output, HasSubstr(absl::StrFormat("ckpt-%010lld", step)));

  EXPECT_THAT(run.output, HasSubstr("resumed_exit=0"));
  EXPECT_THAT(resumed.str(), HasSubstr("steps of the epoch already done)"));
  EXPECT_THAT(resumed.str(), HasSubstr("epoch 2/3: train loss"));
  EXPECT_THAT(resumed.str(), HasSubstr("epoch 3/3: train loss"));
  EXPECT_THAT(resumed.str(), Not(HasSubstr("epoch 1/3: train loss")));
}

// Issue #33, defect 11: extra steps that run past the end of an epoch's
// plan are run in parts, and each part's progress line names its own steps
// (it read "steps 1-100 ... 36/36 steps").
TEST(ControlTest, ExtraStepsProgressNamesEachPartsSteps) {
  if (!fs::exists(kData))
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireData) << kData << " is not installed";
  const fs::path dir = ScratchDir(absl::StrCat("tessera_extra_", getpid()));
  const fs::path rd = dir / "run";
  const fs::path out = dir / "launcher.out";
  const std::string ctl = BuildDir() + "/coordinator/tessera_ctl";
  // 6000 examples in batches of 64: 94 steps an epoch, so 100 extra steps
  // are the 94 of the next epoch's plan, then 6 of the one after.
  const std::string script = absl::StrCat(
      BuildDir(), "/deploy/local/tessera_local --num_ps=1 --num_workers=2",
      " --run_dir=", rd.string(),
      " -- --epochs=1 --train_examples=6000 --test_examples=1000",
      " --wait_for_commands > ", out.string(), " 2>&1 &\nlauncher=$!\n",
      "for i in $(seq 1 1200); do grep -q 'waiting for commands' ",
      out.string(), " && break; sleep 0.1; done\n",
      "addr=$(awk '$1 == \"chief\" {print $2}' ", out.string(), ")\n",
      "export TESSERA_JOB_TOKEN=$(cat ", rd.string(), "/job.token)\n", ctl,
      " --coordinator=$addr schedule 100\n", ctl, " --coordinator=$addr join\n",
      ctl, " --coordinator=$addr stop\n", "wait $launcher\n");
  std::ofstream(dir / "run.sh") << script;
  ShellResult run = Shell("bash " + (dir / "run.sh").string());
  std::stringstream launcher;
  launcher << std::ifstream(out).rdbuf();
  SCOPED_TRACE(run.output + "\n--- launcher ---\n" + launcher.str());
  EXPECT_THAT(launcher.str(), HasSubstr("steps 1-94 ["));
  EXPECT_THAT(launcher.str(), HasSubstr("94/94 steps"));
  EXPECT_THAT(launcher.str(), HasSubstr("steps 95-100 ["));
  EXPECT_THAT(launcher.str(), HasSubstr("6/6 steps"));
  EXPECT_THAT(launcher.str(), Not(HasSubstr("steps 1-100 [")));
}

}  // namespace
}  // namespace tessera
