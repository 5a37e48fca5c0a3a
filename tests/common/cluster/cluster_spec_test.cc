#include "common/cluster/cluster_spec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace tessera {
namespace {

// TensorFlow's documented example: chief, 2 workers, 2 ps, an evaluator.
constexpr char kTfExample[] = R"({
  "cluster": {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"],
              "ps": ["h3:2222", "h4:2222"], "evaluator": ["h5:2222"]},
  "task": {"type": "worker", "index": 1},
  "rpc_layer": "grpc"})";

std::string WithCluster(const std::string& cluster,
                        const std::string& task = R"({"type":"worker",
                                                       "index":0})") {
  return R"({"cluster":)" + cluster + R"(,"task":)" + task + "}";
}

// Expects `json` to be rejected with InvalidArgument mentioning `substring`.
void ExpectInvalid(const std::string& json, const std::string& substring) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromTfConfigJson(json);
  ASSERT_FALSE(spec.ok()) << json;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << json;
  EXPECT_NE(spec.status().message().find(substring), std::string::npos)
      << "message: " << spec.status().message() << "\nwanted: " << substring;
}

TEST(ClusterSpecTest, ParsesTensorFlowExample) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromTfConfigJson(kTfExample);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->task().type, "worker");
  EXPECT_EQ(spec->task().index, 1);
  EXPECT_EQ(spec->rpc_layer(), "grpc");
  EXPECT_EQ(spec->num_tasks("worker"), 2);
  EXPECT_EQ(spec->num_tasks("ps"), 2);
  EXPECT_EQ(spec->num_tasks("chief"), 1);
  EXPECT_EQ(spec->num_tasks("evaluator"), 1);
  EXPECT_EQ(spec->tasks("ps"),
            (std::vector<std::string>{"h3:2222", "h4:2222"}));
  EXPECT_TRUE(spec->tasks("nonexistent").empty());
  EXPECT_EQ(spec->own_address(), "h2:2222");
  EXPECT_EQ(*spec->address("ps", 1), "h4:2222");
  EXPECT_TRUE(spec->ValidateForParameterServerTraining().ok());
  EXPECT_EQ(spec->DebugString(),
            "task=worker:1 rpc_layer=grpc chief=[h0:2222] evaluator=[h5:2222] "
            "ps=[h3:2222,h4:2222] worker=[h1:2222,h2:2222]");
}

TEST(ClusterSpecTest, AddressOutOfRangeNamesJobAndIndex) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromTfConfigJson(kTfExample);
  ASSERT_TRUE(spec.ok());
  for (auto [job, index] : {std::pair<const char*, int>{"worker", 2},
                            {"worker", -1},
                            {"nope", 0}}) {
    absl::StatusOr<std::string> address = spec->address(job, index);
    EXPECT_EQ(address.status().code(), absl::StatusCode::kOutOfRange);
    EXPECT_NE(address.status().message().find(job), std::string::npos);
    EXPECT_NE(address.status().message().find(std::to_string(index)),
              std::string::npos);
  }
}

TEST(ClusterSpecTest, RoundTripsThroughJson) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromTfConfigJson(kTfExample);
  ASSERT_TRUE(spec.ok());
  const std::string json = spec->ToTfConfigJson();
  absl::StatusOr<ClusterSpec> again = ClusterSpec::FromTfConfigJson(json);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << json;
  EXPECT_EQ(again->jobs(), spec->jobs());
  EXPECT_EQ(again->task().type, spec->task().type);
  EXPECT_EQ(again->task().index, spec->task().index);
  EXPECT_EQ(again->rpc_layer(), spec->rpc_layer());
  EXPECT_EQ(again->ToTfConfigJson(), json);
}

TEST(ClusterSpecTest, DefaultsAndExtras) {
  // No rpc_layer, an ignored extra key, IPv6 and a missing index on a
  // single-task job.
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromTfConfigJson(
      R"({"cluster": {"chief": ["[::1]:2222"], "ps": ["[fe80::1%eth0]:1"],
                      "worker": ["my-host.example.com:65535"]},
          "task": {"type": "chief"}, "environment": "cloud"})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->rpc_layer(), "grpc");
  EXPECT_EQ(spec->task().index, 0);
  EXPECT_EQ(spec->own_address(), "[::1]:2222");
}

TEST(ClusterSpecTest, EvaluatorMayBeOutsideTheCluster) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromTfConfigJson(WithCluster(
      R"({"worker": ["h1:1"]})", R"({"type": "evaluator", "index": 0})"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->own_address(), "");
}

TEST(ClusterSpecTest, RejectsBadJson) {
  ExpectInvalid("{not json", "TF_CONFIG: not valid JSON: ");
  ExpectInvalid("{not json", "column 3: syntax error");
  ExpectInvalid("{not json", "(byte 3)");
  ExpectInvalid(R"({"cluster": {"worker": ["h1:1"])", "not valid JSON");
  ExpectInvalid("", "not valid JSON");
  ExpectInvalid("[1, 2]", "top level is [1,2]");
}

TEST(ClusterSpecTest, RejectsBadClusterShape) {
  ExpectInvalid(R"({"task": {"type": "worker", "index": 0}})",
                "TF_CONFIG: cluster is missing");
  ExpectInvalid(WithCluster(R"(["h1:1"])"), R"(cluster is ["h1:1"])");
  ExpectInvalid(WithCluster(R"({"worker": "h1:1"})"),
                R"(cluster.worker is "h1:1"; expected an array)");
  ExpectInvalid(WithCluster(R"({"worker": ["h1:1", 2222]})"),
                "cluster.worker[1] is 2222");
  ExpectInvalid(WithCluster(R"({"worker": []})"), "cluster.worker is empty");
  ExpectInvalid(WithCluster(R"({"worker": ["h1:1"], "master": ["h2:1"]})"),
                R"(cluster has unknown job "master")");
}

TEST(ClusterSpecTest, RejectsBadAddresses) {
  const std::pair<const char*, const char*> cases[] = {
      {"localhost", "no :port"},
      {"h:", "port is not a number"},
      {"h:http", "port is not a number"},
      {"h:0", "port 0 is outside 1..65535"},
      {"h:65536", "port 65536 is outside 1..65535"},
      {"h:1234567", "outside 1..65535"},
      {":80", "empty host"},
      {"::1:80", "[addr]:port"},
      {"[::1]", "no :port"},
      {"[::1:80", "no closing ']'"},
      {"[]:80", "bad IPv6"},
      {"h h:80", "bad character"},
      {"", "it is empty"},
  };
  for (const auto& [address, reason] : cases) {
    const std::string cluster =
        std::string(R"({"worker": ["w:1"], "ps": ["p:1", ")") + address +
        R"("]})";
    ExpectInvalid(WithCluster(cluster),
                  std::string("TF_CONFIG: cluster.ps[1] \"") + address +
                      "\" is not host:port");
    ExpectInvalid(WithCluster(cluster), reason);
  }
}

TEST(ClusterSpecTest, RejectsTooManyChiefsOrEvaluators) {
  ExpectInvalid(WithCluster(R"({"chief": ["a:1", "b:1"], "worker": ["c:1"]})"),
                "cluster.chief has 2 tasks; at most 1 is allowed");
  ExpectInvalid(
      WithCluster(R"({"evaluator": ["a:1", "b:1"], "worker": ["c:1"]})"),
      "cluster.evaluator has 2 tasks");
}

TEST(ClusterSpecTest, RejectsDuplicateAddresses) {
  ExpectInvalid(WithCluster(R"({"ps": ["h1:1"], "worker": ["H1:1"]})"),
                R"(cluster.worker[0] "H1:1" duplicates cluster.ps[0])");
  ExpectInvalid(WithCluster(R"({"worker": ["h1:1", "h1:1"]})"),
                "cluster.worker[1] \"h1:1\" duplicates cluster.worker[0]");
}

TEST(ClusterSpecTest, RejectsBadTask) {
  const std::string cluster = R"({"worker": ["h1:1", "h2:1"]})";
  ExpectInvalid(R"({"cluster": {"worker": ["h1:1"]}})",
                "TF_CONFIG: task is missing");
  ExpectInvalid(WithCluster(cluster, "[]"), "task is []");
  ExpectInvalid(WithCluster(cluster, R"({"index": 0})"),
                "task.type is missing");
  ExpectInvalid(WithCluster(cluster, R"({"type": 1, "index": 0})"),
                "task.type is 1; expected a string");
  ExpectInvalid(WithCluster(cluster, R"({"type": "master", "index": 0})"),
                R"(task.type "master" is not one of chief, worker, ps)");
  ExpectInvalid(WithCluster(cluster, R"({"type": "ps", "index": 0})"),
                R"(task.type is "ps" but the cluster has no ps job)");
  ExpectInvalid(WithCluster(cluster, R"({"type": "worker", "index": -1})"),
                "task.index is -1; expected a non-negative integer");
  ExpectInvalid(WithCluster(cluster, R"({"type": "worker", "index": 1.0})"),
                "task.index is 1.0; expected a non-negative integer");
  ExpectInvalid(WithCluster(cluster, R"({"type": "worker", "index": "1"})"),
                R"(task.index is "1")");
  ExpectInvalid(
      WithCluster(cluster, R"({"type": "worker", "index": 99999999999})"),
      "task.index is 99999999999");
  ExpectInvalid(WithCluster(cluster, R"({"type": "worker", "index": 3})"),
                "TF_CONFIG: task.index is 3 but cluster.worker has 2 tasks");
  ExpectInvalid(WithCluster(cluster, R"({"type": "worker"})"),
                "task.index is missing; required because cluster.worker has "
                "2 tasks");
  ExpectInvalid(WithCluster(R"({"worker": ["h1:1"], "evaluator": ["e:1"]})",
                            R"({"type": "evaluator", "index": 1})"),
                "task.index is 1 but cluster.evaluator has 1 tasks");
}

TEST(ClusterSpecTest, RejectsBadRpcLayer) {
  ExpectInvalid(R"({"cluster": {"worker": ["h1:1"]},
                    "task": {"type": "worker", "index": 0}, "rpc_layer": 3})",
                "rpc_layer is 3; expected a non-empty string");
}

TEST(ClusterSpecTest, FromParts) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromParts(
      {{"chief", {"c:1"}}, {"ps", {"p:1"}}, {"worker", {"w:1", "w:2"}}},
      TaskId{"ps", 0});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->own_address(), "p:1");
  EXPECT_EQ(spec->rpc_layer(), "grpc");

  absl::StatusOr<ClusterSpec> bad =
      ClusterSpec::FromParts({{"worker", {"w:1", "w:1"}}}, TaskId{"worker", 0});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("duplicates"), std::string::npos);

  bad = ClusterSpec::FromParts({{"worker", {"w:1"}}}, TaskId{"worker", -2});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("task.index is -2"), std::string::npos);
}

TEST(ClusterSpecTest, ParameterServerRequirements) {
  auto check = [](std::map<std::string, std::vector<std::string>> jobs,
                  const std::string& missing) {
    absl::StatusOr<ClusterSpec> spec =
        ClusterSpec::FromParts(std::move(jobs), TaskId{"worker", 0});
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::Status status = spec->ValidateForParameterServerTraining();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(missing), std::string::npos) << status;
  };
  check({{"ps", {"p:1"}}, {"worker", {"w:1"}}}, "cluster.chief is missing");
  check({{"chief", {"c:1"}}, {"worker", {"w:1"}}}, "cluster.ps is missing");
  absl::StatusOr<ClusterSpec> no_worker = ClusterSpec::FromParts(
      {{"chief", {"c:1"}}, {"ps", {"p:1"}}}, TaskId{"chief", 0});
  ASSERT_TRUE(no_worker.ok());
  EXPECT_NE(no_worker->ValidateForParameterServerTraining().message().find(
                "cluster.worker is missing"),
            std::string::npos);
}

TEST(ClusterSpecTest, FromFile) {
  const std::string path = testing::TempDir() + "/cluster_spec_test.json";
  std::ofstream(path) << kTfExample;
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromFile(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->own_address(), "h2:2222");

  std::ofstream(path) << "{";
  spec = ClusterSpec::FromFile(path);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(path), std::string::npos);
  EXPECT_NE(spec.status().message().find("not valid JSON"), std::string::npos);
  std::remove(path.c_str());
}

TEST(ClusterSpecTest, FromFileMissing) {
  const std::string path = testing::TempDir() + "/no_such_tf_config.json";
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromFile(path);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find(path), std::string::npos);
}

class ClusterSpecEnvTest : public testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("TF_CONFIG");
    had_value_ = old != nullptr;
    if (had_value_) old_value_ = old;
  }
  void TearDown() override {
    if (had_value_) {
      setenv("TF_CONFIG", old_value_.c_str(), 1);
    } else {
      unsetenv("TF_CONFIG");
    }
  }

 private:
  bool had_value_ = false;
  std::string old_value_;
};

TEST_F(ClusterSpecEnvTest, FromEnvironment) {
  unsetenv("TF_CONFIG");
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromEnvironment();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("TF_CONFIG environment variable is "
                                         "not set"),
            std::string::npos);

  setenv("TF_CONFIG", "  ", 1);
  spec = ClusterSpec::FromEnvironment();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("empty"), std::string::npos);

  setenv("TF_CONFIG", "{", 1);
  spec = ClusterSpec::FromEnvironment();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);

  setenv("TF_CONFIG", kTfExample, 1);
  spec = ClusterSpec::FromEnvironment();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->task().index, 1);
}

// Describe() used json::dump(), which recurses once per level: 60000 '['
// overflowed the stack while the error message was being built.
TEST(ClusterSpecTest, DeeplyNestedValueIsDescribedWithoutRecursing) {
  constexpr int kDepth = 200000;
  ExpectInvalid(WithCluster(std::string(kDepth, '[') + std::string(kDepth, ']'),
                            R"({"type":"worker"})"),
                "cluster is an array of 1 element(s) nested more than 16 "
                "levels deep; expected an object");
  ExpectInvalid(WithCluster(R"({"worker":[)" + std::string(kDepth, '[') +
                            std::string(kDepth, ']') + "]}"),
                "cluster.worker[0] is an array of 1 element(s) nested more "
                "than 16 levels deep; expected a \"host:port\" string");
  ExpectInvalid(
      WithCluster(R"({"worker":["h:1"]})",
                  std::string(kDepth, '[') + std::string(kDepth, ']')),
      "task is an array of 1 element(s) nested more than 16 levels "
      "deep");
  std::string objects;
  for (int i = 0; i < kDepth; ++i) objects += R"({"a":)";
  objects += "1" + std::string(kDepth, '}');
  ExpectInvalid(R"({"cluster":{"worker":["h:1"]},"task":{"type":"worker"},)"
                R"("rpc_layer":)" +
                    objects + "}",
                "rpc_layer is an object with 1 key(s) nested more than 16 "
                "levels deep; expected a non-empty string");
  // Shallow values are still shown as they are.
  ExpectInvalid(WithCluster(std::string(16, '[') + std::string(16, ']')),
                "cluster is [[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]");
}

// FromFile used to cap reads itself; it now shares ReadBoundedFile.
TEST(ClusterSpecTest, FromFileRefusesAnEndlessFile) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromFile("/dev/zero");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(
                "TF_CONFIG file \"/dev/zero\" is larger than 16777216 bytes"),
            std::string::npos)
      << spec.status();
}

}  // namespace
}  // namespace tessera
