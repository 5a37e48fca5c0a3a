#include "common/process/cluster_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace tessera {
namespace {

constexpr char kEnvConfig[] = R"({"cluster": {"worker": ["env:1"]},
                                  "task": {"type": "worker", "index": 0}})";
constexpr char kFlagConfig[] = R"({"cluster": {"worker": ["flag:1"]},
                                   "task": {"type": "worker", "index": 0}})";

// Variables a test may set; each test starts with them unset (the suite
// may itself run inside a Slurm step) and they are restored afterwards.
constexpr const char* kEnvVars[] = {"TF_CONFIG",
                                    "SLURM_PROCID",
                                    "SLURM_STEP_NODELIST",
                                    "SLURM_STEP_TASKS_PER_NODE",
                                    "SLURM_STEP_NUM_TASKS",
                                    "SLURM_DISTRIBUTION",
                                    "SLURM_DIST_PLANESIZE",
                                    "SLURM_NODEID",
                                    "SLURM_LOCALID",
                                    "SLURMD_TRES_BIND",
                                    "CUDA_VISIBLE_DEVICES"};

// Restores every flag (via FlagSaver) and the variables above after each
// test.
class ClusterFlagsTest : public testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kEnvVars) {
      const char* old = std::getenv(name);
      if (old != nullptr) saved_env_[name] = old;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kEnvVars) {
      auto it = saved_env_.find(name);
      if (it != saved_env_.end()) {
        setenv(name, it->second.c_str(), 1);
      } else {
        unsetenv(name);
      }
    }
  }

  // Rank `rank` of TF's example step: node[01-02], 2 tasks each, 4 GPUs.
  void SetSlurmStep(int rank) {
    setenv("SLURM_PROCID", std::to_string(rank).c_str(), 1);
    setenv("SLURM_STEP_NODELIST", "node[01-02]", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2)", 1);
    setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3", 1);
  }

  void SetHostFlags() {
    gflags::SetCommandLineOption("chief_host", "c:1");
    gflags::SetCommandLineOption("ps_hosts", "p:1,p:2");
    gflags::SetCommandLineOption("worker_hosts", "w:1, w:2,");
  }

 private:
  gflags::FlagSaver saver_;
  std::map<std::string, std::string> saved_env_;
};

TEST_F(ClusterFlagsTest, NothingGivenIsNotFoundAndExplains) {
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  for (const char* hint : {"--ps_hosts", "--tf_config",
                           "TF_CONFIG "
                           "environment"}) {
    EXPECT_NE(spec.status().message().find(hint), std::string::npos)
        << spec.status();
  }
}

TEST_F(ClusterFlagsTest, EnvironmentIsTheFallback) {
  setenv("TF_CONFIG", kEnvConfig, 1);
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->own_address(), "env:1");
}

TEST_F(ClusterFlagsTest, TfConfigFlagOverridesEnvironment) {
  setenv("TF_CONFIG", kEnvConfig, 1);
  FLAGS_tf_config = kFlagConfig;
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->own_address(), "flag:1");
}

TEST_F(ClusterFlagsTest, TfConfigFlagReadsFile) {
  const std::string path = testing::TempDir() + "/cluster_flags_test.json";
  std::ofstream(path) << kFlagConfig;
  FLAGS_tf_config = "@" + path;
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->own_address(), "flag:1");
  std::remove(path.c_str());

  spec = ResolveClusterSpec();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("--tf_config: "), std::string::npos);
  EXPECT_NE(spec.status().message().find(path), std::string::npos);
}

TEST_F(ClusterFlagsTest, TfConfigFlagErrorsSaySo) {
  FLAGS_tf_config = "{";
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("--tf_config: TF_CONFIG: not valid"),
            std::string::npos)
      << spec.status();
}

TEST_F(ClusterFlagsTest, HostFlagsOverrideEverything) {
  setenv("TF_CONFIG", kEnvConfig, 1);
  FLAGS_tf_config = kFlagConfig;
  SetHostFlags();
  gflags::SetCommandLineOption("task_type", "worker");
  gflags::SetCommandLineOption("task_index", "1");
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tasks("worker"), (std::vector<std::string>{"w:1", "w:2"}));
  EXPECT_EQ(spec->tasks("ps"), (std::vector<std::string>{"p:1", "p:2"}));
  EXPECT_EQ(spec->own_address(), "w:2");
  EXPECT_TRUE(spec->ValidateForParameterServerTraining().ok());
}

TEST_F(ClusterFlagsTest, HostFlagsWithoutChiefOmitTheJob) {
  FLAGS_worker_hosts = "w:1";
  FLAGS_task_type = "worker";
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->jobs().size(), 1u);
  EXPECT_EQ(spec->num_tasks("chief"), 0);
}

TEST_F(ClusterFlagsTest, HostFlagsRequireTaskType) {
  SetHostFlags();
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("--task_type is required"),
            std::string::npos);
}

TEST_F(ClusterFlagsTest, HostFlagErrorsNameTheFlagsAndField) {
  SetHostFlags();
  FLAGS_task_type = "worker";
  FLAGS_task_index = 2;
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("--worker_hosts"), std::string::npos);
  EXPECT_NE(spec.status().message().find(
                "task.index is 2 but cluster.worker has 2 tasks"),
            std::string::npos)
      << spec.status();

  FLAGS_task_index = 0;
  FLAGS_ps_hosts = "localhost";
  spec = ResolveClusterSpec();
  EXPECT_NE(spec.status().message().find(
                "cluster.ps[0] \"localhost\" is not host:port"),
            std::string::npos)
      << spec.status();
}

// An empty entry was dropped, shifting every later task's index.
TEST_F(ClusterFlagsTest, EmptyHostEntryIsAnErrorNotAShift) {
  SetHostFlags();
  FLAGS_task_type = "worker";
  FLAGS_ps_hosts = "p:1,,p:3";
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      spec.status().message().find("--ps_hosts=p:1,,p:3: entry 2 is empty"),
      std::string::npos)
      << spec.status();
  FLAGS_ps_hosts = "p:1";
  FLAGS_worker_hosts = " ,w:1";
  spec = ResolveClusterSpec();
  EXPECT_NE(spec.status().message().find("--worker_hosts= ,w:1: entry 1"),
            std::string::npos)
      << spec.status();
}

TEST_F(ClusterFlagsTest, SlurmJobsResolvesTheStepAndSetsTheTasksGpus) {
  SetSlurmStep(2);
  FLAGS_slurm_jobs = "chief:1,ps:1,worker:2";
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tasks("chief"), (std::vector<std::string>{"node01:8888"}));
  EXPECT_EQ(spec->tasks("ps"), (std::vector<std::string>{"node01:8889"}));
  EXPECT_EQ(spec->tasks("worker"),
            (std::vector<std::string>{"node02:8888", "node02:8889"}));
  EXPECT_EQ(spec->own_address(), "node02:8888");
  EXPECT_TRUE(spec->ValidateForParameterServerTraining().ok());
  EXPECT_STREQ(std::getenv("CUDA_VISIBLE_DEVICES"), "0,1");
}

TEST_F(ClusterFlagsTest, SlurmFlagsReachTheResolver) {
  SetSlurmStep(3);
  FLAGS_slurm_jobs = "ps:1,worker:3";
  FLAGS_port_base = 2222;
  FLAGS_gpus_per_task = 1;
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->own_address(), "node02:2223");
  EXPECT_STREQ(std::getenv("CUDA_VISIBLE_DEVICES"), "1");

  FLAGS_gpus_per_task = 0;
  ASSERT_TRUE(ResolveClusterSpec().ok());
  EXPECT_STREQ(std::getenv("CUDA_VISIBLE_DEVICES"), "");
}

TEST_F(ClusterFlagsTest, SlurmJobsLeavesUnmentionedGpusAlone) {
  SetSlurmStep(0);
  unsetenv("CUDA_VISIBLE_DEVICES");
  FLAGS_slurm_jobs = "ps:1,worker:3";
  ASSERT_TRUE(ResolveClusterSpec().ok());
  EXPECT_EQ(std::getenv("CUDA_VISIBLE_DEVICES"), nullptr);
}

TEST_F(ClusterFlagsTest, SlurmJobsComesAfterTfConfigFlagBeforeEnvironment) {
  SetSlurmStep(0);
  setenv("TF_CONFIG", kEnvConfig, 1);
  FLAGS_slurm_jobs = "ps:1,worker:3";
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->own_address(), "node01:8888");
  FLAGS_tf_config = kFlagConfig;
  spec = ResolveClusterSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->own_address(), "flag:1");
}

TEST_F(ClusterFlagsTest, SlurmErrorsNameTheFlag) {
  FLAGS_slurm_jobs = "ps:1,worker:3";
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(spec.status().message(),
            "--slurm_jobs=ps:1,worker:3: SLURM_PROCID is not set: not running "
            "inside a Slurm step (use srun)");

  SetSlurmStep(0);
  FLAGS_slurm_jobs = "ps:1,worker:4";
  spec = ResolveClusterSpec();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("add up to 5 tasks but the Slurm "
                                         "step has 4"),
            std::string::npos)
      << spec.status();

  FLAGS_slurm_jobs = "ps=1";
  spec = ResolveClusterSpec();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message().rfind("--slurm_jobs: jobs \"ps=1\"", 0), 0u)
      << spec.status();
}

TEST_F(ClusterFlagsTest, InsideSlurmWithoutASourceSuggestsSlurmJobs) {
  setenv("SLURM_PROCID", "3", 1);
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find(
                "this is rank 3 of a Slurm job (SLURM_PROCID), so "
                "--slurm_jobs is probably missing"),
            std::string::npos)
      << spec.status();
}

TEST_F(ClusterFlagsTest, PrintClusterOnlyWithTheFlag) {
  SetSlurmStep(1);
  FLAGS_slurm_jobs = "ps:1,worker:3";
  absl::StatusOr<ClusterSpec> spec = ResolveClusterSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  testing::internal::CaptureStdout();
  EXPECT_FALSE(PrintClusterIfRequested(*spec));
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");

  FLAGS_print_cluster = true;
  testing::internal::CaptureStdout();
  EXPECT_TRUE(PrintClusterIfRequested(*spec));
  EXPECT_EQ(testing::internal::GetCapturedStdout(),
            spec->ToTfConfigJson() +
                "\ntask=worker:0 address=node01:8889 "
                "CUDA_VISIBLE_DEVICES=2,3\n");
  absl::StatusOr<ClusterSpec> parsed =
      ClusterSpec::FromTfConfigJson(spec->ToTfConfigJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->DebugString(), spec->DebugString());

  unsetenv("CUDA_VISIBLE_DEVICES");
  testing::internal::CaptureStdout();
  PrintClusterIfRequested(*spec);
  EXPECT_NE(testing::internal::GetCapturedStdout().find(
                "CUDA_VISIBLE_DEVICES=(unset)"),
            std::string::npos);
}

TEST_F(ClusterFlagsTest, FlagsAreRestoredBetweenTests) {
  // Relies on FlagSaver in the fixture; fails if an earlier test leaked.
  EXPECT_TRUE(FLAGS_tf_config.empty());
  EXPECT_TRUE(FLAGS_worker_hosts.empty());
  EXPECT_EQ(FLAGS_task_index, 0);
  EXPECT_TRUE(FLAGS_slurm_jobs.empty());
  EXPECT_EQ(FLAGS_port_base, 8888);
  EXPECT_FALSE(FLAGS_print_cluster);
}

}  // namespace
}  // namespace tessera
