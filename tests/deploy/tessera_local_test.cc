// Runs the real tessera_local over stand-in binaries (shell scripts in a
// fake build root, --bin_dir): the job token, the pid files and the restart
// policy, without training anything.

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "deploy/local/process_group.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/shell_command.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

void WriteExecutable(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  chmod(path.c_str(), 0755);
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

template <typename Predicate>
bool Eventually(Predicate predicate, absl::Duration limit = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (predicate()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return predicate();
}

// Servers print their command line and run until stopped, or exit 0 once
// $TESSERA_FAKE_DIR/servers_exit appears; the coordinator prints its own,
// then exits with the code in $TESSERA_FAKE_DIR/finish once that file
// appears, first shutting the servers down when
// $TESSERA_FAKE_DIR/shutdown_cluster exists. With --dry_run (the
// launcher's check before it starts anything) it prints its command line
// and exits 0, or 2 when $TESSERA_FAKE_DIR/refuse exists.
constexpr char kFakeServer[] = R"sh(#!/bin/sh
echo "started $*"
while [ ! -e "$TESSERA_FAKE_DIR/servers_exit" ]; do sleep 0.05; done
)sh";
constexpr char kFakeCoordinator[] = R"sh(#!/bin/sh
case " $* " in
  *" --dry_run "*)
    echo "dry run $*"
    if [ -e "$TESSERA_FAKE_DIR/refuse" ]; then
      echo "bad job: the model has no loss" >&2
      exit 2
    fi
    exit 0;;
esac
echo "started $*"
while [ ! -s "$TESSERA_FAKE_DIR/finish" ]; do sleep 0.05; done
if [ -e "$TESSERA_FAKE_DIR/shutdown_cluster" ]; then
  touch "$TESSERA_FAKE_DIR/servers_exit"
fi
exit "$(cat "$TESSERA_FAKE_DIR/finish")"
)sh";

class TesseraLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/tessera_local_test.XXXXXX";
    dir_ = mkdtemp(pattern.data());
    for (const char* sub :
         {"/bin", "/bin/ps_server", "/bin/worker", "/bin/coordinator"}) {
      mkdir((dir_ + sub).c_str(), 0755);
    }
    WriteExecutable(dir_ + "/bin/ps_server/tessera_ps", kFakeServer);
    WriteExecutable(dir_ + "/bin/worker/tessera_worker", kFakeServer);
    WriteExecutable(dir_ + "/bin/coordinator/tessera_coordinator",
                    kFakeCoordinator);
    run_dir_ = dir_ + "/run";
  }

  void TearDown() override {
    group_.StopAll(absl::Seconds(5));
    system(absl::StrCat("rm -rf '", dir_, "'").c_str());
  }

  // Starts tessera_local with `flags` on 2 ps and 1 worker; its output goes
  // to launcher.log.
  void StartLauncher(const std::vector<std::string>& flags) {
    ChildSpec spec;
    spec.name = absl::StrCat("launcher-", launches_++);
    spec.binary = BuildDir() + "/deploy/local/tessera_local";
    spec.args = {"--num_ps=2", "--num_workers=1", "--grace_period_s=2",
                 "--bin_dir=" + dir_ + "/bin", "--run_dir=" + run_dir_};
    spec.args.insert(spec.args.end(), flags.begin(), flags.end());
    spec.env.emplace_back("TESSERA_FAKE_DIR", dir_);
    spec.log_path = dir_ + "/launcher.log";
    absl::StatusOr<pid_t> pid = group_.Start(spec);
    ASSERT_TRUE(pid.ok()) << pid.status();
  }

  // Waits for the launcher to exit; its exit code, or -1.
  int WaitForLauncher() {
    std::optional<ChildExit> exit = group_.WaitAny(absl::Seconds(60));
    if (!exit.has_value() || exit->status.signaled) return -1;
    return exit->status.code;
  }

  std::string LauncherOutput() const {
    return ReadFile(dir_ + "/launcher.log");
  }

  // The pid in pids/<task>, once the file exists (0 before).
  pid_t PidOf(const std::string& task) const {
    int pid = 0;
    if (!absl::SimpleAtoi(absl::StripTrailingAsciiWhitespace(
                              ReadFile(absl::StrCat(run_dir_, "/pids/", task))),
                          &pid)) {
      return 0;
    }
    return pid;
  }

  // Kills the process in pids/<task> with SIGKILL once it has started (its
  // log has `starts` "started" lines) and waits for its pid file to change.
  void KillAndWaitForRestart(const std::string& task, const std::string& log,
                             int starts) {
    // The child logs "started" as soon as it runs, which can be before the
    // launcher has written its pid file: wait for both.
    ASSERT_TRUE(Eventually([&] {
      return Count(ReadFile(run_dir_ + "/" + log), "started ") == starts &&
             PidOf(task) > 0;
    })) << LauncherOutput();
    const pid_t pid = PidOf(task);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    ASSERT_TRUE(Eventually([&] {
      const pid_t now = PidOf(task);
      return now != pid && now > 0;
    })) << LauncherOutput();
  }

  void Finish(int code) {
    std::ofstream(dir_ + "/finish.tmp") << code << "\n";
    rename((dir_ + "/finish.tmp").c_str(), (dir_ + "/finish").c_str());
  }

  std::string dir_;
  std::string run_dir_;
  int launches_ = 0;
  ProcessGroup group_;
};

// Issue #33, defect 5: a dry run through the launcher prints the
// coordinator's plan and starts nothing.
TEST_F(TesseraLocalTest, DryRunStartsNothing) {
  StartLauncher({"--", "--dry_run"});
  EXPECT_EQ(WaitForLauncher(), 0) << LauncherOutput();
  EXPECT_THAT(LauncherOutput(), HasSubstr("dry run "));
  EXPECT_THAT(LauncherOutput(), Not(HasSubstr("started ")));
  EXPECT_FALSE(std::ifstream(run_dir_ + "/ps-0.log").good());
  EXPECT_FALSE(std::ifstream(run_dir_ + "/chief.log").good());
}

// Issue #33, defect 3: a job the coordinator refuses is refused once, in
// the coordinator's words, before any process starts, with its exit code.
TEST_F(TesseraLocalTest, RefusedJobStartsNothing) {
  std::ofstream(dir_ + "/refuse") << "\n";
  StartLauncher({});
  EXPECT_EQ(WaitForLauncher(), 2) << LauncherOutput();
  EXPECT_THAT(LauncherOutput(), HasSubstr("bad job: the model has no loss"));
  EXPECT_THAT(LauncherOutput(), HasSubstr("nothing was started"));
  EXPECT_FALSE(std::ifstream(run_dir_ + "/ps-0.log").good());
  EXPECT_FALSE(std::ifstream(run_dir_ + "/worker-0.log").good());
}

TEST_F(TesseraLocalTest, GivesEveryProcessThePrivateTokenFile) {
  StartLauncher({});
  const std::string chief_log = run_dir_ + "/chief.log";
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(ReadFile(chief_log), "started");
  })) << LauncherOutput();
  Finish(0);
  EXPECT_EQ(WaitForLauncher(), 0) << LauncherOutput();

  const std::string token_file = run_dir_ + "/job.token";
  struct stat st;
  ASSERT_EQ(stat(token_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  const std::string token(
      absl::StripTrailingAsciiWhitespace(ReadFile(token_file)));
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_THAT(LauncherOutput(), Not(HasSubstr(token)));

  const std::string flag = "--job_token_file=" + token_file;
  for (const char* log : {"ps-0.log", "ps-1.log", "worker-0.log"}) {
    EXPECT_THAT(ReadFile(run_dir_ + "/" + log), HasSubstr(flag)) << log;
  }
  const std::string chief = ReadFile(chief_log);
  EXPECT_THAT(chief, HasSubstr(flag));
  EXPECT_THAT(chief,
              HasSubstr("--checkpoint_dir=" + run_dir_ + "/checkpoints"));
  EXPECT_THAT(chief, HasSubstr("--run_dir=" + run_dir_));
  EXPECT_THAT(LauncherOutput(), Not(HasSubstr("restarting")));
}

// An evaluator that fails at once is reported and training carries on: the
// job still succeeds, nothing is restarted. It watches the coordinator's
// checkpoint folder and is no member of the cluster.
TEST_F(TesseraLocalTest, FailingEvaluatorNeverStopsTheJob) {
  mkdir((dir_ + "/bin/worker/evaluate").c_str(), 0755);
  WriteExecutable(dir_ + "/bin/worker/evaluate/tessera_evaluator",
                  "#!/bin/sh\necho \"started $*\"\nexit 1\n");
  StartLauncher({"--evaluator", "--", "--checkpoint_dir=" + dir_ + "/ck"});
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(LauncherOutput(), "training goes on without it");
  })) << LauncherOutput();
  Finish(0);
  EXPECT_EQ(WaitForLauncher(), 0) << LauncherOutput();
  EXPECT_THAT(ReadFile(run_dir_ + "/evaluator.log"),
              HasSubstr("started --checkpoint_dir=" + dir_ +
                        "/ck --run_dir=" + run_dir_));
  EXPECT_THAT(ReadFile(run_dir_ + "/cluster.json"),
              Not(HasSubstr("evaluator")));
  EXPECT_THAT(LauncherOutput(), Not(HasSubstr("restarting")));
}

TEST_F(TesseraLocalTest, EachRunGetsANewToken) {
  StartLauncher({});
  Finish(0);
  ASSERT_EQ(WaitForLauncher(), 0) << LauncherOutput();
  const std::string first = ReadFile(run_dir_ + "/job.token");
  StartLauncher({});
  ASSERT_EQ(WaitForLauncher(), 0) << LauncherOutput();
  const std::string second = ReadFile(run_dir_ + "/job.token");
  EXPECT_FALSE(first.empty());
  EXPECT_NE(first, second);
}

TEST_F(TesseraLocalTest, RestartsAKilledServerAndAKilledWorker) {
  StartLauncher({});
  const pid_t ps0 = [&] {
    pid_t pid = 0;
    Eventually([&] { return (pid = PidOf("ps-0")) > 0; });
    return pid;
  }();
  ASSERT_GT(ps0, 0);
  KillAndWaitForRestart("ps-1", "ps-1.log", 1);
  KillAndWaitForRestart("worker-0", "worker-0.log", 1);
  KillAndWaitForRestart("worker-0", "worker-0.log", 2);
  // Restarted with the same command line, the log appended to.
  EXPECT_TRUE(Eventually([&] {
    return Count(ReadFile(run_dir_ + "/worker-0.log"), "started ") == 3;
  }));
  const std::string ps1_log = ReadFile(run_dir_ + "/ps-1.log");
  EXPECT_THAT(ps1_log, HasSubstr("=== restart 1 after signal 9 ==="));
  const size_t separator = ps1_log.find("===");
  ASSERT_NE(separator, std::string::npos);
  const std::string first_run = ps1_log.substr(0, ps1_log.find('\n'));
  const std::string second_run =
      ps1_log.substr(ps1_log.find('\n', separator) + 1);
  EXPECT_EQ(first_run + "\n", second_run);
  EXPECT_THAT(ReadFile(run_dir_ + "/worker-0.log"),
              HasSubstr("=== restart 2 after signal 9 ==="));
  // The other server was left alone.
  EXPECT_EQ(PidOf("ps-0"), ps0);
  EXPECT_EQ(kill(ps0, 0), 0);

  Finish(0);
  EXPECT_EQ(WaitForLauncher(), 0) << LauncherOutput();
  const std::string out = LauncherOutput();
  EXPECT_THAT(out, HasSubstr("ps 1 died (signal 9); restarting it (1 of 3)"));
  EXPECT_THAT(out,
              HasSubstr("worker 0 died (signal 9); restarting it (1 of 3)"));
  EXPECT_THAT(out,
              HasSubstr("worker 0 died (signal 9); restarting it (2 of 3)"));
  EXPECT_THAT(out, HasSubstr("done"));
}

TEST_F(TesseraLocalTest, ExhaustedRestartsStopTheJobAndNameTheProcess) {
  StartLauncher({"--max_restarts=1"});
  KillAndWaitForRestart("ps-0", "ps-0.log", 1);
  ASSERT_TRUE(Eventually([&] {
    return Count(ReadFile(run_dir_ + "/ps-0.log"), "started ") == 2;
  }));
  kill(PidOf("ps-0"), SIGKILL);
  EXPECT_EQ(WaitForLauncher(), 1) << LauncherOutput();
  const std::string out = LauncherOutput();
  EXPECT_THAT(out, HasSubstr("ps 0 died (signal 9); restarting it (1 of 1)"));
  EXPECT_THAT(out, HasSubstr("ps-0"));
  EXPECT_THAT(out, HasSubstr("after 1 restart"));
  EXPECT_THAT(out, HasSubstr("last 20 lines of " + run_dir_ + "/ps-0.log"));
  EXPECT_THAT(out, HasSubstr("stopping all processes"));
}

TEST_F(TesseraLocalTest, ZeroRestartsStopsAtTheFirstDeath) {
  StartLauncher({"--max_restarts=0"});
  ASSERT_TRUE(Eventually([&] { return PidOf("worker-0") > 0; }));
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(ReadFile(run_dir_ + "/worker-0.log"), "started");
  }));
  kill(PidOf("worker-0"), SIGKILL);
  EXPECT_EQ(WaitForLauncher(), 1) << LauncherOutput();
  const std::string out = LauncherOutput();
  EXPECT_THAT(out, HasSubstr("worker-0"));
  EXPECT_THAT(out, HasSubstr("SIGKILL"));
  EXPECT_THAT(out, Not(HasSubstr("restarting")));
}

TEST_F(TesseraLocalTest, FailingCoordinatorIsRestartedThenFailsTheRun) {
  Finish(5);
  StartLauncher({"--max_restarts=2"});
  EXPECT_EQ(WaitForLauncher(), 1) << LauncherOutput();
  const std::string out = LauncherOutput();
  EXPECT_THAT(out, HasSubstr("coordinator died (exit code 5); restarting it "
                             "(1 of 2)"));
  EXPECT_THAT(out, HasSubstr("coordinator died (exit code 5); restarting it "
                             "(2 of 2)"));
  EXPECT_THAT(out, HasSubstr("exited with code 5, after 2 restarts"));
  EXPECT_EQ(Count(ReadFile(run_dir_ + "/chief.log"), "started "), 3);
}

// A bad job (exit code 2) is not restarted, and the launcher exits 2 too,
// so scripts tell a mistake in the job from a failure while training.
TEST_F(TesseraLocalTest, ConfigurationErrorIsNotRestarted) {
  Finish(2);
  StartLauncher({});
  EXPECT_EQ(WaitForLauncher(), 2) << LauncherOutput();
  EXPECT_THAT(LauncherOutput(), Not(HasSubstr("restarting")));
  EXPECT_THAT(LauncherOutput(), HasSubstr("a restart would not fix"));
}

TEST_F(TesseraLocalTest, NothingIsRestartedOnceTheClusterShutsDown) {
  StartLauncher({});
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(ReadFile(run_dir_ + "/chief.log"), "started");
  })) << LauncherOutput();
  const pid_t chief = PidOf("chief-0");
  const pid_t ps0 = PidOf("ps-0");
  // As when the coordinator shuts the cluster down before it fails.
  std::ofstream(dir_ + "/servers_exit") << "\n";
  ASSERT_TRUE(Eventually([&] { return kill(ps0, 0) != 0; }));
  kill(chief, SIGKILL);
  EXPECT_EQ(WaitForLauncher(), 1) << LauncherOutput();
  const std::string out = LauncherOutput();
  EXPECT_THAT(out, Not(HasSubstr("restarting")));
  EXPECT_THAT(out, HasSubstr("coordinator (pid"));
  EXPECT_THAT(out, HasSubstr("killed by signal 9 (SIGKILL); not restarted, "
                             "since "));
  EXPECT_THAT(out, HasSubstr(" had already exited"));
}

// Issue #42, defect 10: a coordinator that refused its job (exit 2) after
// the servers' clean exits (the shutdown it sent) was "not restarted, since
// ps-0 had already exited"; the reason is the refusal.
TEST_F(TesseraLocalTest, RefusalAfterTheShutdownIsNamedAsTheReason) {
  StartLauncher({});
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(ReadFile(run_dir_ + "/chief.log"), "started") &&
           PidOf("ps-0") > 0;
  })) << LauncherOutput();
  const pid_t ps0 = PidOf("ps-0");
  std::ofstream(dir_ + "/servers_exit") << "\n";
  // Gone only once the launcher has reaped it, and so seen it exit.
  ASSERT_TRUE(Eventually([&] { return kill(ps0, 0) != 0; }));
  Finish(2);
  EXPECT_EQ(WaitForLauncher(), 2) << LauncherOutput();
  const std::string out = LauncherOutput();
  EXPECT_THAT(out, HasSubstr("exited with code 2 (a bad command line or "
                             "configuration, which a restart would not fix)"));
  EXPECT_THAT(out, Not(HasSubstr("had already exited")));
  EXPECT_THAT(out, Not(HasSubstr("restarting")));
}

TEST_F(TesseraLocalTest, FailedCoordinatorThatShutTheClusterDownIsFinal) {
  std::ofstream(dir_ + "/shutdown_cluster") << "\n";
  StartLauncher({});
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(ReadFile(run_dir_ + "/chief.log"), "started");
  })) << LauncherOutput();
  Finish(1);
  EXPECT_EQ(WaitForLauncher(), 1) << LauncherOutput();
  const std::string out = LauncherOutput();
  EXPECT_THAT(out, Not(HasSubstr("restarting")));
  // Whether the servers' exits were seen before the coordinator's or after.
  EXPECT_THAT(out, HasSubstr("exited with code 1; not restarted, since "));
  EXPECT_EQ(Count(ReadFile(run_dir_ + "/chief.log"), "started "), 1);
}

TEST_F(TesseraLocalTest, InterruptStopsEverythingDuringRestarts) {
  StartLauncher({});
  KillAndWaitForRestart("ps-1", "ps-1.log", 1);
  const pid_t ps1 = PidOf("ps-1");
  const pid_t launcher = group_.children()[0].pid;
  kill(launcher, SIGINT);
  EXPECT_EQ(WaitForLauncher(), 130) << LauncherOutput();
  EXPECT_TRUE(Eventually([&] { return kill(ps1, 0) != 0; }));
}

// Issue #35: with --elastic a worker that dies with no restart left does
// not end the job (the coordinator, given --remove_lost_workers, removes
// it), and the job ends with the coordinator.
TEST_F(TesseraLocalTest, ElasticJobGoesOnWhenAWorkerDiesForGood) {
  StartLauncher({"--elastic", "--max_restarts=0"});
  ASSERT_TRUE(Eventually([&] {
    return Count(ReadFile(run_dir_ + "/worker-0.log"), "started ") == 1 &&
           PidOf("worker-0") > 0;
  })) << LauncherOutput();
  ASSERT_EQ(kill(PidOf("worker-0"), SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] {
    return LauncherOutput().find("the job goes on without it") !=
           std::string::npos;
  })) << LauncherOutput();
  Finish(0);
  EXPECT_EQ(WaitForLauncher(), 0) << LauncherOutput();
  EXPECT_THAT(LauncherOutput(),
              HasSubstr("worker 0 killed by signal 9 (SIGKILL); the job goes "
                        "on without it"));
  EXPECT_THAT(ReadFile(run_dir_ + "/chief.log"),
              HasSubstr("--remove_lost_workers"));
}

// tessera_local --join=RUN_DIR starts workers that ask the coordinator
// named in RUN_DIR/cluster.json to take them, with the job's token and an
// address of their own, and exits once they have.
TEST_F(TesseraLocalTest, JoinStartsWorkersThatAskTheRunningCoordinator) {
  mkdir(run_dir_.c_str(), 0755);
  mkdir((run_dir_ + "/pids").c_str(), 0755);
  std::ofstream(run_dir_ + "/cluster.json")
      << R"({"cluster": {"chief": ["127.0.0.1:9"], "ps": ["127.0.0.1:8"]}})";
  std::ofstream(run_dir_ + "/job.token") << std::string(64, 'a') << "\n";
  // The job's coordinator runs, as the launcher started it (its command
  // line names the run folder) and noted its pid.
  ProcessGroup job;
  ChildSpec chief;
  chief.name = "chief";
  chief.binary = dir_ + "/bin/coordinator/tessera_coordinator";
  chief.args = {"--run_dir=" + run_dir_};
  chief.env.emplace_back("TESSERA_FAKE_DIR", dir_);
  chief.log_path = dir_ + "/chief.log";
  absl::StatusOr<pid_t> chief_pid = job.Start(chief);
  ASSERT_TRUE(chief_pid.ok()) << chief_pid.status();
  std::ofstream(run_dir_ + "/pids/chief-0") << *chief_pid << "\n";
  StartLauncher({"--join=" + run_dir_, "--num_workers=2"});
  ASSERT_TRUE(Eventually([&] {
    // The pid file may come a moment after the log's first line.
    return Count(ReadFile(run_dir_ + "/joined-0.log"), "started ") == 1 &&
           Count(ReadFile(run_dir_ + "/joined-1.log"), "started ") == 1 &&
           PidOf("joined-1") > 0;
  })) << LauncherOutput();
  const std::string first = ReadFile(run_dir_ + "/joined-0.log");
  EXPECT_THAT(first, HasSubstr("--join=127.0.0.1:9"));
  EXPECT_THAT(first, HasSubstr("--join_address=127.0.0.1:"));
  EXPECT_THAT(first, HasSubstr("--job_token_file=" + run_dir_ + "/job.token"));
  EXPECT_GT(PidOf("joined-1"), 0);
  std::ofstream(dir_ + "/servers_exit");
  EXPECT_EQ(WaitForLauncher(), 0) << LauncherOutput();
  EXPECT_THAT(LauncherOutput(), HasSubstr("every joined worker exited"));
}

// Issue #42, defect 4: joining a job that had ended started workers that
// waited 5 minutes in silence for its coordinator, then failed, and wrote
// their logs and pids into the ended run's folder.
TEST_F(TesseraLocalTest, JoinRefusesAJobThatEndedAndWritesNothing) {
  StartLauncher({});
  Finish(0);
  ASSERT_EQ(WaitForLauncher(), 0) << LauncherOutput();
  ASSERT_GT(PidOf("chief-0"), 0);
  StartLauncher({"--join=" + run_dir_, "--num_workers=1"});
  EXPECT_EQ(WaitForLauncher(), 2) << LauncherOutput();
  EXPECT_THAT(LauncherOutput(),
              HasSubstr("the job of " + run_dir_ + " is not running"));
  EXPECT_THAT(LauncherOutput(), HasSubstr("nothing was started"));
  EXPECT_FALSE(std::ifstream(run_dir_ + "/joined-0.log").good());
  EXPECT_FALSE(std::ifstream(run_dir_ + "/pids/joined-0").good());
}

// A pid file whose pid the system gave to another process since (its
// command line names no such run folder) is no running job either.
TEST_F(TesseraLocalTest, JoinTellsAReusedPidFromTheJobsCoordinator) {
  mkdir(run_dir_.c_str(), 0755);
  mkdir((run_dir_ + "/pids").c_str(), 0755);
  std::ofstream(run_dir_ + "/cluster.json")
      << R"({"cluster": {"chief": ["127.0.0.1:9"]}})";
  std::ofstream(run_dir_ + "/job.token") << std::string(64, 'a') << "\n";
  std::ofstream(run_dir_ + "/pids/chief-0") << getpid() << "\n";
  StartLauncher({"--join=" + run_dir_, "--num_workers=1"});
  EXPECT_EQ(WaitForLauncher(), 2) << LauncherOutput();
  EXPECT_THAT(LauncherOutput(), HasSubstr("is not running"));
  EXPECT_FALSE(std::ifstream(run_dir_ + "/joined-0.log").good());
}

TEST_F(TesseraLocalTest, JoinNeedsTheRunFolderOfARunningJob) {
  StartLauncher({"--join=" + dir_ + "/nowhere"});
  EXPECT_EQ(WaitForLauncher(), 2) << LauncherOutput();
  EXPECT_THAT(LauncherOutput(), HasSubstr("cluster.json cannot be read"));
}

}  // namespace
}  // namespace tessera
