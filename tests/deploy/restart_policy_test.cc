#include "deploy/local/restart_policy.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "tests/deploy/test_files.h"

namespace tessera {
namespace {

using ::tessera::deploy_testing::Eventually;
using ::tessera::deploy_testing::IsGone;
using ::tessera::deploy_testing::ReadFile;
using ::tessera::deploy_testing::Shell;
using ::tessera::deploy_testing::TempDir;

using Outcome = RestartPolicy::Outcome;

TEST(RestartPolicyTest, KilledChildIsRestartedWithTheSameCommandLine) {
  TempDir dir;
  const std::string log = dir.File("ps.log");
  ProcessGroup group;
  RestartPolicy policy(&group, 3);
  // Prints its arguments and environment, then waits to be killed.
  ChildSpec spec = Shell(
      "ps-1", "echo \"run $0 $1 $TESSERA_RESTART_TEST\"; exec sleep 30", log);
  spec.args.push_back("--port=1234");
  spec.args.push_back("--job_token_file=/x");
  spec.env.emplace_back("TESSERA_RESTART_TEST", "env kept");
  absl::StatusOr<pid_t> first = group.Start(spec);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string run_line = "run --port=1234 --job_token_file=/x env kept\n";
  ASSERT_TRUE(Eventually([&] { return ReadFile(log) == run_line; }))
      << ReadFile(log);

  ASSERT_EQ(kill(*first, SIGKILL), 0);
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  RestartPolicy::Decision decision = policy.OnExit(*exit);
  ASSERT_EQ(decision.outcome, Outcome::kRestarted) << decision.status;
  EXPECT_EQ(decision.restarts, 1);
  EXPECT_EQ(policy.restarts("ps-1"), 1);
  ASSERT_GT(decision.pid, 0);
  EXPECT_NE(decision.pid, *first);
  EXPECT_EQ(group.num_running(), 1);
  ASSERT_EQ(group.children().size(), 1u);
  EXPECT_EQ(group.children()[0].pid, decision.pid);
  EXPECT_TRUE(group.children()[0].running);

  // Same argv and environment; the log goes on after a separator.
  const std::string expected =
      run_line + "=== restart 1 after signal 9 ===\n" + run_line;
  EXPECT_TRUE(Eventually([&] { return ReadFile(log) == expected; }))
      << ReadFile(log);
  group.StopAll(absl::Seconds(5));
  EXPECT_EQ(group.num_running(), 0);
}

TEST(RestartPolicyTest, RestartsAreBoundedPerChild) {
  TempDir dir;
  const std::string log = dir.File("worker.log");
  ProcessGroup group;
  RestartPolicy policy(&group, 2);
  ASSERT_TRUE(group.Start(Shell("worker-0", "echo run; exit 4", log)).ok());
  for (int restart = 1; restart <= 2; ++restart) {
    std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
    ASSERT_TRUE(exit.has_value());
    EXPECT_EQ(exit->status.code, 4);
    EXPECT_TRUE(policy.WouldRestart(*exit));
    RestartPolicy::Decision decision = policy.OnExit(*exit);
    ASSERT_EQ(decision.outcome, Outcome::kRestarted) << restart;
    EXPECT_EQ(decision.restarts, restart);
  }
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_FALSE(policy.WouldRestart(*exit));
  RestartPolicy::Decision decision = policy.OnExit(*exit);
  EXPECT_EQ(decision.outcome, Outcome::kExhausted);
  EXPECT_EQ(decision.restarts, 2);
  EXPECT_EQ(policy.restarts("worker-0"), 2);
  EXPECT_EQ(group.num_running(), 0);
  // Three runs, two separators, and nothing after the last run.
  EXPECT_EQ(ReadFile(log),
            "run\n=== restart 1 after exit code 4 ===\nrun\n"
            "=== restart 2 after exit code 4 ===\nrun\n");
  EXPECT_FALSE(group.WaitAny(absl::Milliseconds(200)).has_value());
}

// Exit code 3 is a coordinator an operator stopped (tessera_ctl stop):
// done as asked, never restarted.
TEST(RestartPolicyTest, StoppedByTheOperatorIsNotRestarted) {
  TempDir dir;
  ProcessGroup group;
  RestartPolicy policy(&group, 3);
  ASSERT_TRUE(
      group.Start(Shell("chief", "exit 3", dir.File("chief.log"))).ok());
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->status.code, kStoppedExitCode);
  EXPECT_FALSE(policy.WouldRestart(*exit));
  EXPECT_EQ(policy.OnExit(*exit).outcome, Outcome::kNotRestartable);
  EXPECT_EQ(group.num_running(), 0);
}

TEST(RestartPolicyTest, EachChildHasItsOwnBudget) {
  TempDir dir;
  ProcessGroup group;
  RestartPolicy policy(&group, 1);
  ASSERT_TRUE(group.Start(Shell("a", "exit 1", dir.File("a.log"))).ok());
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(policy.OnExit(*exit).outcome, Outcome::kRestarted);
  exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(policy.OnExit(*exit).outcome, Outcome::kExhausted);

  ASSERT_TRUE(group.Start(Shell("b", "exit 1", dir.File("b.log"))).ok());
  exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->name, "b");
  EXPECT_EQ(policy.OnExit(*exit).outcome, Outcome::kRestarted);
  group.StopAll(absl::Seconds(5));
}

TEST(RestartPolicyTest, CleanExitIsNotRestarted) {
  TempDir dir;
  const std::string log = dir.File("chief.log");
  ProcessGroup group;
  RestartPolicy policy(&group, 3);
  ASSERT_TRUE(group.Start(Shell("chief", "echo done; exit 0", log)).ok());
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  RestartPolicy::Decision decision = policy.OnExit(*exit);
  EXPECT_EQ(decision.outcome, Outcome::kFinished);
  EXPECT_EQ(decision.restarts, 0);
  EXPECT_EQ(group.num_running(), 0);
  EXPECT_EQ(ReadFile(log), "done\n");
}

TEST(RestartPolicyTest, ConfigurationErrorIsNotRestarted) {
  TempDir dir;
  const std::string log = dir.File("ps.log");
  ProcessGroup group;
  RestartPolicy policy(&group, 3);
  ASSERT_TRUE(group.Start(Shell("ps-0", "echo bad flag; exit 2", log)).ok());
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_FALSE(policy.WouldRestart(*exit));
  EXPECT_EQ(policy.OnExit(*exit).outcome, Outcome::kNotRestartable);
  EXPECT_EQ(group.num_running(), 0);
  EXPECT_EQ(ReadFile(log), "bad flag\n");
}

TEST(RestartPolicyTest, ZeroRestartsKeepsTheFirstDeathFinal) {
  TempDir dir;
  const std::string log = dir.File("w.log");
  ProcessGroup group;
  RestartPolicy policy(&group, 0);
  absl::StatusOr<pid_t> pid = group.Start(Shell("w", "exec sleep 30", log));
  ASSERT_TRUE(pid.ok());
  kill(*pid, SIGKILL);
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  RestartPolicy::Decision decision = policy.OnExit(*exit);
  EXPECT_EQ(decision.outcome, Outcome::kExhausted);
  EXPECT_EQ(decision.restarts, 0);
  EXPECT_EQ(group.num_running(), 0);
  EXPECT_EQ(ReadFile(log), "");
}

TEST(RestartPolicyTest, FailedRestartIsReported) {
  TempDir dir;
  const std::string script = dir.File("vanishing.sh");
  std::ofstream(script) << "#!/bin/sh\nexit 1\n";
  chmod(script.c_str(), 0755);
  ProcessGroup group;
  RestartPolicy policy(&group, 3);
  ChildSpec spec;
  spec.name = "v";
  spec.binary = script;
  spec.log_path = dir.File("v.log");
  ASSERT_TRUE(group.Start(spec).ok());
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  unlink(script.c_str());
  RestartPolicy::Decision decision = policy.OnExit(*exit);
  EXPECT_EQ(decision.outcome, Outcome::kStartFailed);
  EXPECT_NE(decision.status.message().find(script), absl::string_view::npos)
      << decision.status;
  EXPECT_EQ(group.num_running(), 0);
}

TEST(ProcessGroupRestartTest, RefusesRunningAndUnknownChildren) {
  TempDir dir;
  ProcessGroup group;
  ASSERT_TRUE(group.Start(Shell("s", "exec sleep 30", dir.File("s.log"))).ok());
  absl::StatusOr<pid_t> running = group.Restart("s");
  EXPECT_EQ(running.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(running.status().message().find("still running"),
            absl::string_view::npos);
  absl::StatusOr<pid_t> unknown = group.Restart("nobody");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("nobody"), absl::string_view::npos);
  group.StopAll(absl::Seconds(5));
}

TEST(ProcessGroupRestartTest, KillsWhatTheDeadChildLeftBehind) {
  TempDir dir;
  const std::string pid_file = dir.File("grandchild.pid");
  ProcessGroup group;
  // Starts a background sleep (in the child's process group) only once.
  const std::string script = absl::StrCat(
      "if [ ! -e ", pid_file, " ]; then sleep 30 & echo $! > ", pid_file,
      ".tmp; mv ", pid_file, ".tmp ", pid_file, "; fi; exec sleep 30");
  absl::StatusOr<pid_t> first =
      group.Start(Shell("parent", script, dir.File("parent.log")));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(Eventually([&] { return !ReadFile(pid_file).empty(); }));
  const pid_t grandchild = std::stoi(ReadFile(pid_file));
  kill(*first, SIGKILL);
  ASSERT_TRUE(group.WaitAny(absl::Seconds(10)).has_value());
  EXPECT_FALSE(IsGone(grandchild));
  absl::StatusOr<pid_t> second = group.Restart("parent");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(Eventually([&] { return IsGone(grandchild); }));
  EXPECT_FALSE(IsGone(*second));
  group.StopAll(absl::Seconds(5));
}

TEST(DeathCauseTest, SignalOrCode) {
  ExitStatus killed;
  killed.signaled = true;
  killed.signal = SIGKILL;
  EXPECT_EQ(DeathCause(killed), "signal 9");
  ExitStatus failed;
  failed.code = 3;
  EXPECT_EQ(DeathCause(failed), "exit code 3");
}

}  // namespace
}  // namespace tessera
