#include "common/cluster/slurm_cluster_resolver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/cluster/hostlist.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Env = std::map<std::string, std::string>;

// A step's variables as srun sets them for `rank`.
Env StepEnv(const std::string& nodelist, const std::string& tasks_per_node,
            int num_tasks, int rank) {
  return {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_STEP_NODELIST", nodelist},
          {"SLURM_STEP_TASKS_PER_NODE", tasks_per_node},
          {"SLURM_STEP_NUM_TASKS", std::to_string(num_tasks)}};
}

absl::StatusOr<SlurmResolution> Resolve(const SlurmOptions& options,
                                        const Env& env) {
  return ResolveSlurmCluster(options, [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

SlurmOptions Jobs(std::map<std::string, int> jobs) {
  SlurmOptions options;
  options.jobs = std::move(jobs);
  return options;
}

std::string Own(const SlurmResolution& r) {
  return r.cluster.task().type + ":" + std::to_string(r.cluster.task().index) +
         "@" + r.cluster.own_address();
}

void ExpectError(const absl::StatusOr<SlurmResolution>& result,
                 absl::StatusCode code, const std::string& detail) {
  ASSERT_FALSE(result.ok()) << "resolved to " << result->cluster.DebugString();
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr(detail));
}

// TF's worked example: node[01-02], 2(x2), 4 GPUs per node, ps:1 worker:3.
TEST(SlurmClusterResolverTest, TensorFlowWorkedExample) {
  const std::vector<std::string> own = {
      "ps:0@node01:8888", "worker:0@node01:8889", "worker:1@node02:8888",
      "worker:2@node02:8889"};
  const std::vector<std::string> gpus = {"0,1", "2,3", "0,1", "2,3"};
  for (int rank = 0; rank < 4; ++rank) {
    Env env = StepEnv("node[01-02]", "2(x2)", 4, rank);
    env["CUDA_VISIBLE_DEVICES"] = "0,1,2,3";
    absl::StatusOr<SlurmResolution> r =
        Resolve(Jobs({{"ps", 1}, {"worker", 3}}), env);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(r->cluster.tasks("ps"), ElementsAre("node01:8888"));
    EXPECT_THAT(r->cluster.tasks("worker"),
                ElementsAre("node01:8889", "node02:8888", "node02:8889"));
    EXPECT_EQ(Own(*r), own[rank]);
    EXPECT_EQ(r->cuda_visible_devices, gpus[rank]) << "rank " << rank;
    EXPECT_EQ(r->gpus_per_task, 2);
  }
}

TEST(SlurmClusterResolverTest, WithChiefRankZeroIsTheChief) {
  const std::vector<std::string> own = {
      "chief:0@node01:8888", "ps:0@node01:8889", "worker:0@node02:8888",
      "worker:1@node02:8889"};
  for (int rank = 0; rank < 4; ++rank) {
    Env env = StepEnv("node[01-02]", "2(x2)", 4, rank);
    env["CUDA_VISIBLE_DEVICES"] = "0,1,2,3";
    absl::StatusOr<SlurmResolution> r =
        Resolve(Jobs({{"chief", 1}, {"ps", 1}, {"worker", 2}}), env);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Own(*r), own[rank]);
    EXPECT_TRUE(r->cluster.ValidateForParameterServerTraining().ok());
    EXPECT_EQ(r->cluster.DebugString(),
              "task=" + r->cluster.task().type + ":" +
                  std::to_string(r->cluster.task().index) +
                  " rpc_layer=grpc chief=[node01:8888] ps=[node01:8889] "
                  "worker=[node02:8888,node02:8889]");
  }
}

TEST(SlurmClusterResolverTest, JobsTakeRanksInNameOrder) {
  const std::vector<std::string> own = {"chief:0@vm:8888",
                                        "evaluator:0@vm:8889", "ps:0@vm:8890",
                                        "ps:1@vm:8891", "worker:0@vm:8892"};
  for (int rank = 0; rank < 5; ++rank) {
    absl::StatusOr<SlurmResolution> r = Resolve(
        Jobs({{"worker", 1}, {"ps", 2}, {"evaluator", 1}, {"chief", 1}}),
        StepEnv("vm", "5", 5, rank));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Own(*r), own[rank]);
  }
}

TEST(SlurmClusterResolverTest, NoJobsMeansEveryTaskIsAWorkerAsInTf) {
  absl::StatusOr<SlurmResolution> r =
      Resolve(SlurmOptions(), StepEnv("n[1-2]", "1(x2)", 2, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->cluster.tasks("worker"), ElementsAre("n1:8888", "n2:8888"));
  EXPECT_EQ(Own(*r), "worker:1@n2:8888");
}

// TF sorted hosts as strings: n10 came before n9 and every rank got the
// wrong address.
TEST(SlurmClusterResolverTest, HostsStayInSlurmsNumericOrder) {
  absl::StatusOr<SlurmResolution> r =
      Resolve(Jobs({{"worker", 3}}), StepEnv("n[9-11]", "1(x3)", 3, 0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->cluster.tasks("worker"),
              ElementsAre("n9:8888", "n10:8888", "n11:8888"));
  EXPECT_EQ(Own(*r), "worker:0@n9:8888");
}

TEST(SlurmClusterResolverTest, MultiGroupAndZeroPaddedNames) {
  SlurmOptions options = Jobs({{"chief", 1}, {"ps", 1}, {"worker", 2}});
  options.port_base = 2222;
  absl::StatusOr<SlurmResolution> r =
      Resolve(options, StepEnv("rack[1-2]-n[009-010]", "1(x4)", 4, 3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->cluster.tasks("chief"), ElementsAre("rack1-n009:2222"));
  EXPECT_THAT(r->cluster.tasks("ps"), ElementsAre("rack1-n010:2222"));
  EXPECT_THAT(r->cluster.tasks("worker"),
              ElementsAre("rack2-n009:2222", "rack2-n010:2222"));
  EXPECT_EQ(Own(*r), "worker:1@rack2-n010:2222");
}

// Where Slurm put each rank: node index and local index, as SLURM_NODEID and
// SLURM_LOCALID reported them under srun (Slurm 22.05.8; the tasks per node
// are what it chose for nodes with 3, 1 and 4 CPUs).
struct Layout {
  std::string distribution;  // SLURM_DISTRIBUTION; "" for unset.
  std::string plane_size;    // SLURM_DIST_PLANESIZE; "" for unset.
  std::string nodelist;
  std::string tasks_per_node;
  std::vector<int> node;   // Per rank.
  std::vector<int> local;  // Per rank.
};

const Layout kObservedLayouts[] = {
    // srun -N2 -n4 -w node[1-2] (no -m: SLURM_DISTRIBUTION unset)
    {"", "", "node[1-2]", "3,1", {0, 0, 0, 1}, {0, 1, 2, 0}},
    // srun -N2 -n4 -w node[2-3] -m block
    {"block", "", "node[2-3]", "1,3", {0, 1, 1, 1}, {0, 0, 1, 2}},
    // srun -N2 -n4 -w node[1-2] -m cyclic
    {"cyclic", "", "node[1-2]", "3,1", {0, 1, 0, 0}, {0, 0, 1, 2}},
    // srun -N3 -n7 -m cyclic
    {"cyclic",
     "",
     "node[1-3]",
     "3,1,3",
     {0, 1, 2, 0, 2, 0, 2},
     {0, 0, 0, 1, 1, 2, 2}},
    // srun -N3 -n5 -m cyclic:block
    {"cyclic:block",
     "",
     "node[1-3]",
     "3,1(x2)",
     {0, 1, 2, 0, 0},
     {0, 0, 0, 1, 2}},
    // srun -N2 -n6 -w node[1-2] -O -m cyclic (overcommitted)
    {"cyclic",
     "",
     "node[1-2]",
     "3(x2)",
     {0, 1, 0, 1, 0, 1},
     {0, 0, 1, 1, 2, 2}},
    // srun -N2 -n4 -w node[1-2] -m block:cyclic,Pack
    {"block:cyclic,pack", "", "node[1-2]", "3,1", {0, 0, 0, 1}, {0, 1, 2, 0}},
    // srun -N2 -n4 -w node[1-2] -m plane=2
    {"plane", "2", "node[1-2]", "3,1", {0, 0, 1, 0}, {0, 1, 0, 2}},
    // srun -N3 -n6 -m plane=2
    {"plane",
     "2",
     "node[1-3]",
     "3,1,2",
     {0, 0, 1, 2, 2, 0},
     {0, 1, 0, 0, 1, 2}},
    // srun -N2 -n4 -w node[1-2] -m plane=8
    {"plane", "8", "node[1-2]", "3,1", {0, 0, 0, 1}, {0, 1, 2, 0}},
};

TEST(SlurmClusterResolverTest, PlacesEveryRankWhereSlurmDid) {
  for (const Layout& layout : kObservedLayouts) {
    const int n = static_cast<int>(layout.node.size());
    absl::StatusOr<std::vector<std::string>> nodes =
        ExpandHostlist(layout.nodelist);
    ASSERT_TRUE(nodes.ok());
    for (int rank = 0; rank < n; ++rank) {
      Env env = StepEnv(layout.nodelist, layout.tasks_per_node, n, rank);
      if (!layout.distribution.empty()) {
        env["SLURM_DISTRIBUTION"] = layout.distribution;
      }
      if (!layout.plane_size.empty()) {
        env["SLURM_DIST_PLANESIZE"] = layout.plane_size;
      }
      // Slurm's own answer for this rank; a disagreement would be an error.
      env["SLURM_NODEID"] = std::to_string(layout.node[rank]);
      env["SLURM_LOCALID"] = std::to_string(layout.local[rank]);
      absl::StatusOr<SlurmResolution> r = Resolve(Jobs({{"worker", n}}), env);
      ASSERT_TRUE(r.ok()) << layout.distribution << " " << layout.nodelist
                          << " rank " << rank << ": " << r.status();
      const std::string expected = (*nodes)[layout.node[rank]] + ":" +
                                   std::to_string(8888 + layout.local[rank]);
      EXPECT_EQ(r->cluster.own_address(), expected)
          << layout.distribution << " " << layout.tasks_per_node << " rank "
          << rank;
      EXPECT_EQ(r->cluster.tasks("worker")[rank], expected);
    }
  }
}

// The brief's case: cyclic with 3,1 on node[1-2], checked rank by rank.
TEST(SlurmClusterResolverTest, CyclicThreeOneWithJobs) {
  const std::vector<std::string> own = {"chief:0@node1:8888", "ps:0@node2:8888",
                                        "worker:0@node1:8889",
                                        "worker:1@node1:8890"};
  for (int rank = 0; rank < 4; ++rank) {
    Env env = StepEnv("node[1-2]", "3,1", 4, rank);
    env["SLURM_DISTRIBUTION"] = "cyclic";
    absl::StatusOr<SlurmResolution> r =
        Resolve(Jobs({{"chief", 1}, {"ps", 1}, {"worker", 2}}), env);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Own(*r), own[rank]);
    EXPECT_TRUE(r->cluster.ValidateForParameterServerTraining().ok());
  }
}

TEST(SlurmClusterResolverTest, DistributionSpellings) {
  // Node-level method -> rank 1's node on "2,2" over n[1-2].
  const std::map<std::string, std::string> cases = {
      {"*", "n1"},
      {"block", "n1"},
      {"BLOCK", "n1"},
      {"pack", "n1"},
      {"nopack", "n1"},
      {"block:block", "n1"},
      {"*:cyclic", "n1"},
      {"cyclic", "n2"},
      {"cyclic,nopack", "n2"},
      {"cyclic:cyclic:fcyclic", "n2"},
      {"plane=2", "n1"},
      {"plane=1", "n2"},
      {"block,", "n1"}};
  for (const auto& [distribution, node] : cases) {
    Env env = StepEnv("n[1-2]", "2(x2)", 4, 1);
    env["SLURM_DISTRIBUTION"] = distribution;
    absl::StatusOr<SlurmResolution> r = Resolve(Jobs({{"worker", 4}}), env);
    ASSERT_TRUE(r.ok()) << distribution << ": " << r.status();
    EXPECT_EQ(r->cluster.own_address().substr(0, 2), node) << distribution;
  }
}

TEST(SlurmClusterResolverTest, RefusesLayoutsItCannotMap) {
  Env env = StepEnv("node[1,3]", "1(x2)", 2, 0);
  env["SLURM_DISTRIBUTION"] = "arbitrary";
  absl::StatusOr<SlurmResolution> r = Resolve(Jobs({{"worker", 2}}), env);
  ExpectError(r, absl::StatusCode::kFailedPrecondition,
              "SLURM_DISTRIBUTION is \"arbitrary\"");
  ExpectError(r, absl::StatusCode::kFailedPrecondition,
              "srun --distribution=block or --distribution=cyclic");

  env["SLURM_DISTRIBUTION"] = "planet";
  ExpectError(Resolve(Jobs({{"worker", 2}}), env),
              absl::StatusCode::kFailedPrecondition,
              "SLURM_DISTRIBUTION \"planet\" is a task distribution");
  env["SLURM_DISTRIBUTION"] = "hilbert";
  ExpectError(Resolve(Jobs({{"worker", 2}}), env),
              absl::StatusCode::kFailedPrecondition,
              "SLURM_DISTRIBUTION \"hilbert\" is a task distribution Tessera "
              "cannot map ranks for; launch with srun --distribution=block");

  // What real Slurm set for rank 0 of `srun -m arbitrary -w node3,node1`,
  // had the distribution variable been lost: the cross-check catches it.
  env.erase("SLURM_DISTRIBUTION");
  env["SLURM_NODEID"] = "1";
  ExpectError(Resolve(Jobs({{"worker", 2}}), env),
              absl::StatusCode::kFailedPrecondition,
              "SLURM_NODEID is 1 but the layout computed for rank 0");

  Env local = StepEnv("n[1-2]", "3,1", 4, 1);
  local["SLURM_LOCALID"] = "0";
  ExpectError(Resolve(Jobs({{"worker", 4}}), local),
              absl::StatusCode::kFailedPrecondition,
              "SLURM_LOCALID is 0 but the layout computed for rank 1");
  local["SLURM_LOCALID"] = "x";
  ExpectError(Resolve(Jobs({{"worker", 4}}), local),
              absl::StatusCode::kInvalidArgument,
              "SLURM_LOCALID is \"x\"; expected a non-negative integer");
}

TEST(SlurmClusterResolverTest, PlaneSizeErrors) {
  Env env = StepEnv("n[1-2]", "2(x2)", 4, 0);
  env["SLURM_DISTRIBUTION"] = "plane";
  ExpectError(Resolve(Jobs({{"worker", 4}}), env),
              absl::StatusCode::kInvalidArgument,
              "SLURM_DIST_PLANESIZE, the plane size, is not set");
  env["SLURM_DIST_PLANESIZE"] = "0";
  ExpectError(Resolve(Jobs({{"worker", 4}}), env),
              absl::StatusCode::kInvalidArgument,
              "plane size \"0\" (from SLURM_DIST_PLANESIZE) is not a positive");
  env["SLURM_DISTRIBUTION"] = "plane=x";
  ExpectError(Resolve(Jobs({{"worker", 4}}), env),
              absl::StatusCode::kInvalidArgument,
              "plane size \"x\" (from SLURM_DISTRIBUTION)");
  env["SLURM_DISTRIBUTION"] = "plane=";
  ExpectError(Resolve(Jobs({{"worker", 4}}), env),
              absl::StatusCode::kInvalidArgument,
              "plane size \"\" (from SLURM_DISTRIBUTION)");
  env["SLURM_DISTRIBUTION"] = "block,cyclic";
  ExpectError(Resolve(Jobs({{"worker", 4}}), env),
              absl::StatusCode::kInvalidArgument,
              "names more than one distribution");
}

// ---- GPUs ----

// Resolves `rank` of `tasks_per_node` over n[1-...] as workers with
// CUDA_VISIBLE_DEVICES = `visible` (unset if nullopt).
absl::StatusOr<SlurmResolution> ResolveGpus(
    SlurmOptions options, const std::string& nodelist,
    const std::string& tasks_per_node, int num_tasks, int rank,
    std::optional<std::string> visible) {
  Env env = StepEnv(nodelist, tasks_per_node, num_tasks, rank);
  if (visible.has_value()) env["CUDA_VISIBLE_DEVICES"] = *visible;
  options.jobs = {{"worker", num_tasks}};
  return Resolve(options, env);
}

// TF crashed with zero GPUs (#56894).
TEST(SlurmGpuTest, StepWithoutGpusGivesEveryTaskNone) {
  for (const char* visible : {"", "NoDevFiles", "-1", " "}) {
    for (int rank = 0; rank < 4; ++rank) {
      absl::StatusOr<SlurmResolution> r = ResolveGpus(
          SlurmOptions(), "n[1-2]", "2(x2)", 4, rank, std::string(visible));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->cuda_visible_devices, "");
      EXPECT_EQ(r->gpus_per_task, 0);
    }
  }
  absl::StatusOr<SlurmResolution> unset =
      ResolveGpus(SlurmOptions(), "n1", "3", 3, 2, std::nullopt);
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->cuda_visible_devices, "");
  EXPECT_EQ(unset->gpus_per_task, 0);
}

TEST(SlurmGpuTest, SaysWhenToSetCudaVisibleDevices) {
  struct Case {
    std::optional<std::string> visible;
    int gpus_per_task;
    int gpus_per_node;
    bool set;
  };
  const Case cases[] = {
      {"0,1", -1, -1, true},          // GPUs to hand out.
      {"", -1, -1, true},             // Told: none.
      {"NoDevFiles", -1, -1, true},   // Told: none.
      {std::nullopt, -1, -1, false},  // Nobody said; leave it alone.
      {std::nullopt, 0, -1, true},    // gpus_per_task=0: hide them.
      {std::nullopt, -1, 2, true},    // The node has 2: "0" and "1".
      {std::nullopt, -1, 0, true},    // The node has none.
  };
  for (const Case& c : cases) {
    SlurmOptions options;
    options.gpus_per_task = c.gpus_per_task;
    options.gpus_per_node = c.gpus_per_node;
    absl::StatusOr<SlurmResolution> r =
        ResolveGpus(options, "n1", "2", 2, 1, c.visible);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->set_cuda_visible_devices, c.set)
        << c.visible.value_or("<unset>") << " " << c.gpus_per_task << " "
        << c.gpus_per_node;
  }
}

TEST(SlurmGpuTest, GpusPerTaskZeroMeansNoGpuWhateverIsVisible) {
  SlurmOptions options;
  options.gpus_per_task = 0;
  options.gpus_per_node = 2;  // Even when it contradicts what is visible.
  absl::StatusOr<SlurmResolution> r =
      ResolveGpus(options, "n1", "2", 2, 1, "0,1,2,3");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cuda_visible_devices, "");
  EXPECT_EQ(r->gpus_per_task, 0);
}

TEST(SlurmGpuTest, SplitsTheListedEntriesNotIndices) {
  // Slurm without device cgroups shows the allocated GPUs' real indices.
  const std::vector<std::string> want = {"4,5", "6,7"};
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<SlurmResolution> r =
        ResolveGpus(SlurmOptions(), "n1", "2", 2, rank, "4,5,6,7");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->cuda_visible_devices, want[rank]);
  }
  absl::StatusOr<SlurmResolution> uuid =
      ResolveGpus(SlurmOptions(), "n1", "2", 2, 1, "GPU-aaaa, GPU-bbbb");
  ASSERT_TRUE(uuid.ok()) << uuid.status();
  EXPECT_EQ(uuid->cuda_visible_devices, "GPU-bbbb");
  EXPECT_EQ(uuid->gpus_per_task, 1);
}

TEST(SlurmGpuTest, UnevenNodesUseTheBusiestNodeForTheShare) {
  // 3,1 tasks and 4 GPUs per node: 4 / 3 = 1 GPU per task everywhere; the
  // fourth GPU of node 1 and three of node 2 stay idle, as in TF.
  const std::vector<std::string> want = {"0", "1", "2", "0"};
  for (int rank = 0; rank < 4; ++rank) {
    absl::StatusOr<SlurmResolution> r =
        ResolveGpus(SlurmOptions(), "n[1-2]", "3,1", 4, rank, "0,1,2,3");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->cuda_visible_devices, want[rank]) << rank;
    EXPECT_EQ(r->gpus_per_task, 1);
  }
}

TEST(SlurmGpuTest, GpusPerNodeWithoutCudaVisibleDevices) {
  SlurmOptions options;
  options.gpus_per_node = 4;
  absl::StatusOr<SlurmResolution> r =
      ResolveGpus(options, "n[1-2]", "2(x2)", 4, 3, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cuda_visible_devices, "2,3");
  EXPECT_EQ(r->gpus_per_task, 2);

  // More tasks than GPUs: TF's 2 / 4 = 0, and no task gets one.
  options.gpus_per_node = 2;
  r = ResolveGpus(options, "n1", "4", 4, 0, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cuda_visible_devices, "");
  EXPECT_EQ(r->gpus_per_task, 0);
}

TEST(SlurmGpuTest, ExplicitGpusPerTask) {
  SlurmOptions options;
  options.gpus_per_task = 1;
  const std::vector<std::string> want = {"0", "1", "0", "1"};
  for (int rank = 0; rank < 4; ++rank) {
    absl::StatusOr<SlurmResolution> r =
        ResolveGpus(options, "n[1-2]", "2(x2)", 4, rank, "0,1,2,3");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->cuda_visible_devices, want[rank]);
    EXPECT_EQ(r->gpus_per_task, 1);
  }
}

// Slurm's per-task binding (srun --gpus-per-task=1): every task sees only
// its own GPU, renumbered to 0 under device cgroups or with its real index
// without. TF counted 1 GPU per node and handed out indices that do not
// exist; the task keeps what Slurm gave it.
TEST(SlurmGpuTest, PerTaskBindingKeepsTheTasksOwnGpus) {
  for (int rank = 0; rank < 4; ++rank) {
    for (const std::string& visible :
         {std::string("0"), std::to_string(rank)}) {
      absl::StatusOr<SlurmResolution> r =
          ResolveGpus(SlurmOptions(), "n1", "4", 4, rank, visible);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->cuda_visible_devices, visible);
      EXPECT_EQ(r->gpus_per_task, 1);
    }
  }
  // Told the node has 4 GPUs: one visible entry is this task's share.
  SlurmOptions per_node;
  per_node.gpus_per_node = 4;
  absl::StatusOr<SlurmResolution> r =
      ResolveGpus(per_node, "n1", "4", 4, 3, "3");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cuda_visible_devices, "3");
  EXPECT_EQ(r->gpus_per_task, 1);
  // Told each task has 2 GPUs: two entries on a 2-task node are its own.
  SlurmOptions per_task;
  per_task.gpus_per_task = 2;
  r = ResolveGpus(per_task, "n1", "2", 2, 1, "2,3");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cuda_visible_devices, "2,3");
  EXPECT_EQ(r->gpus_per_task, 2);
}

// What srun set (Slurm 22.05.8, 4 GPUs per node from gres) for each rank
// of a step, and what the task should end up with.
struct GpuCase {
  std::string srun;  // For messages.
  std::string tasks_per_node;
  std::string tres_bind;             // SLURMD_TRES_BIND; "" for unset.
  std::vector<std::string> visible;  // Per rank; "<unset>" for unset.
  std::vector<std::string> want;     // Per rank.
};

const GpuCase kObservedGpus[] = {
    {"--gres=gpu:4 (3 tasks)",
     "3",
     "",
     {"0,1,2,3", "0,1,2,3", "0,1,2,3"},
     {"0", "1", "2"}},
    {"--gpus-per-task=1 (3 tasks)",
     "3",
     "gpu:per_task:1",
     {"0", "1", "2"},
     {"0", "1", "2"}},
    // Two GPUs each: without SLURMD_TRES_BIND this would look like a node
    // with 2 GPUs split between 2 tasks.
    {"--ntasks-per-node=2 --gpus-per-task=2",
     "2(x2)",
     "gpu:per_task:2",
     {"0,1", "2,3", "0,1", "2,3"},
     {"0,1", "2,3", "0,1", "2,3"}},
    {"--gpu-bind=verbose,per_task:2",
     "2",
     "gpu:verbose,per_task:2",
     {"0,1", "2,3"},
     {"0,1", "2,3"}},
    {"--gpu-bind=single:1", "2", "gpu:single:1", {"0", "1"}, {"0", "1"}},
    {"--gpu-bind=map_gpu:3,1", "2", "gpu:map_gpu:3,1", {"3", "1"}, {"3", "1"}},
    {"--gpu-bind=mask_gpu:0x3,0xc",
     "2",
     "gpu:mask_gpu:0x3,0xc",
     {"0,1", "2,3"},
     {"0,1", "2,3"}},
    {"--gpu-bind=closest",
     "2",
     "gpu:closest",
     {"0,1,2,3", "0,1,2,3"},
     {"0,1", "2,3"}},
    {"--gpu-bind=none", "2", "gpu:none", {"<unset>", "<unset>"}, {"", ""}},
};

TEST(SlurmGpuTest, WhatSlurmSetsForEachBinding) {
  for (const GpuCase& c : kObservedGpus) {
    const int n = static_cast<int>(c.visible.size());
    for (int rank = 0; rank < n; ++rank) {
      const std::string nodelist =
          c.tasks_per_node == "2(x2)" ? "n[1-2]" : "n1";
      Env env = StepEnv(nodelist, c.tasks_per_node, n, rank);
      if (!c.tres_bind.empty()) env["SLURMD_TRES_BIND"] = c.tres_bind;
      if (c.visible[rank] != "<unset>") {
        env["CUDA_VISIBLE_DEVICES"] = c.visible[rank];
      }
      absl::StatusOr<SlurmResolution> r = Resolve(Jobs({{"worker", n}}), env);
      ASSERT_TRUE(r.ok()) << c.srun << " rank " << rank << ": " << r.status();
      EXPECT_EQ(r->cuda_visible_devices, c.want[rank])
          << c.srun << " rank " << rank;
    }
  }
  // A per-task binding that disagrees with an explicit gpus_per_task.
  Env env = StepEnv("n1", "2", 2, 0);
  env["SLURMD_TRES_BIND"] = "gpu:per_task:2";
  env["CUDA_VISIBLE_DEVICES"] = "0,1";
  SlurmOptions options = Jobs({{"worker", 2}});
  options.gpus_per_task = 1;
  ExpectError(Resolve(options, env), absl::StatusCode::kInvalidArgument,
              "Slurm bound 2 GPU(s) to this task (SLURMD_TRES_BIND), not "
              "gpus_per_task");
}

TEST(SlurmGpuTest, InconsistentGpuCountsAreErrors) {
  SlurmOptions options;
  options.gpus_per_task = 3;
  ExpectError(ResolveGpus(options, "n1", "2", 2, 0, "0,1,2,3"),
              absl::StatusCode::kInvalidArgument,
              "2 tasks x 3 GPU(s) need 6 GPUs on one node");
  options.gpus_per_task = 3;
  ExpectError(ResolveGpus(options, "n1", "2", 2, 0, std::nullopt),
              absl::StatusCode::kInvalidArgument,
              "CUDA_VISIBLE_DEVICES lists 0 GPU(s), gpus_per_node is 0");
  options.gpus_per_task = 2;
  ExpectError(ResolveGpus(options, "n1", "2", 2, 0, "0,1,2"),
              absl::StatusCode::kInvalidArgument, "need 4 GPUs");
  options = SlurmOptions();
  options.gpus_per_node = 2;
  ExpectError(ResolveGpus(options, "n1", "2", 2, 0, "0,1,2,3"),
              absl::StatusCode::kInvalidArgument,
              "more GPUs are visible than gpus_per_node says");
  options.gpus_per_node = 8;  // 2 per task, but 1 visible.
  ExpectError(ResolveGpus(options, "n1", "4", 4, 0, "0"),
              absl::StatusCode::kInvalidArgument,
              "neither the node's GPUs nor one task's share");
  ExpectError(ResolveGpus(SlurmOptions(), "n1", "2", 2, 0, "0,,1"),
              absl::StatusCode::kInvalidArgument,
              "CUDA_VISIBLE_DEVICES \"0,,1\" has an empty entry at index 1");
}

// ---- Environment and option errors ----

TEST(SlurmClusterResolverTest, MissingVariablesMeanNotInASlurmStep) {
  const Env full = StepEnv("n1", "2", 2, 0);
  for (const auto& [name, value] : full) {
    Env env = full;
    env.erase(name);
    absl::StatusOr<SlurmResolution> r = Resolve(Jobs({{"worker", 2}}), env);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(r.status().message(),
              name + " is not set: not running inside a Slurm step (use srun)");
  }
  // Inside sbatch but outside srun: only SLURM_PROCID is there.
  ExpectError(Resolve(Jobs({{"worker", 2}}), {{"SLURM_PROCID", "0"}}),
              absl::StatusCode::kFailedPrecondition,
              "SLURM_STEP_NODELIST is not set");
}

TEST(SlurmClusterResolverTest, InconsistentStepVariables) {
  const SlurmOptions options = Jobs({{"worker", 4}});
  Env env = StepEnv("n[1-2]", "2(x2)", 4, 0);
  env["SLURM_PROCID"] = "zero";
  ExpectError(Resolve(options, env), absl::StatusCode::kInvalidArgument,
              "SLURM_PROCID is \"zero\"; expected a non-negative integer");
  env["SLURM_PROCID"] = "-1";
  ExpectError(Resolve(options, env), absl::StatusCode::kInvalidArgument,
              "SLURM_PROCID is \"-1\"");
  ExpectError(Resolve(options, StepEnv("n[1-2]", "2(x2)", 4, 4)),
              absl::StatusCode::kInvalidArgument,
              "SLURM_PROCID is 4 but the step has only 4 tasks");
  env = StepEnv("n[1-2]", "2(x2)", 4, 0);
  env["SLURM_STEP_NUM_TASKS"] = "four";
  ExpectError(Resolve(options, env), absl::StatusCode::kInvalidArgument,
              "SLURM_STEP_NUM_TASKS is \"four\"");
  ExpectError(Resolve(options, StepEnv("n[1-3]", "2(x2)", 4, 0)),
              absl::StatusCode::kInvalidArgument,
              "SLURM_STEP_NODELIST \"n[1-3]\" names 3 node(s) but "
              "SLURM_STEP_TASKS_PER_NODE \"2(x2)\" gives counts for 2");
  ExpectError(Resolve(options, StepEnv("n[1-2]", "2,3", 4, 0)),
              absl::StatusCode::kInvalidArgument,
              "SLURM_STEP_TASKS_PER_NODE \"2,3\" adds up to 5 tasks but "
              "SLURM_STEP_NUM_TASKS is 4");
  ExpectError(Resolve(options, StepEnv("n1,N1", "2(x2)", 4, 0)),
              absl::StatusCode::kInvalidArgument, "names node \"N1\" twice");
  ExpectError(Resolve(options, StepEnv("n[2-1]", "2(x2)", 4, 0)),
              absl::StatusCode::kInvalidArgument,
              "SLURM_STEP_NODELIST: host list \"n[2-1]\": reversed range");
  ExpectError(Resolve(options, StepEnv("n[1-2]", "2(x0)", 4, 0)),
              absl::StatusCode::kInvalidArgument,
              "SLURM_STEP_TASKS_PER_NODE: tasks per node \"2(x0)\"");
}

TEST(SlurmClusterResolverTest, JobCountsMustMatchTheStep) {
  ExpectError(Resolve(Jobs({{"chief", 1}, {"ps", 2}, {"worker", 4}}),
                      StepEnv("n[1-2]", "2(x2)", 4, 0)),
              absl::StatusCode::kInvalidArgument,
              "jobs chief:1,ps:2,worker:4 add up to 7 tasks but the Slurm "
              "step has 4 (SLURM_STEP_NUM_TASKS)");
  ExpectError(Resolve(Jobs({{"ps", 0}, {"worker", 4}}),
                      StepEnv("n[1-2]", "2(x2)", 4, 0)),
              absl::StatusCode::kInvalidArgument,
              "job ps has 0 tasks; every job needs at least 1");
  ExpectError(Resolve(Jobs({{"chief", 2}, {"worker", 2}}),
                      StepEnv("n[1-2]", "2(x2)", 4, 0)),
              absl::StatusCode::kInvalidArgument,
              "cluster.chief has 2 tasks; at most 1 is allowed");
  ExpectError(Resolve(Jobs({{"boss", 1}, {"worker", 3}}),
                      StepEnv("n[1-2]", "2(x2)", 4, 0)),
              absl::StatusCode::kInvalidArgument, "boss");
}

TEST(SlurmClusterResolverTest, PortsMustFit) {
  SlurmOptions options = Jobs({{"worker", 3}});
  options.port_base = 65533;
  absl::StatusOr<SlurmResolution> r =
      Resolve(options, StepEnv("n1", "3", 3, 2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cluster.own_address(), "n1:65535");
  options.jobs = {{"worker", 4}};
  ExpectError(Resolve(options, StepEnv("n1", "4", 4, 0)),
              absl::StatusCode::kInvalidArgument,
              "port_base is 65533; with up to 4 task(s) on one node the ports "
              "run to 65536, outside 1..65535");
  options.port_base = 0;
  ExpectError(Resolve(options, StepEnv("n1", "4", 4, 0)),
              absl::StatusCode::kInvalidArgument, "port_base is 0");
}

// The default argument reads the process environment.
TEST(SlurmClusterResolverTest, ReadsTheProcessEnvironmentByDefault) {
  const Env env = StepEnv("envnode[1-2]", "1(x2)", 2, 1);
  std::map<std::string, std::optional<std::string>> saved;
  for (const char* name :
       {"SLURM_PROCID", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE",
        "SLURM_STEP_NUM_TASKS", "SLURM_DISTRIBUTION", "SLURM_DIST_PLANESIZE",
        "SLURM_NODEID", "SLURM_LOCALID", "CUDA_VISIBLE_DEVICES"}) {
    const char* old = std::getenv(name);
    saved[name] =
        old == nullptr ? std::nullopt : std::optional<std::string>(old);
    unsetenv(name);
  }
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  absl::StatusOr<SlurmResolution> r =
      ResolveSlurmCluster(Jobs({{"worker", 2}}));
  for (const auto& [name, value] : saved) {
    if (value.has_value()) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Own(*r), "worker:1@envnode2:8888");
}

TEST(ParseJobsTest, ParsesNameCountPairs) {
  absl::StatusOr<std::map<std::string, int>> jobs =
      ParseJobs("chief:1,ps:2,worker:4");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(*jobs, (std::map<std::string, int>{
                       {"chief", 1}, {"ps", 2}, {"worker", 4}}));
  jobs = ParseJobs(" worker : 3 , evaluator:1 ");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(*jobs,
            (std::map<std::string, int>{{"evaluator", 1}, {"worker", 3}}));
}

TEST(ParseJobsTest, RejectsMalformedJobs) {
  const std::map<std::string, std::string> cases = {
      {"", "empty"},
      {"  ", "empty"},
      {"ps", "part \"ps\" is not name:count"},
      {"ps:", "count \"\" of job ps is not a positive integer"},
      {"ps:x", "count \"x\" of job ps is not a positive integer"},
      {"ps:-1", "count \"-1\" of job ps"},
      {"ps:1.5", "count \"1.5\" of job ps"},
      {"ps:99999999999", "count \"99999999999\" of job ps"},
      {"ps:0", "job ps has count 0; leave the job out instead"},
      {"boss:1",
       "job \"boss\" in part \"boss:1\" is not one of chief, "
       "evaluator, ps, worker"},
      {"PS:1", "job \"PS\""},
      {":1", "job \"\""},
      {"ps:1,ps:2", "job ps appears twice"},
      {"ps:1,,worker:1", "part 1 is empty"},
      {"ps:1,", "part 1 is empty"},
  };
  for (const auto& [text, detail] : cases) {
    absl::StatusOr<std::map<std::string, int>> jobs = ParseJobs(text);
    ASSERT_FALSE(jobs.ok()) << "\"" << text << "\" parsed";
    EXPECT_EQ(jobs.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(jobs.status().message(), HasSubstr("jobs \"" + text + "\": "));
    EXPECT_THAT(jobs.status().message(), HasSubstr(detail)) << text;
    EXPECT_THAT(jobs.status().message(),
                HasSubstr("expected e.g. chief:1,ps:2,worker:4"));
  }
}

// PlaceRanks allocated SLURM_STEP_NUM_TASKS placements before any bound:
// 2000000000 tasks on one node asked for 16 GB and aborted.
TEST(SlurmClusterResolverTest, HugeTaskCountIsRefusedBeforeAllocating) {
  ExpectError(
      Resolve(SlurmOptions(), StepEnv("n1", "2000000000", 2000000000, 0)),
      absl::StatusCode::kInvalidArgument,
      "SLURM_STEP_NUM_TASKS is 2000000000; at most 1048576 tasks");
  // Under that cap, a node with more tasks than ports is refused by the port
  // range, still before the ranks are placed.
  ExpectError(Resolve(SlurmOptions(), StepEnv("n1", "70000", 70000, 0)),
              absl::StatusCode::kInvalidArgument,
              "with up to 70000 task(s) on one node the ports run to 78887");
}

}  // namespace
}  // namespace tessera
