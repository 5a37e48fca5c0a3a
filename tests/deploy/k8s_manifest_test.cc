// Checks deploy/k8s/tfjob.yaml against what the Kubeflow training operator
// needs and against the real binaries: the three roles with their replica
// counts, the container name and port the operator looks for, each role
// running its own binary, every flag on a command line being one that
// binary defines (from its --helpxml), and the coordinator accepting its
// flags and the TF_CONFIG the operator would give it (--dry_run).
//
// Needs the built binaries (TESSERA_BUILD_DIR, default "build") and the
// source tree (TESSERA_SOURCE_DIR, or the path compiled in).

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/yaml_subset.h"
#include "tests/shell_command.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

struct Role {
  const char* replica_type;  // Key under spec.tfReplicaSpecs.
  const char* task_type;     // TF_CONFIG's name for it.
  int replicas;
  const char* binary;  // Path below the build root; its basename is in
                       // the image's /opt/tessera/bin.
};

constexpr Role kRoles[] = {
    {"Chief", "chief", 1, "coordinator/tessera_coordinator"},
    {"PS", "ps", 2, "ps_server/tessera_ps"},
    {"Worker", "worker", 2, "worker/tessera_worker"},
};

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string SourceDir() {
#ifdef TESSERA_SOURCE_DIR
  return EnvOr("TESSERA_SOURCE_DIR", TESSERA_SOURCE_DIR);
#else
  return EnvOr("TESSERA_SOURCE_DIR", ".");
#endif
}

std::string ShellQuote(absl::string_view s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

// The text between <tag> and </tag> in `xml` from `*pos`, advancing `*pos`
// past it; false when there is none.
bool NextElement(absl::string_view xml, absl::string_view tag, size_t* pos,
                 std::string* text) {
  const std::string open = absl::StrCat("<", tag, ">");
  const std::string close = absl::StrCat("</", tag, ">");
  const size_t start = xml.find(open, *pos);
  if (start == absl::string_view::npos) return false;
  const size_t end = xml.find(close, start);
  if (end == absl::string_view::npos) return false;
  *text =
      std::string(xml.substr(start + open.size(), end - start - open.size()));
  *pos = end + close.size();
  return true;
}

// Flag name -> gflags type ("bool", "int32", ...) of every flag `binary`
// defines, from its --helpxml output.
std::map<std::string, std::string> DefinedFlags(const std::string& binary) {
  const ShellResult run = Shell(ShellQuote(binary) + " --helpxml");
  std::map<std::string, std::string> flags;
  size_t pos = 0;
  std::string flag;
  while (NextElement(run.output, "flag", &pos, &flag)) {
    size_t inner = 0;
    std::string name, type;
    if (NextElement(flag, "name", &inner, &name) &&
        NextElement(flag, "type", &inner, &type)) {
      flags[name] = type;
    }
  }
  return flags;
}

class K8sManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = SourceDir() + "/deploy/k8s/tfjob.yaml";
    std::ifstream in(path);
    ASSERT_TRUE(in) << "cannot open " << path
                    << "; set TESSERA_SOURCE_DIR to the source tree";
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<YamlNode> parsed = ParseYamlSubset(text.str());
    ASSERT_TRUE(parsed.ok()) << path << ": " << parsed.status();
    manifest_ = *std::move(parsed);
  }

  const YamlNode* ReplicaSpec(const Role& role) const {
    const YamlNode* spec = manifest_.Find("spec");
    const YamlNode* specs = spec ? spec->Find("tfReplicaSpecs") : nullptr;
    return specs ? specs->Find(role.replica_type) : nullptr;
  }

  // The role's first container, or nullptr.
  const YamlNode* Container(const Role& role) const {
    const YamlNode* spec = ReplicaSpec(role);
    const YamlNode* tmpl = spec ? spec->Find("template") : nullptr;
    const YamlNode* pod = tmpl ? tmpl->Find("spec") : nullptr;
    const YamlNode* containers = pod ? pod->Find("containers") : nullptr;
    if (containers == nullptr || containers->list.empty()) return nullptr;
    return &containers->list[0];
  }

  // command followed by args, as the container runs them.
  std::vector<std::string> CommandLine(const Role& role) const {
    std::vector<std::string> line;
    const YamlNode* container = Container(role);
    if (container == nullptr) return line;
    for (const char* key : {"command", "args"}) {
      const YamlNode* part = container->Find(key);
      if (part == nullptr) continue;
      for (const YamlNode& item : part->list) line.push_back(item.scalar);
    }
    return line;
  }

  YamlNode manifest_;
};

TEST_F(K8sManifestTest, IsAKubeflowV1TfJob) {
  const YamlNode* api = manifest_.Find("apiVersion");
  const YamlNode* kind = manifest_.Find("kind");
  ASSERT_NE(api, nullptr);
  ASSERT_NE(kind, nullptr);
  EXPECT_EQ(api->scalar, "kubeflow.org/v1");
  EXPECT_EQ(kind->scalar, "TFJob");
  const YamlNode* metadata = manifest_.Find("metadata");
  ASSERT_NE(metadata, nullptr);
  ASSERT_NE(metadata->Find("name"), nullptr);
  EXPECT_FALSE(metadata->Find("name")->scalar.empty());
}

TEST_F(K8sManifestTest, HasExactlyChiefTwoPsAndTwoWorkers) {
  const YamlNode* spec = manifest_.Find("spec");
  ASSERT_NE(spec, nullptr);
  const YamlNode* specs = spec->Find("tfReplicaSpecs");
  ASSERT_NE(specs, nullptr);
  std::set<std::string> types;
  for (const auto& [type, unused] : specs->map) types.insert(type);
  EXPECT_EQ(types, (std::set<std::string>{"Chief", "PS", "Worker"}));
  for (const Role& role : kRoles) {
    const YamlNode* replica = ReplicaSpec(role);
    ASSERT_NE(replica, nullptr) << role.replica_type;
    ASSERT_NE(replica->Find("replicas"), nullptr) << role.replica_type;
    EXPECT_EQ(replica->Find("replicas")->scalar, std::to_string(role.replicas))
        << role.replica_type;
  }
}

// Every process gets the job's token from one Secret, so every call among
// the pods carries it and nobody else's does.
TEST_F(K8sManifestTest, EveryRoleTakesTheJobTokenFromOneSecret) {
  std::set<std::string> secrets;
  for (const Role& role : kRoles) {
    SCOPED_TRACE(role.replica_type);
    const YamlNode* container = Container(role);
    ASSERT_NE(container, nullptr);
    const YamlNode* env = container->Find("env");
    ASSERT_NE(env, nullptr);
    const YamlNode* ref = nullptr;
    for (const YamlNode& var : env->list) {
      const YamlNode* name = var.Find("name");
      const YamlNode* from = var.Find("valueFrom");
      if (name != nullptr && name->scalar == "TESSERA_JOB_TOKEN" &&
          from != nullptr) {
        ref = from->Find("secretKeyRef");
      }
    }
    ASSERT_NE(ref, nullptr) << "no TESSERA_JOB_TOKEN from a secretKeyRef";
    ASSERT_NE(ref->Find("name"), nullptr);
    ASSERT_NE(ref->Find("key"), nullptr);
    secrets.insert(ref->Find("name")->scalar + "/" + ref->Find("key")->scalar);
  }
  EXPECT_EQ(secrets.size(), 1u);
}

// The operator puts TF_CONFIG only into the container named "tensorflow",
// and writes the port named "tfjob-port" into it.
TEST_F(K8sManifestTest, EachRoleRunsItsBinaryInTheContainerTheOperatorSetsUp) {
  for (const Role& role : kRoles) {
    SCOPED_TRACE(role.replica_type);
    const YamlNode* container = Container(role);
    ASSERT_NE(container, nullptr);
    ASSERT_NE(container->Find("name"), nullptr);
    EXPECT_EQ(container->Find("name")->scalar, "tensorflow");
    ASSERT_NE(container->Find("image"), nullptr);
    EXPECT_FALSE(container->Find("image")->scalar.empty());
    const YamlNode* ports = container->Find("ports");
    ASSERT_NE(ports, nullptr);
    bool named = false;
    for (const YamlNode& port : ports->list) {
      const YamlNode* name = port.Find("name");
      named |= name != nullptr && name->scalar == "tfjob-port";
    }
    EXPECT_TRUE(named) << "no port named tfjob-port";

    const std::vector<std::string> line = CommandLine(role);
    ASSERT_FALSE(line.empty());
    const absl::string_view binary = role.binary;
    const std::string basename(binary.substr(binary.rfind('/') + 1));
    EXPECT_EQ(line[0], "/opt/tessera/bin/" + basename);
  }
}

TEST_F(K8sManifestTest, EveryFlagIsDefinedByItsBinary) {
  for (const Role& role : kRoles) {
    SCOPED_TRACE(role.replica_type);
    const std::string binary = absl::StrCat(BuildDir(), "/", role.binary);
    const std::map<std::string, std::string> defined = DefinedFlags(binary);
    ASSERT_GT(defined.count("tf_config"), 0u)
        << binary << " --helpxml listed no flags; build the binaries first";
    const std::vector<std::string> line = CommandLine(role);
    for (size_t i = 1; i < line.size(); ++i) {
      const absl::string_view arg = line[i];
      ASSERT_TRUE(absl::StartsWith(arg, "-"))
          << "\"" << arg << "\" is not a flag; the binaries take no "
          << "positional arguments";
      absl::string_view name = absl::StripPrefix(arg.substr(1), "-");
      name = name.substr(0, name.find('='));
      const bool negated_bool =
          arg.find('=') == absl::string_view::npos &&
          absl::StartsWith(name, "no") &&
          defined.count(std::string(name.substr(2))) > 0 &&
          defined.at(std::string(name.substr(2))) == "bool";
      EXPECT_TRUE(defined.count(std::string(name)) > 0 || negated_bool)
          << binary << " defines no flag --" << name << " (from \"" << arg
          << "\")";
    }
  }
}

// The TF_CONFIG the operator would give the chief pod: service names,
// port 2222 and an "environment" key TensorFlow ignores.
std::string OperatorTfConfig() {
  std::vector<std::string> jobs;
  for (const Role& role : kRoles) {
    std::vector<std::string> addresses;
    for (int i = 0; i < role.replicas; ++i) {
      addresses.push_back(absl::StrCat("\"tessera-fashion-mnist-",
                                       role.task_type, "-", i,
                                       ".default.svc:2222\""));
    }
    jobs.push_back(absl::StrCat("\"", role.task_type, "\":[",
                                absl::StrJoin(addresses, ","), "]"));
  }
  return absl::StrCat("{\"cluster\":{", absl::StrJoin(jobs, ","),
                      "},\"task\":{\"type\":\"chief\",\"index\":0},"
                      "\"environment\":\"cloud\"}");
}

TEST_F(K8sManifestTest, CoordinatorAcceptsItsFlagsAndTheOperatorsTfConfig) {
  const Role& chief = kRoles[0];
  std::vector<std::string> line = CommandLine(chief);
  ASSERT_FALSE(line.empty());
  std::string command =
      absl::StrCat("TF_CONFIG=", ShellQuote(OperatorTfConfig()), " ",
                   ShellQuote(absl::StrCat(BuildDir(), "/", chief.binary)));
  for (size_t i = 1; i < line.size(); ++i) {
    absl::StrAppend(&command, " ", ShellQuote(line[i]));
  }
  // Plans the variables onto the two servers and exits; trains nothing.
  absl::StrAppend(&command, " --dry_run");
  const ShellResult run = Shell(command);
  EXPECT_EQ(run.exit_code, 0) << command << "\n" << run.output;
  EXPECT_THAT(run.output,
              HasSubstr("tessera-fashion-mnist-ps-1.default.svc:2222"));
}

}  // namespace
}  // namespace tessera
