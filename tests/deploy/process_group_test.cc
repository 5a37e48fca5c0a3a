#include "deploy/local/process_group.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "deploy/local/free_ports.h"
#include "deploy/local/log_tail.h"
#include "gtest/gtest.h"
#include "tests/deploy/test_files.h"

namespace tessera {
namespace {

using ::tessera::deploy_testing::Eventually;
using ::tessera::deploy_testing::IsGone;
using ::tessera::deploy_testing::ReadFile;
using ::tessera::deploy_testing::Shell;
using ::tessera::deploy_testing::TempDir;

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path) << contents;
}

// Processes in process group `pgid` that are alive (not zombies, which an
// init process may take its time to reap).
int LiveGroupMembers(pid_t pgid) {
  int live = 0;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  while (dirent* entry = readdir(proc)) {
    const std::string stat_text =
        ReadFile(absl::StrCat("/proc/", entry->d_name, "/stat"));
    // "pid (comm) state ppid pgrp ...": comm may hold spaces, so parse after
    // the last ')'.
    const size_t paren = stat_text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat_text.substr(paren + 1));
    char state;
    int ppid, pgrp;
    if (fields >> state >> ppid >> pgrp && pgrp == pgid && state != 'Z' &&
        state != 'X') {
      ++live;
    }
  }
  closedir(proc);
  return live;
}

TEST(ProcessGroupTest, ReportsExitCodeAndCapturesOutput) {
  TempDir dir;
  ProcessGroup group;
  ChildSpec spec =
      Shell("three", "echo hi; echo oops >&2; exit 3", dir.File("three.log"));
  absl::StatusOr<pid_t> pid = group.Start(spec);
  ASSERT_TRUE(pid.ok()) << pid.status();

  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->name, "three");
  EXPECT_EQ(exit->pid, *pid);
  EXPECT_FALSE(exit->status.signaled);
  EXPECT_EQ(exit->status.code, 3);
  EXPECT_FALSE(exit->status.success());
  EXPECT_EQ(exit->status.ToString(), "exited with code 3");
  EXPECT_EQ(ReadFile(dir.File("three.log")), "hi\noops\n");
  EXPECT_EQ(group.num_running(), 0);
  EXPECT_FALSE(group.WaitAny(absl::Seconds(1)).has_value());
}

TEST(ProcessGroupTest, AppendsToExistingLog) {
  TempDir dir;
  WriteFile(dir.File("a.log"), "earlier\n");
  ProcessGroup group;
  ASSERT_TRUE(group.Start(Shell("a", "echo later", dir.File("a.log"))).ok());
  ASSERT_TRUE(group.WaitAny(absl::Seconds(10)).has_value());
  EXPECT_EQ(ReadFile(dir.File("a.log")), "earlier\nlater\n");
}

TEST(ProcessGroupTest, PassesEnvironmentAndArguments) {
  TempDir dir;
  setenv("TESSERA_PG_TEST_INHERITED", "kept", 1);
  setenv("TF_CONFIG", "stale", 1);
  ProcessGroup group;
  ChildSpec spec =
      Shell("env", "echo \"$TF_CONFIG $TESSERA_PG_TEST_INHERITED $0 $1\"",
            dir.File("env.log"));
  spec.args.push_back("zero");
  spec.args.push_back("one two");
  spec.env.emplace_back("TF_CONFIG", R"({"task":{"type":"ps"}})");
  ASSERT_TRUE(group.Start(spec).ok());
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->status.success());
  EXPECT_EQ(ReadFile(dir.File("env.log")),
            "{\"task\":{\"type\":\"ps\"}} kept zero one two\n");
  unsetenv("TF_CONFIG");
}

TEST(ProcessGroupTest, ReportsTheFirstChildToExit) {
  TempDir dir;
  ProcessGroup group;
  ASSERT_TRUE(
      group.Start(Shell("slow", "sleep 30", dir.File("slow.log"))).ok());
  absl::StatusOr<pid_t> fast =
      group.Start(Shell("fast", "sleep 0.2; exit 7", dir.File("fast.log")));
  ASSERT_TRUE(fast.ok());
  EXPECT_FALSE(group.WaitAny(absl::ZeroDuration()).has_value());
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->name, "fast");
  EXPECT_EQ(exit->status.code, 7);
  EXPECT_EQ(group.num_running(), 1);
  const ProcessGroup::Child* child = group.Find(*fast);
  ASSERT_NE(child, nullptr);
  EXPECT_FALSE(child->running);
  EXPECT_EQ(child->log_path, dir.File("fast.log"));
  group.StopAll(absl::Seconds(5));
  EXPECT_EQ(group.num_running(), 0);
}

TEST(ProcessGroupTest, ReportsDeathBySignal) {
  TempDir dir;
  ProcessGroup group;
  ASSERT_TRUE(group.Start(Shell("victim", "sleep 30", dir.File("v.log"))).ok());
  // The shell forks sleep; kill the shell itself so its status is the signal.
  kill(group.children()[0].pid, SIGKILL);
  std::optional<ChildExit> exit = group.WaitAny(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->status.signaled);
  EXPECT_EQ(exit->status.signal, SIGKILL);
  EXPECT_EQ(exit->status.ToString(), "killed by signal 9 (SIGKILL)");
  // Anything it left behind is in its process group and must not survive.
  group.StopAll(absl::Seconds(5));
  EXPECT_TRUE(Eventually([&] { return LiveGroupMembers(exit->pid) == 0; }));
}

TEST(ProcessGroupTest, StopAllStopsSleepingChildrenWithinGrace) {
  TempDir dir;
  ProcessGroup group;
  ASSERT_TRUE(group.Start(Shell("s1", "sleep 30", dir.File("s1.log"))).ok());
  ASSERT_TRUE(group.Start(Shell("s2", "sleep 30", dir.File("s2.log"))).ok());
  const absl::Time start = absl::Now();
  std::vector<ChildExit> stopped = group.StopAll(absl::Seconds(10));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(stopped.size(), 2u);
  for (const ChildExit& exit : stopped) {
    EXPECT_TRUE(exit.status.signaled) << exit.status.ToString();
    EXPECT_EQ(exit.status.signal, SIGTERM);
    EXPECT_TRUE(Eventually([&] { return LiveGroupMembers(exit.pid) == 0; }))
        << exit.name;
  }
  EXPECT_EQ(group.num_running(), 0);
}

TEST(ProcessGroupTest, StopAllStopsGrandchildren) {
  TempDir dir;
  ProcessGroup group;
  const std::string pid_file = dir.File("grandchild.pid");
  ASSERT_TRUE(group
                  .Start(Shell("parent",
                               absl::StrCat("sleep 30 & echo $! > ", pid_file,
                                            ".tmp; mv ", pid_file, ".tmp ",
                                            pid_file, "; wait"),
                               dir.File("parent.log")))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return !ReadFile(pid_file).empty(); }));
  const pid_t grandchild = std::stoi(ReadFile(pid_file));
  EXPECT_FALSE(IsGone(grandchild));
  group.StopAll(absl::Seconds(5));
  EXPECT_TRUE(Eventually([&] { return IsGone(grandchild); }));
}

TEST(ProcessGroupTest, ChildrenDieWithTheLauncher) {
  TempDir dir;
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    // Leaked on purpose: the launcher dies without stopping its children.
    // /bin/sleep itself, not a shell: PR_SET_PDEATHSIG reaches only the
    // direct child, and a shell might fork sleep rather than exec it.
    auto* group = new ProcessGroup;
    ChildSpec spec;
    spec.name = "orphan";
    spec.binary = "/bin/sleep";
    spec.args = {"30"};
    spec.log_path = dir.File("orphan.log");
    absl::StatusOr<pid_t> pid = group->Start(spec);
    const pid_t child = pid.ok() ? *pid : -1;
    ssize_t unused = write(pipe_fds[1], &child, sizeof(child));
    (void)unused;
    _exit(0);
  }
  close(pipe_fds[1]);
  pid_t child = -1;
  ASSERT_EQ(read(pipe_fds[0], &child, sizeof(child)),
            static_cast<ssize_t>(sizeof(child)));
  close(pipe_fds[0]);
  int status;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(Eventually([&] { return IsGone(child); }));
}

TEST(ProcessGroupTest, StopAllKillsChildrenThatIgnoreSigterm) {
  TempDir dir;
  ProcessGroup group;
  // The marker line says the trap is installed before we signal.
  ASSERT_TRUE(group
                  .Start(Shell("stubborn",
                               "trap '' TERM; echo ready; "
                               "while :; do sleep 0.05; done",
                               dir.File("stubborn.log")))
                  .ok());
  for (int i = 0; i < 200 && ReadFile(dir.File("stubborn.log")).empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Time start = absl::Now();
  std::vector<ChildExit> stopped = group.StopAll(absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(5));
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0].status.signal, SIGKILL);
}

TEST(ProcessGroupTest, CutShortEndsGraceEarly) {
  TempDir dir;
  ProcessGroup group;
  ASSERT_TRUE(group
                  .Start(Shell("stubborn",
                               "trap '' TERM; echo ready; "
                               "while :; do sleep 0.05; done",
                               dir.File("stubborn.log")))
                  .ok());
  for (int i = 0; i < 200 && ReadFile(dir.File("stubborn.log")).empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Time start = absl::Now();
  group.StopAll(absl::Seconds(30), [] { return true; });
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(group.num_running(), 0);
}

TEST(ProcessGroupTest, DestructorStopsRunningChildren) {
  TempDir dir;
  pid_t pid;
  {
    ProcessGroup group;
    absl::StatusOr<pid_t> started =
        group.Start(Shell("orphan", "sleep 30", dir.File("o.log")));
    ASSERT_TRUE(started.ok());
    pid = *started;
  }
  EXPECT_EQ(kill(pid, 0), -1);
}

TEST(ProcessGroupTest, MissingBinaryIsAClearError) {
  TempDir dir;
  ProcessGroup group;
  ChildSpec spec;
  spec.name = "ghost";
  spec.binary = dir.File("no_such_binary");
  spec.log_path = dir.File("ghost.log");
  absl::StatusOr<pid_t> pid = group.Start(spec);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(pid.status().message().find(spec.binary), absl::string_view::npos)
      << pid.status();
  EXPECT_TRUE(group.children().empty());
}

TEST(ProcessGroupTest, NonExecutableBinaryIsAClearError) {
  TempDir dir;
  const std::string script = dir.File("script.sh");
  WriteFile(script, "#!/bin/sh\nexit 0\n");
  chmod(script.c_str(), 0644);
  ProcessGroup group;
  ChildSpec spec;
  spec.name = "noexec";
  spec.binary = script;
  spec.log_path = dir.File("noexec.log");
  absl::StatusOr<pid_t> pid = group.Start(spec);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("not executable"),
            absl::string_view::npos)
      << pid.status();
  EXPECT_NE(pid.status().message().find(script), absl::string_view::npos);
}

TEST(ProcessGroupTest, ExecFailureIsReported) {
  TempDir dir;
  // Executable, but its interpreter does not exist: only execve() can tell.
  const std::string script = dir.File("bad_interpreter.sh");
  WriteFile(script, "#!/no/such/interpreter\n");
  chmod(script.c_str(), 0755);
  ProcessGroup group;
  ChildSpec spec;
  spec.name = "bad";
  spec.binary = script;
  spec.log_path = dir.File("bad.log");
  absl::StatusOr<pid_t> pid = group.Start(spec);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find(script), absl::string_view::npos)
      << pid.status();
  EXPECT_TRUE(group.children().empty());
}

TEST(ProcessGroupTest, RejectsDuplicateNames) {
  TempDir dir;
  ProcessGroup group;
  ASSERT_TRUE(group.Start(Shell("twin", "exit 0", dir.File("a.log"))).ok());
  EXPECT_FALSE(group.Start(Shell("twin", "exit 0", dir.File("b.log"))).ok());
  EXPECT_TRUE(group.WaitAny(absl::Seconds(10)).has_value());
}

TEST(ProcessGroupTest, UnopenableLogIsAnError) {
  TempDir dir;
  ProcessGroup group;
  absl::StatusOr<pid_t> pid =
      group.Start(Shell("x", "exit 0", dir.File("missing/dir/x.log")));
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("x.log"), absl::string_view::npos);
}

TEST(SignalNameTest, NamesCommonSignals) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalName(1000), "signal 1000");
}

TEST(FreePortsTest, ReturnsDistinctNonZeroPorts) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(16);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 16u);
  std::set<int> distinct(ports->begin(), ports->end());
  EXPECT_EQ(distinct.size(), 16u);
  for (int port : *ports) {
    EXPECT_GT(port, 0);
    EXPECT_LT(port, 65536);
  }
}

// Outgoing connections and bind(0) take ports from the ephemeral range, so
// picked ports stay below it (this machine leaves room there).
TEST(FreePortsTest, PortsComeFromBelowTheEphemeralRange) {
  const PortRange ephemeral = EphemeralPortRange();
  ASSERT_GT(ephemeral.first, kFirstPickedPort + 1000);
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(8);
  ASSERT_TRUE(ports.ok()) << ports.status();
  for (int port : *ports) {
    EXPECT_GE(port, kFirstPickedPort);
    EXPECT_LT(port, ephemeral.first);
  }
}

// Two launchers starting side by side: the second must not get a port the
// first was handed a moment ago and has not bound yet. Without the
// reservations, 400 + 400 random picks from ~22,000 ports would share
// about 7.
TEST(FreePortsTest, PortsHandedOutAreNotHandedOutAgainAtOnce) {
  absl::StatusOr<std::vector<int>> first = PickFreePorts(400);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::vector<int>> second = PickFreePorts(400);
  ASSERT_TRUE(second.ok()) << second.status();
  std::set<int> all(first->begin(), first->end());
  all.insert(second->begin(), second->end());
  EXPECT_EQ(all.size(), 800u);
}

// The reservations are best effort: a $TMPDIR that is no folder, or one
// where no file can be made, still gives ports.
TEST(FreePortsTest, PortsWithoutAUsableTemporaryFolder) {
  const char* saved = std::getenv("TMPDIR");
  const std::string restore = saved != nullptr ? saved : "";
  for (const char* tmp : {"/nonexistent-tessera-tmp", "/proc"}) {
    setenv("TMPDIR", tmp, 1);
    absl::StatusOr<std::vector<int>> ports = PickFreePorts(4);
    EXPECT_TRUE(ports.ok()) << tmp << ": " << ports.status();
    if (ports.ok()) EXPECT_EQ(ports->size(), 4u) << tmp;
  }
  if (saved != nullptr) {
    setenv("TMPDIR", restore.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
}

TEST(FreePortsTest, ZeroAndNegative) {
  absl::StatusOr<std::vector<int>> none = PickFreePorts(0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(PickFreePorts(-1).ok());
}

TEST(TailFileTest, ReturnsLastLines) {
  TempDir dir;
  const std::string path = dir.File("log");
  WriteFile(path, "1\n2\n3\n4\n5\n");
  EXPECT_EQ(TailFile(path, 2), "4\n5\n");
  EXPECT_EQ(TailFile(path, 5), "1\n2\n3\n4\n5\n");
  EXPECT_EQ(TailFile(path, 50), "1\n2\n3\n4\n5\n");
  EXPECT_EQ(TailFile(path, 0), "");
}

TEST(TailFileTest, KeepsUnterminatedLastLine) {
  TempDir dir;
  const std::string path = dir.File("log");
  WriteFile(path, "a\nb\nc");
  EXPECT_EQ(TailFile(path, 1), "c");
  EXPECT_EQ(TailFile(path, 2), "b\nc");
}

TEST(TailFileTest, MissingOrEmptyFile) {
  TempDir dir;
  EXPECT_EQ(TailFile(dir.File("nope"), 3), "");
  WriteFile(dir.File("empty"), "");
  EXPECT_EQ(TailFile(dir.File("empty"), 3), "");
}

TEST(TailFileTest, LargeFileSpanningChunks) {
  TempDir dir;
  const std::string path = dir.File("big");
  std::string contents;
  for (int i = 0; i < 100000; ++i) absl::StrAppend(&contents, "line ", i, "\n");
  WriteFile(path, contents);
  std::string expected;
  for (int i = 99980; i < 100000; ++i) {
    absl::StrAppend(&expected, "line ", i, "\n");
  }
  EXPECT_EQ(TailFile(path, 20), expected);
  // A line longer than one read chunk.
  const std::string long_line(200000, 'x');
  WriteFile(path, "first\n" + long_line + "\nlast\n");
  EXPECT_EQ(TailFile(path, 2), long_line + "\nlast\n");
}

TEST(LogFollowerTest, EchoesAppendedLinesAndTheRestOnStop) {
  TempDir dir;
  const std::string path = dir.File("follow.log");
  WriteFile(path, "before start\n");
  std::mutex mu;
  std::string echoed;
  LogFollower follower(path, [&](absl::string_view text) {
    std::lock_guard<std::mutex> lock(mu);
    echoed.append(text.data(), text.size());
  });
  follower.Start();
  {
    std::ofstream out(path, std::ios::app);
    out << "epoch 1\n" << std::flush;
  }
  std::string seen;
  for (int i = 0; i < 500 && seen.empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    std::lock_guard<std::mutex> lock(mu);
    seen = echoed;
  }
  EXPECT_EQ(seen, "epoch 1\n");
  {
    std::ofstream out(path, std::ios::app);
    out << "no newline yet" << std::flush;
  }
  follower.Stop();
  EXPECT_EQ(echoed, "epoch 1\nno newline yet");
}

TEST(LogFollowerTest, WaitsForFileToAppear) {
  TempDir dir;
  const std::string path = dir.File("later.log");
  std::string echoed;
  LogFollower follower(path, [&](absl::string_view text) {
    echoed.append(text.data(), text.size());
  });
  follower.Start();
  absl::SleepFor(absl::Milliseconds(150));
  WriteFile(path, "hello\n");
  follower.Stop();
  EXPECT_EQ(echoed, "hello\n");
}

}  // namespace
}  // namespace tessera
